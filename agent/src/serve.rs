//! The HTTP surface: `/healthz`, `/readyz` (every source applied), `/status` (JSON, every
//! source), `/history` (JSON; `?source=NAME` for one source's) and
//! `/metrics` (Prometheus text), and the server that carries it with bounds for clients
//! of the port ([`serve`]): the DaemonSet listens on every address under a 64 MiB limit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::shared::Shared;

/// What one client of the port may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request's head (request line and headers) must arrive within this; a kept-alive
    /// connection that sends no next request is closed after it too (the idle timeout).
    pub header_timeout: Duration,
    /// A connection is closed after this long whatever it does (a client that never reads
    /// its answer).
    pub connection_time: Duration,
    /// Connections served at once; more are closed as soon as they are accepted.
    pub connections: usize,
    /// Bytes buffered per connection (a request head longer than this is refused).
    pub head_bytes: usize,
    /// Headers per request.
    pub headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // hyper's smallest buffer is 8 KiB; Prometheus and kubelet send well under 1 KiB.
        Limits { header_timeout: Duration::from_secs(5), connection_time: Duration::from_secs(60), connections: 64, head_bytes: 16 << 10, headers: 32 }
    }
}

/// Serves `app` on `listener` within `limits` until the task is dropped: each connection
/// is one HTTP/1.1 task holding at most `head_bytes` of buffer, closed after
/// `header_timeout` without a complete request head and after `connection_time` in any
/// case; past `connections` a new connection is closed at once (its descriptor freed).
pub async fn serve(listener: tokio::net::TcpListener, app: Router, limits: Limits) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.connections));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before accept: wait a
                // little instead of spinning.
                tracing::warn!("HTTP accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("HTTP: {} connections open, closing a new one", limits.connections);
            drop(stream);
            continue;
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(limits.head_bytes)
                .max_headers(limits.headers);
            let conn = b.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Ok(Err(e)) = tokio::time::timeout(limits.connection_time, conn).await {
                tracing::debug!("HTTP connection: {e}");
            }
            drop(slot);
        });
    }
}

/// The router.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route("/history", get(history))
        .route("/metrics", get(metrics))
        .with_state(shared)
}

async fn readyz(State(s): State<Arc<Shared>>) -> Response {
    let waiting: Vec<&str> = s.sources.iter().filter(|x| !x.ready.load(Ordering::Relaxed)).map(|x| x.name.as_str()).collect();
    match waiting.as_slice() {
        [] => (StatusCode::OK, "ready\n").into_response(),
        _ if s.sources.len() == 1 => (StatusCode::SERVICE_UNAVAILABLE, "not ready: nothing applied yet\n").into_response(),
        names => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: nothing applied yet for {}\n", names.join(", "))).into_response(),
    }
}

async fn status(State(s): State<Arc<Shared>>) -> Response {
    Json(s.status()).into_response()
}

#[derive(serde::Deserialize)]
struct HistoryQuery {
    limit: Option<usize>,
    /// A source's name: only its attempts.
    source: Option<String>,
}

async fn history(State(s): State<Arc<Shared>>, Query(q): Query<HistoryQuery>) -> Response {
    let limit = q.limit.unwrap_or(crate::record::HISTORY_CAP);
    let references: Vec<String> = match &q.source {
        Some(name) => match s.source(name) {
            Some(src) => vec![src.source.clone()],
            None => {
                let names: Vec<&str> = s.sources.iter().map(|x| x.name.as_str()).collect();
                return (StatusCode::NOT_FOUND, format!("no source is named {:?}; this agent's sources are: {}\n", name, names.join(", "))).into_response();
            }
        },
        None => s.sources.iter().map(|x| x.source.clone()).collect(),
    };
    match s.store.history_of(&references, limit) {
        Ok(h) => Json(h).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], s.metrics.render()).into_response()
}
