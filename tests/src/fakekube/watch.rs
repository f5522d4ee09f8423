//! Watch support: a bounded history of change events (for `resourceVersion=N` resumes)
//! and a broadcast channel that streams new events to `?watch=true` requests as JSON
//! lines (`{"type":"MODIFIED","object":{...}}`).

use super::resources::ResourceInfo;
use super::selector::Selector;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// How many events the history keeps for resuming watches.
const HISTORY: usize = 20_000;

/// One change to one object.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Group of the object.
    pub group: String,
    /// Plural of the object.
    pub plural: String,
    /// Namespace ("" when cluster-scoped).
    pub namespace: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: String,
    /// The object after the change (before, for DELETED).
    pub object: Value,
}

/// Event history plus subscribers.
pub struct Watchers {
    history: VecDeque<Arc<WatchEvent>>,
    tx: broadcast::Sender<Arc<WatchEvent>>,
}

/// What a watch request selects.
#[derive(Clone, Debug)]
pub struct WatchFilter {
    /// The watched resource.
    pub res: ResourceInfo,
    /// Namespace, or all.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: Option<Selector>,
    /// Field selector.
    pub fields: Option<Selector>,
}

impl WatchFilter {
    /// Whether the event concerns this watch.
    pub fn matches(&self, ev: &WatchEvent) -> bool {
        ev.group == self.res.group
            && ev.plural == self.res.plural
            && self
                .namespace
                .as_ref()
                .is_none_or(|n| !self.res.namespaced || n == &ev.namespace)
            && self
                .labels
                .as_ref()
                .is_none_or(|s| s.matches_labels(&ev.object))
            && self
                .fields
                .as_ref()
                .is_none_or(|s| s.matches_fields(&ev.object))
    }

    /// The JSON line for an event, with the watched apiVersion.
    pub fn line(&self, kind: &str, object: &Value) -> String {
        let mut o = object.clone();
        o["apiVersion"] = json!(self.res.api_version());
        format!("{}\n", json!({"type": kind, "object": o}))
    }
}

impl Default for Watchers {
    fn default() -> Self {
        Self::new()
    }
}

impl Watchers {
    /// Empty history, no subscribers.
    pub fn new() -> Watchers {
        Watchers {
            history: VecDeque::new(),
            tx: broadcast::channel(4096).0,
        }
    }

    /// Records an event and sends it to subscribers.
    pub fn emit(&mut self, ev: WatchEvent) {
        let ev = Arc::new(ev);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(ev.clone());
        let _ = self.tx.send(ev);
    }

    /// Events after `rv`, or None when the history no longer reaches back that far.
    pub fn since(&self, rv: u64) -> Option<Vec<Arc<WatchEvent>>> {
        if let Some(first) = self.history.front() {
            if first.rv > rv + 1 && self.history.len() == HISTORY {
                return None;
            }
        }
        Some(self.history.iter().filter(|e| e.rv > rv).cloned().collect())
    }

    /// A receiver of future events.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.tx.subscribe()
    }
}

/// The streaming response of a watch: `initial` lines, then matching events until
/// `timeout`.
pub(crate) fn watch_response(
    filter: WatchFilter,
    initial: Vec<String>,
    rx: tokio::sync::broadcast::Receiver<Arc<super::watch::WatchEvent>>,
    timeout: Duration,
) -> Response {
    let deadline = tokio::time::Instant::now() + timeout;
    let live = futures::stream::unfold((rx, filter), move |(mut rx, filter)| async move {
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Ok(ev)) if filter.matches(&ev) => {
                    let line = filter.line(&ev.kind, &ev.object);
                    return Some((Ok::<Bytes, std::io::Error>(Bytes::from(line)), (rx, filter)));
                }
                Ok(Ok(_)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                    continue
                }
                _ => return None,
            }
        }
    });
    let first = futures::stream::iter(
        initial
            .into_iter()
            .map(|l| Ok::<Bytes, std::io::Error>(Bytes::from(l))),
    );
    let stream = futures::StreamExt::chain(first, live);
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .expect("response")
}
