//! The HTTP surface: `/healthz`, `/readyz`, `/status` (JSON), `/history` (JSON) and
//! `/metrics` (Prometheus text).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::shared::Shared;

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
    if s.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: nothing applied yet\n").into_response()
    }
}

async fn status(State(s): State<Arc<Shared>>) -> Response {
    let mut st = s.status.lock().expect("status lock").clone();
    st.ready = s.ready.load(Ordering::Relaxed);
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
