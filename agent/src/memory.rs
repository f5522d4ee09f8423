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
