//! The HTTP surface: `/healthz`, `/readyz` (every source applied), `/status` (JSON, every
//! source), `/history` (JSON; `?source=NAME` for one source's) and
//! `/metrics` (Prometheus text), and the server that carries it with bounds for clients
//! of the port ([`serve`]): the DaemonSet listens on every address under a 64 MiB limit.
//! The same server carries the local channel ([`crate::local`], a Unix socket in the state
//! directory), which only the agent's user can reach; it alone also serves `/reconcile`
//! (poll now, [`local_router`]).
//!
//! Probes never starve: past the connections served at once, a small reserve of
//! connections answers `/healthz` and `/readyz` only (one request each, a one-second head
//! timeout; when it is full the oldest reserve connection gives way to the new one), so
//! that clients holding every ordinary connection cannot fail the kubelet's probes. Each
//! ordinary connection answers a bounded number of requests, then closes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

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
    /// Connections served at once; more go to the probe reserve.
    pub connections: usize,
    /// Requests answered on one connection; the last answer says `Connection: close`.
    pub requests_per_connection: usize,
    /// Connections of the probe reserve (answering `/healthz` and `/readyz` only, one
    /// request each); when it is full, its oldest connection is closed for the new one.
    pub probe_connections: usize,
    /// A reserve connection's request head must arrive within this, and its answer be
    /// written within twice this.
    pub probe_timeout: Duration,
    /// Bytes buffered per connection (a request head longer than this is refused).
    pub head_bytes: usize,
    /// Headers per request.
    pub headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // hyper's smallest buffer is 8 KiB; Prometheus and kubelet send well under 1 KiB.
        Limits {
            header_timeout: Duration::from_secs(5),
            connection_time: Duration::from_secs(60),
            connections: 64,
            requests_per_connection: 100,
            probe_connections: 8,
            probe_timeout: Duration::from_secs(1),
            head_bytes: 16 << 10,
            headers: 32,
        }
    }
}

/// A listener the server accepts connections from (TCP for the port, Unix for the local
/// channel).
pub trait Accept: Send + 'static {
    /// One accepted connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Waits for the next connection.
    fn accept(&mut self) -> impl std::future::Future<Output = std::io::Result<Self::Io>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    async fn accept(&mut self) -> std::io::Result<Self::Io> {
        tokio::net::TcpListener::accept(self).await.map(|(s, _)| s)
    }
}

impl Accept for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;
    async fn accept(&mut self) -> std::io::Result<Self::Io> {
        tokio::net::UnixListener::accept(self).await.map(|(s, _)| s)
    }
}

/// The probe reserve: its open connections, oldest first, each with the signal that
/// closes it.
#[derive(Default)]
struct Reserve {
    open: Mutex<VecDeque<(u64, Arc<Notify>)>>,
    next: AtomicU64,
}

impl Reserve {
    /// Takes a place for a new connection, closing the oldest when `size` are open.
    fn enter(&self, size: usize) -> (u64, Arc<Notify>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        while open.len() >= size.max(1) {
            if let Some((_, oldest)) = open.pop_front() {
                oldest.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = Arc::new(Notify::new());
        open.push_back((id, close.clone()));
        (id, close)
    }

    fn leave(&self, id: u64) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).retain(|(i, _)| *i != id);
    }
}

/// Serves `app` on `listener` within `limits` until the task is dropped: each connection
/// is one HTTP/1.1 task holding at most `head_bytes` of buffer, closed after
/// `header_timeout` without a complete request head, after `requests_per_connection`
/// answers and after `connection_time` in any case. Past `connections`, a new connection
/// joins the probe reserve, where `probes` answers one request.
pub async fn serve<L: Accept>(mut listener: L, app: Router, probes: Router, limits: Limits) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.connections));
    let reserve = Arc::new(Reserve::default());
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before accept: wait a
                // little instead of spinning.
                tracing::warn!("HTTP accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let app = app.clone();
                tokio::spawn(async move {
                    connection(stream, app, limits.header_timeout, limits.requests_per_connection, limits.connection_time, limits).await;
                    drop(slot);
                });
            }
            Err(_) => {
                tracing::debug!("HTTP: {} connections open, a new one joins the probe reserve", limits.connections);
                let (id, close) = reserve.enter(limits.probe_connections);
                let (probes, reserve) = (probes.clone(), reserve.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = connection(stream, probes, limits.probe_timeout, 1, limits.probe_timeout * 2, limits) => {}
                        _ = close.notified() => {}
                    }
                    reserve.leave(id);
                });
            }
        }
    }
}

/// Serves one connection: at most `requests` answers (the last one closing it), a head
/// within `head_timeout`, all within `lifetime`.
async fn connection<I>(stream: I, app: Router, head_timeout: Duration, requests: usize, lifetime: Duration, limits: Limits)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let answered = Arc::new(AtomicUsize::new(0));
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let n = answered.fetch_add(1, Ordering::Relaxed) + 1;
        async move {
            use tower::ServiceExt;
            let mut res = app.oneshot(req.map(axum::body::Body::new)).await?;
            if n >= requests {
                res.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, std::convert::Infallible>(res)
        }
    });
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(head_timeout)
        .keep_alive(requests > 1)
        .max_buf_size(limits.head_bytes)
        .max_headers(limits.headers);
    let conn = b.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    if let Ok(Err(e)) = tokio::time::timeout(lifetime, conn).await {
        tracing::debug!("HTTP connection: {e}");
    }
}

/// The probes alone, for the reserve: anything else is told the agent is busy.
pub fn probes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async { (StatusCode::SERVICE_UNAVAILABLE, "busy: every connection is in use; only /healthz and /readyz are answered now\n") })
        .with_state(shared)
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// The routes of the local channel ([`crate::local`]): the port's, plus the commands that
/// only the agent's own user may send (it is reached through the private state
/// directory): `/reconcile` (poll now, [`crate::reconcile`]).
pub fn local_router(shared: Arc<Shared>) -> Router {
    let local = Router::new().route("/reconcile", get(reconcile_result).post(reconcile_now)).with_state(shared.clone());
    router(shared).merge(local)
}

#[derive(serde::Deserialize)]
struct ReconcileQuery {
    source: Option<String>,
    attempt: Option<u64>,
    wait: Option<u64>,
}

/// The source a reconcile request is for: the one `source` names (by name or
/// reference), else the agent's only source; or why the request is refused (no such
/// source, several and none named, a standby).
fn reconcile_target(s: &Shared, source: Option<&str>) -> Result<Arc<crate::shared::SourceShared>, (StatusCode, String)> {
    if *s.role.lock().expect("role lock") == "standby" {
        return Err((StatusCode::CONFLICT, "this agent stands by: the leader polls; ask the leader's agent\n".into()));
    }
    let polls = || s.sources.iter().map(|x| x.source.as_str()).collect::<Vec<_>>().join(", ");
    match source {
        Some(n) => s
            .sources
            .iter()
            .find(|x| x.name == n || x.source == n)
            .cloned()
            .ok_or_else(|| (StatusCode::NOT_FOUND, format!("this agent polls {}, not {n}\n", polls()))),
        None if s.sources.len() == 1 => Ok(s.sources[0].clone()),
        None => Err((StatusCode::BAD_REQUEST, format!("this agent polls several sources ({}): name one with --source NAME\n", polls()))),
    }
}

/// `POST /reconcile[?source=NAME]`: wakes the source's poll loop; answers the attempt's
/// number.
async fn reconcile_now(State(s): State<Arc<Shared>>, Query(q): Query<ReconcileQuery>) -> Response {
    match reconcile_target(&s, q.source.as_deref()) {
        Ok(src) => (StatusCode::ACCEPTED, Json(serde_json::json!({"attempt": src.reconcile.request()}))).into_response(),
        Err(no) => no.into_response(),
    }
}

/// `GET /reconcile?attempt=N[&wait=SECONDS][&source=NAME]`: what attempt N did (200), or
/// 202 while it runs (after waiting at most `wait`, at most
/// [`crate::reconcile::RECONCILE_WAIT`]).
async fn reconcile_result(State(s): State<Arc<Shared>>, Query(q): Query<ReconcileQuery>) -> Response {
    let src = match reconcile_target(&s, q.source.as_deref()) {
        Ok(src) => src,
        Err(no) => return no.into_response(),
    };
    let Some(attempt) = q.attempt else { return (StatusCode::BAD_REQUEST, "attempt=N is required (POST /reconcile answers it)\n").into_response() };
    let wait = Duration::from_secs(q.wait.unwrap_or(0)).min(crate::reconcile::RECONCILE_WAIT);
    match src.reconcile.result(attempt, wait).await {
        Some(done) => Json(done).into_response(),
        None => (StatusCode::ACCEPTED, Json(serde_json::json!({"attempt": attempt, "running": true}))).into_response(),
    }
}

/// The router.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
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
