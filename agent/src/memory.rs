//! Keeping the resident set small on glibc: one malloc arena for the whole process
//! (the runtime is single-threaded; sled's and the resolver's helper threads would
//! otherwise each get an arena), and returning freed heap pages to the kernel after
//! every cycle (a 1,000-object apply allocates a few MiB that glibc would keep).

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
        fn malloc_trim(pad: usize) -> i32;
    }
    const M_ARENA_MAX: i32 = -8;

    pub fn limit_arenas() {
        // SAFETY: mallopt only adjusts allocator tunables; called before other threads start.
        unsafe {
            mallopt(M_ARENA_MAX, 1);
        }
    }

    pub fn trim() {
        // SAFETY: malloc_trim releases free memory at the top of and inside the heap.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Restricts the allocator to one arena (call first thing in `main`).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::limit_arenas();
}

/// Returns freed heap memory to the kernel.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::trim();
}

/// Heap accounting for finding where memory goes (`--features heap-stats`, never in a
/// shipped build): a counting global allocator, and [`mark`] logs the live heap and its
/// peak since the previous mark (`heap` lines at info level, per pipeline stage).
#[cfg(feature = "heap-stats")]
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    struct Counting;

    fn grew(n: usize) {
        let now = LIVE.fetch_add(n, Relaxed) + n;
        PEAK.fetch_max(now, Relaxed);
    }

    // SAFETY: every call is forwarded to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            grew(l.size());
            unsafe { System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            grew(l.size());
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            LIVE.fetch_sub(l.size(), Relaxed);
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            if new >= l.size() {
                grew(new - l.size());
            } else {
                LIVE.fetch_sub(l.size() - new, Relaxed);
            }
            unsafe { System.realloc(p, l, new) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    pub fn mark(at: &str) {
        let live = LIVE.load(Relaxed);
        let peak = PEAK.swap(live, Relaxed);
        tracing::info!(at, live_kib = live / 1024, peak_kib = peak / 1024, "heap");
    }
}

/// Logs the live heap and its peak since the previous mark, reached at `at` (only with
/// `--features heap-stats`; otherwise nothing).
pub fn mark(at: &str) {
    #[cfg(feature = "heap-stats")]
    heap::mark(at);
    let _ = at;
}
