//! CPU work off the thread that serves `/healthz`: the agent's runtime is one thread
//! (memory), so reading a large bundle or a large live object, and comparing it, runs on
//! tokio's blocking pool while the runtime keeps answering probes, `/metrics` and the
//! other tasks.

/// Runs `f` on tokio's blocking pool and waits for it (a panic in `f` is resumed here).
pub async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
