//! CPU work off the thread that serves `/healthz`: the agent's runtime is one thread
//! (memory), so reading a large bundle or a large live object, and comparing it, runs on
//! tokio's blocking pool while the runtime keeps answering probes, `/metrics` and the
//! other tasks; a small one is done in place ([`off_thread_if_large`]).

/// Runs `f` on tokio's blocking pool and waits for it (a panic in `f` is resumed here).
pub async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Inputs up to this many bytes are read or written on the async thread itself: it takes
/// microseconds, where handing it to a blocking thread and back (a wake-up each way, the
/// one malloc arena shared) cost more than the work (10,000 new ConfigMaps: ~2 s of the
/// first apply).
pub const INLINE_MAX: usize = 64 << 10;

/// [`off_thread`] for an input of `bytes` bytes larger than [`INLINE_MAX`]; a smaller one
/// is handled here.
pub async fn off_thread_if_large<T: Send + 'static>(bytes: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    if bytes <= INLINE_MAX {
        f()
    } else {
        off_thread(f).await
    }
}
