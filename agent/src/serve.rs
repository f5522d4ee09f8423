//! The HTTP surface: `/healthz`, `/readyz`, `/status` (JSON), `/history` (JSON),
//! `/metrics` (Prometheus text) and `/reconcile` (poll now, [`crate::reconcile`]: for
//! clients on the agent's own host only), and the server that carries it with bounds for
//! clients of the port ([`serve`]): the DaemonSet listens on every address under a 64 MiB
//! limit.

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
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
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
        let service = hyper_util::service::TowerToHyperService::new(app.clone().layer(axum::Extension(Peer(peer))));
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
        .route("/reconcile", get(reconcile_result).post(reconcile_now))
        .with_state(shared)
}

/// The address a TCP client connected from.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

#[derive(serde::Deserialize)]
struct ReconcileQuery {
    source: Option<String>,
    attempt: Option<u64>,
    wait: Option<u64>,
}

/// Why this agent does not take a reconcile request: a client of another host, another
/// source, a standby.
fn reconcile_refused(s: &Shared, peer: Option<Peer>, source: Option<&str>) -> Option<Response> {
    if let Some(Peer(addr)) = peer.filter(|p| !p.0.ip().is_loopback()) {
        return Some((StatusCode::FORBIDDEN, format!("reconcile is served to the agent's own host only, not to {}\n", addr.ip())).into_response());
    }
    let st = s.status.lock().expect("status lock");
    if let Some(name) = source.filter(|n| *n != st.source) {
        return Some((StatusCode::NOT_FOUND, format!("this agent polls {}, not {name}\n", st.source)).into_response());
    }
    (st.role == "standby").then(|| (StatusCode::CONFLICT, "this agent stands by: the leader polls; ask the leader's agent\n").into_response())
}

/// `POST /reconcile[?source=NAME]`: wakes the poll loop; answers the attempt's number.
async fn reconcile_now(State(s): State<Arc<Shared>>, peer: Option<axum::Extension<Peer>>, Query(q): Query<ReconcileQuery>) -> Response {
    if let Some(no) = reconcile_refused(&s, peer.map(|p| p.0), q.source.as_deref()) {
        return no;
    }
    (StatusCode::ACCEPTED, Json(serde_json::json!({"attempt": s.reconcile.request()}))).into_response()
}

/// `GET /reconcile?attempt=N[&wait=SECONDS]`: what attempt N did (200), or 202 while it
/// runs (after waiting at most `wait`, at most [`crate::reconcile::RECONCILE_WAIT`]).
async fn reconcile_result(State(s): State<Arc<Shared>>, peer: Option<axum::Extension<Peer>>, Query(q): Query<ReconcileQuery>) -> Response {
    if let Some(no) = reconcile_refused(&s, peer.map(|p| p.0), q.source.as_deref()) {
        return no;
    }
    let Some(attempt) = q.attempt else { return (StatusCode::BAD_REQUEST, "attempt=N is required (POST /reconcile answers it)\n").into_response() };
    let wait = Duration::from_secs(q.wait.unwrap_or(0)).min(crate::reconcile::RECONCILE_WAIT);
    match s.reconcile.result(attempt, wait).await {
        Some(done) => Json(done).into_response(),
        None => (StatusCode::ACCEPTED, Json(serde_json::json!({"attempt": attempt, "running": true}))).into_response(),
    }
}

async fn readyz(State(s): State<Arc<Shared>>) -> Response {
    if s.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: nothing applied yet\n").into_response()
    }
}

async fn status(State(s): State<Arc<Shared>>) -> Response {
    let mut st = s.status.lock().expect("status lock").clone();
    st.ready = s.ready.load(Ordering::Relaxed);
    st.report = s.report.get().map(|r| r.lock().expect("report state lock").clone());
    st.agent_running = true;
    Json(st).into_response()
}

#[derive(serde::Deserialize)]
struct HistoryQuery {
    limit: Option<usize>,
}

async fn history(State(s): State<Arc<Shared>>, Query(q): Query<HistoryQuery>) -> Response {
    match s.store.history(q.limit.unwrap_or(crate::record::HISTORY_CAP)) {
        Ok(h) => Json(h).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], s.metrics.render()).into_response()
}
