//! A reader of the state database does not make the agent fail to start. `drover-agent
//! status --state-dir DIR` (and `history`, `plan`) read the database directly when no agent
//! answers, holding its lock for a moment; an agent started (or restarted by its DaemonSet)
//! in that moment waited for nothing and exited "could not acquire lock". Here the test
//! holds the lock the way a reader does (an exclusive `flock` on `DIR/db/db`, what sled
//! takes) for 2 s while the agent starts: the agent waits for it and applies; a lock held
//! past its wait still fails, naming the directory and what to do.

mod agent_support;

use std::time::{Duration, Instant};

use agent_support::{cm, objs, Fx};

/// Holds an exclusive lock on the state database of `fx` (`flock(LOCK_EX)` on
/// `DIR/db/db`, as sled's `try_lock_exclusive` takes it) from a thread, for `secs` seconds
/// or until the returned sender sends or is dropped.
fn hold_lock(fx: &Fx, secs: u64) -> std::sync::mpsc::Sender<()> {
    use std::os::fd::AsRawFd;
    let db = std::path::Path::new(&fx.state()).join("db").join("db");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&db).expect("the state database's file");
    // SAFETY: flock on a file descriptor this function owns; it takes no pointers.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0, "the lock is free before the test takes it");
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _ = stopped.recv_timeout(Duration::from_secs(secs));
        drop(file);
    });
    stop
}

#[test]
fn an_agent_starting_while_a_reader_holds_the_database_waits_and_applies() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    let first = fx.once(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr);

    fx.push(&objs(&[cm("app", "a", "2")]), 2, Some("k1"), &[]);
    let _reader = hold_lock(&fx, 2);
    let started = Instant::now();
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "the agent waits for a reader's lock instead of exiting: {}", out.stderr);
    assert!(started.elapsed() >= Duration::from_millis(1500), "the lock was held while it started ({:?})", started.elapsed());
    let applied = std::fs::read_to_string(fx.target().join("manifests/app/ConfigMap.core.a.yaml")).unwrap_or_default();
    assert!(applied.contains("v: \"2\""), "the second bundle is applied: {applied}");
}

#[test]
fn a_lock_held_past_the_wait_fails_naming_the_directory() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let holder = hold_lock(&fx, 30);
    let started = Instant::now();
    let out = fx.once(&[]);
    let _ = holder.send(());
    assert_ne!(out.code, 0);
    assert!(started.elapsed() < Duration::from_secs(25), "the wait is bounded ({:?})", started.elapsed());
    assert!(out.stderr.contains(&fx.state()) && out.stderr.contains("another agent"), "{}", out.stderr);
}
