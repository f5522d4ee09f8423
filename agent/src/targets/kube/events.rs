//! The kube target's Events (docs/kubernetes.md, "Events"): each [`Event`] of the
//! pipeline becomes an `events.k8s.io/v1` Event in the agent's namespace, regarding the
//! source's state ConfigMap by name and uid (`kubectl get events -n drover-system`,
//! `kubectl describe configmap drover-state-...`), written with the agent's own identity.
//! The uid is the one the agent last read or wrote; before the first Event of a new
//! agent, whose ConfigMap may not exist yet, it is asked for, and the ConfigMap created
//! holding no record when missing ([`regarded`]).
//!
//! As client-go's event broadcaster: a repeat of the same Event (type, reason, action,
//! note, regarding) within [`SERIES_WINDOW`] of its last observation is not a new Event
//! but a series — `series.count` and `series.lastObservedTime` — patched on the second
//! occurrence and then at most every [`SERIES_WRITE_GAP`] (and when the agent stops), so a
//! failure that repeats on every poll is one Event with a growing count, not one Event
//! (nor one write) per poll. A series whose Event is gone (the API server's event TTL) is
//! created again.
//!
//! Never blocking, never failing an apply: [`Recorder::record`] only queues (a bounded
//! queue; when it is full the Event is dropped and logged), one background task writes,
//! each request bounded by [`REQUEST_TIMEOUT`] and never retried, a failure logged (the
//! first as a warning, later ones at debug until one succeeds).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use tokio::sync::{mpsc, oneshot};

use crate::events::Event;

/// `reportingController` of every Event.
pub const CONTROLLER: &str = "drover.dev/agent";
/// A repeat this long after the last observation starts a new Event (client-go: 6 min).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// A series is patched at most this often (besides its second occurrence and at the end).
pub const SERIES_WRITE_GAP: Duration = Duration::from_secs(60);
/// Bound of one request to the API server.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Events waiting to be written; more are dropped.
const QUEUE: usize = 64;
/// Series remembered (the oldest are forgotten first).
const MAX_SERIES: usize = 128;

enum Msg {
    Record { regarding: String, blank: Option<Box<Blank>>, event: Event },
    Seen { regarding: String, uid: String },
    Flush(oneshot::Sender<()>),
}

/// The Events of one kube target: a queue and, once the first Event arrives, the task
/// that writes them.
pub struct Recorder {
    client: Client,
    namespace: String,
    instance: String,
    queue: OnceLock<mpsc::Sender<Msg>>,
    dropped: Mutex<u64>,
    /// The uid last told to the writer per regarded ConfigMap.
    uids: Mutex<HashMap<String, String>>,
}

impl Recorder {
    /// Events in `namespace`, written with `client` (the agent's own identity), reported by
    /// this agent (`POD_NAME`, else the host name).
    pub fn new(client: Client, namespace: &str) -> Recorder {
        let instance = crate::config::pod_name().chars().take(128).collect();
        Recorder { client, namespace: namespace.to_string(), instance, queue: OnceLock::new(), dropped: Mutex::new(0), uids: Mutex::default() }
    }

    /// The queue, starting the writer on first use; None outside a runtime.
    fn queue(&self) -> Option<&mpsc::Sender<Msg>> {
        if let Some(q) = self.queue.get() {
            return Some(q);
        }
        let handle = tokio::runtime::Handle::try_current().ok()?;
        Some(self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            let writer = Writer {
                api: Api::namespaced(self.client.clone(), &self.namespace),
                configmaps: Api::namespaced(self.client.clone(), &self.namespace),
                namespace: self.namespace.clone(),
                instance: self.instance.clone(),
                failing: false,
            };
            handle.spawn(writer.run(rx));
            tx
        }))
    }

    fn send(&self, msg: Msg) {
        let Some(q) = self.queue() else { return };
        if q.try_send(msg).is_err() {
            let mut n = self.dropped.lock().expect("dropped lock");
            *n += 1;
            tracing::debug!(dropped = *n, "event queue full: an Event was not recorded");
        }
    }

    /// Queues `event` regarding the ConfigMap `regarding` of the agent's namespace (a
    /// source's state ConfigMap; `blank` is what is created when it does not exist yet);
    /// never blocks.
    pub fn record(&self, regarding: &str, blank: Option<Blank>, event: &Event) {
        self.send(Msg::Record { regarding: regarding.to_string(), blank: blank.map(Box::new), event: event.clone() });
    }

    /// The ConfigMap `regarding` has `uid` (Events then name it, so `kubectl describe
    /// configmap` lists them).
    pub fn seen(&self, regarding: &str, uid: &str) {
        let mut uids = self.uids.lock().expect("uids lock");
        if uids.get(regarding).map(String::as_str) != Some(uid) {
            uids.insert(regarding.to_string(), uid.to_string());
            self.send(Msg::Seen { regarding: regarding.to_string(), uid: uid.to_string() });
        }
    }

    /// Waits at most `timeout` for the queued Events and pending series counts to be written.
    pub async fn flush(&self, timeout: Duration) {
        let Some(q) = self.queue.get() else { return };
        let (tx, rx) = oneshot::channel();
        let start = Instant::now();
        let done = match tokio::time::timeout(timeout, q.send(Msg::Flush(tx))).await {
            Ok(Ok(())) => matches!(tokio::time::timeout(timeout.saturating_sub(start.elapsed()), rx).await, Ok(Ok(()))),
            _ => false,
        };
        if !done {
            tracing::warn!("Events not written within {timeout:?} (the API server gave no answer); the rest are dropped");
        }
    }
}

/// The ConfigMap an Event regards, as it is created when it does not exist yet, and the
/// field manager that creates it.
pub struct Blank {
    /// The object.
    pub object: ConfigMap,
    /// Its field manager.
    pub manager: &'static str,
}

/// The uid of the ConfigMap `name` an Event regards: read, or — when there is none yet (a
/// new agent's first attempt, before anything was applied) — created as `blank` (a plain
/// create, never an apply: a record written meanwhile is kept; the create then fails and
/// the uid is read). `None` when the API server does not tell (Events are best effort).
async fn regarded(api: &Api<ConfigMap>, name: &str, blank: Option<Box<Blank>>) -> Option<String> {
    match api.get_opt(name).await {
        Ok(Some(cm)) => return cm.metadata.uid,
        Ok(None) => {}
        Err(e) => {
            tracing::debug!("reading ConfigMap {name} for its Events: {e}");
            return None;
        }
    }
    let blank = blank?;
    let params = PostParams { field_manager: Some(blank.manager.to_string()), ..Default::default() };
    match api.create(&params, &blank.object).await {
        Ok(cm) => cm.metadata.uid,
        Err(kube::Error::Api(s)) if s.code == 409 => api.get_opt(name).await.ok().flatten().and_then(|cm| cm.metadata.uid),
        Err(e) => {
            tracing::debug!("creating ConfigMap {name} for its Events: {e}");
            None
        }
    }
}

/// One Event as the API server holds it, and what is not written of it yet.
struct Series {
    name: String,
    count: i32,
    written: i32,
    last_observed: Instant,
    last_observed_time: MicroTime,
    last_write: Instant,
}

type Key = (String, Event);

/// The background writer.
struct Writer {
    api: Api<KubeEvent>,
    /// The state ConfigMaps the Events regard (for their uid).
    configmaps: Api<ConfigMap>,
    namespace: String,
    instance: String,
    /// The last request failed (later failures are logged at debug).
    failing: bool,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut series: HashMap<Key, Series> = HashMap::new();
        let mut uids: HashMap<String, String> = HashMap::new();
        let mut tick = tokio::time::interval(SERIES_WRITE_GAP);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Record { regarding, blank, event }) => {
                        let uid = match uids.get(&regarding) {
                            Some(uid) => Some(uid.clone()),
                            None => {
                                let asked = tokio::time::timeout(2 * REQUEST_TIMEOUT, regarded(&self.configmaps, &regarding, blank)).await;
                                let uid = asked.ok().flatten();
                                if let Some(u) = &uid {
                                    uids.insert(regarding.clone(), u.clone());
                                }
                                uid
                            }
                        };
                        self.record(&mut series, regarding, event, uid).await;
                    }
                    Some(Msg::Seen { regarding, uid }) => {
                        uids.insert(regarding, uid);
                    }
                    Some(Msg::Flush(done)) => {
                        self.write_pending(&mut series, Duration::ZERO).await;
                        let _ = done.send(());
                    }
                    None => return,
                },
                _ = tick.tick() => self.write_pending(&mut series, SERIES_WRITE_GAP).await,
            }
        }
    }

    async fn record(&mut self, series: &mut HashMap<Key, Series>, regarding: String, event: Event, uid: Option<String>) {
        let now = Instant::now();
        // Series that ended: their last count written, then forgotten.
        let ended: Vec<Key> = series.iter().filter(|(_, s)| now.duration_since(s.last_observed) > SERIES_WINDOW).map(|(k, _)| k.clone()).collect();
        for k in ended {
            if let Some(mut s) = series.remove(&k) {
                if s.count > s.written {
                    self.patch(&mut s).await;
                }
            }
        }
        let key = (regarding, event);
        if let Some(s) = series.get_mut(&key) {
            s.count += 1;
            s.last_observed = now;
            s.last_observed_time = MicroTime(k8s_openapi::jiff::Timestamp::now());
            let due = s.count == 2 || now.duration_since(s.last_write) >= SERIES_WRITE_GAP;
            if due && !self.patch(s).await {
                // Gone (the API server's TTL): a new Event starts a new series.
                series.remove(&key);
                self.create(series, key, uid).await;
            }
            return;
        }
        if series.len() >= MAX_SERIES {
            if let Some(oldest) = series.iter().min_by_key(|(_, s)| s.last_observed).map(|(k, _)| k.clone()) {
                series.remove(&oldest);
            }
        }
        self.create(series, key, uid).await;
    }

    /// Creates the Event of `key` and remembers it as a series of one.
    async fn create(&mut self, series: &mut HashMap<Key, Series>, key: Key, uid: Option<String>) {
        let (regarding, event) = &key;
        let now = k8s_openapi::jiff::Timestamp::now();
        let name = format!("{regarding}.{:x}", now.as_nanosecond());
        let body = KubeEvent {
            metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(self.namespace.clone()), ..ObjectMeta::default() },
            event_time: Some(MicroTime(now)),
            type_: Some(if event.warning { "Warning" } else { "Normal" }.to_string()),
            reason: Some(event.reason.to_string()),
            action: Some(event.action.clone()),
            note: Some(event.note.clone()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some(self.namespace.clone()),
                name: Some(regarding.clone()),
                uid,
                ..ObjectReference::default()
            }),
            reporting_controller: Some(CONTROLLER.into()),
            reporting_instance: Some(self.instance.clone()),
            ..KubeEvent::default()
        };
        let sent = tokio::time::timeout(REQUEST_TIMEOUT, self.api.create(&PostParams::default(), &body)).await;
        if self.outcome(sent.map(|r| r.map(|_| ())), "creating", &name, false).is_ok() {
            let at = Instant::now();
            series.insert(key, Series { name, count: 1, written: 1, last_observed: at, last_observed_time: MicroTime(now), last_write: at });
        }
    }

    /// Writes the count of `s`; false when its Event is gone.
    async fn patch(&mut self, s: &mut Series) -> bool {
        let patch = serde_json::json!({"series": EventSeries { count: s.count, last_observed_time: s.last_observed_time.clone() }});
        let sent = tokio::time::timeout(REQUEST_TIMEOUT, self.api.patch(&s.name, &PatchParams::default(), &Patch::Merge(&patch))).await;
        s.last_write = Instant::now();
        match self.outcome(sent.map(|r| r.map(|_| ())), "updating", &s.name.clone(), true) {
            Ok(()) => {
                s.written = s.count;
                true
            }
            Err(gone) => !gone,
        }
    }

    /// Writes the counts not written for at least `gap`; a series whose Event is gone is
    /// forgotten (its next repeat creates a new one).
    async fn write_pending(&mut self, series: &mut HashMap<Key, Series>, gap: Duration) {
        let now = Instant::now();
        let mut gone = Vec::new();
        for (k, s) in series.iter_mut() {
            if s.count > s.written && now.duration_since(s.last_write) >= gap && !self.patch(s).await {
                gone.push(k.clone());
            }
        }
        for k in gone {
            series.remove(&k);
        }
    }

    /// Logs a failed request (but a 404 when `gone_ok`); `Err(true)` when the answer was
    /// 404 (the Event, or its namespace, does not exist).
    fn outcome(&mut self, sent: Result<Result<(), kube::Error>, tokio::time::error::Elapsed>, doing: &str, name: &str, gone_ok: bool) -> Result<(), bool> {
        let err = match sent {
            Ok(Ok(())) => {
                self.failing = false;
                return Ok(());
            }
            Ok(Err(e)) => e,
            Err(_) => {
                self.log(format!("{doing} Event {}/{name}: no answer within {REQUEST_TIMEOUT:?}", self.namespace));
                return Err(false);
            }
        };
        let gone = matches!(&err, kube::Error::Api(s) if s.code == 404);
        if !(gone && gone_ok) {
            self.log(format!("{doing} Event {}/{name}: {err}", self.namespace));
        }
        Err(gone)
    }

    fn log(&mut self, message: String) {
        if self.failing {
            tracing::debug!("{message}");
        } else {
            tracing::warn!("{message}; Events are best effort: the agent goes on (RBAC: create and patch events.k8s.io events in its namespace)");
        }
        self.failing = true;
    }
}
