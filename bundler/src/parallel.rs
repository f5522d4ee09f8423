//! Running independent work on every core (rendering cluster types, parsing input files),
//! results in input order so that what follows does not depend on thread timing.

/// Maps `f` over `items` on up to `available_parallelism` threads, keeping order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(items.len()).max(1);
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || {
                    items.iter().enumerate().skip(k).step_by(threads).map(|(i, t)| (i, f(t))).collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().expect("worker thread panicked") {
                slots[i] = Some(r);
            }
        }
    });
    slots.into_iter().map(|r| r.expect("every item mapped")).collect()
}
