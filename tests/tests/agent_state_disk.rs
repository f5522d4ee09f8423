//! The state directory's disk fills up under a running agent, then gets space back.
//!
//! How the disk is filled: the agent's soft file-size limit (`RLIMIT_FSIZE`) is lowered to
//! 0 on the running process with `prlimit --pid`. From then on every write the agent
//! makes to a regular file fails with `EFBIG` ("File too large") — to sled exactly what a
//! full disk (`ENOSPC`) or a volume remounted read-only (`EROFS`) is: an `io::Error` from
//! `pwrite` on the files it already has open (a `chmod a-w` does not stop writes to open
//! files, and the tests may run as root, where it stops nothing at all). Raising the limit
//! again is the space coming back. The agent is started with `SIGXFSZ` ignored (`trap ""
//! XFSZ` before `exec`), so the limit gives errors and not the signal's default (a core
//! dump). The agent's log goes to a pipe, which the limit does not touch.
//!
//! What the operator must see: the attempt is `Failed` with a reason that names the state
//! database and says what to do, `/status` keeps answering from memory, the metric
//! `drover_state_unwritable` is 1; once writable, the next poll writes what was kept in
//! memory (the outage's attempts included), and a restart reads a consistent state.

mod agent_support;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use agent_support::{cm, http_get, live_status, metric, objs, snapshot, terminate, Fx};
use drover_tests::{bin, tool_ok};
use serde_json::Value;

/// Spawns `drover-agent` with `args`, `SIGXFSZ` ignored and its log collected from a pipe.
fn spawn_agent(args: &[String]) -> (Child, Arc<Mutex<String>>) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; exec \"$0\" \"$@\"")
        .arg(bin("drover-agent"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let (mut err, sink) = (child.stderr.take().unwrap(), log.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (child, log)
}

/// Sets the soft file-size limit of process `pid` (`None`: unlimited).
fn file_size_limit(pid: u32, bytes: Option<u64>) {
    let soft = bytes.map(|b| b.to_string()).unwrap_or_else(|| "unlimited".into());
    tool_ok("prlimit", &["--pid", &pid.to_string(), &format!("--fsize={soft}:unlimited")]);
}

/// Waits until `f` is true; on time-out panics with `/status` and the agent's log.
fn wait_for(secs: u64, what: &str, listen: &str, log: &Mutex<String>, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let st = http_get(listen, "/status").map(|r| r.1).unwrap_or_else(|| "(no answer)".into());
    let log = log.lock().unwrap().clone();
    panic!("timed out after {secs}s waiting for {what}\n/status: {st}\nagent log:\n{log}");
}

fn last_attempt(listen: &str) -> Value {
    live_status(listen)["lastAttempt"].clone()
}

#[test]
fn a_full_state_disk_is_reported_served_from_memory_and_written_once_space_returns() {
    let fx = Fx::new();
    let v1 = fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut args = fx.agent_args(&fx.tag_ref);
    let i = args.iter().position(|a| a == "--listen").unwrap();
    args[i + 1] = listen.clone();
    // A resync (which writes the state database) every 2 s, unchanged polls between.
    args.extend(["--interval", "300ms", "--resync", "2s"].map(String::from));
    let (mut agent, log) = spawn_agent(&args);
    let dump = |what: &str| {
        let log = log.lock().unwrap().clone();
        format!("{what}\nagent log:\n{log}")
    };
    wait_for(60, "v1 applied", &listen, &log, || http_get(&listen, "/status").is_some() && live_status(&listen)["appliedDigest"] == v1.as_str());
    let db = std::fs::canonicalize(fx.p("state")).unwrap().join("db").display().to_string();

    // The disk is full.
    file_size_limit(agent.id(), Some(0));
    wait_for(30, "a Failed attempt naming the state database", &listen, &log, || {
        let a = last_attempt(&listen);
        a["result"] == "Failed" && a["reason"].as_str().is_some_and(|r| r.contains(&db))
    });
    let failed = last_attempt(&listen);
    let reason = failed["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("File too large"), "the system's error is kept: {reason}");
    assert!(reason.contains("free space") && reason.contains("writable"), "says what to do: {reason}");
    assert_eq!(metric(&listen, "drover_state_unwritable "), 1.0, "{}", dump("metric"));
    // The agent keeps running and answering from memory through several polls: unchanged
    // ones (which write nothing, and do not hide the failure) and resyncs.
    let polls = |r: &str| metric(&listen, &format!("drover_polls_total{{result=\"{r}\"}}"));
    let (unchanged, failed) = (polls("Unchanged"), polls("Failed"));
    wait_for(30, "three unchanged polls and another resync while the disk is full", &listen, &log, || {
        let a = last_attempt(&listen);
        assert_eq!(a["result"], "Failed", "the failure stays the last attempt shown: {a:#}");
        polls("Unchanged") >= unchanged + 3.0 && polls("Failed") >= failed + 1.0
    });
    assert!(agent.try_wait().unwrap().is_none(), "{}", dump("the agent exited while the disk was full"));
    let st = live_status(&listen);
    assert_eq!(st["appliedDigest"], v1.as_str(), "{st:#}");
    assert_eq!(st["ready"], true, "the applied bundle is still in place: {st:#}");
    assert_eq!(http_get(&listen, "/healthz").map(|r| r.0), Some(200));
    let (code, body) = http_get(&listen, "/history").unwrap();
    assert_eq!(code, 200, "the history written before the disk filled up is still served: {body}");
    let target_before = snapshot(&fx.target());

    // Space returns: the next poll writes the state again.
    file_size_limit(agent.id(), None);
    wait_for(30, "an Applied attempt after the disk has space again", &listen, &log, || last_attempt(&listen)["result"] == "Applied");
    assert_eq!(metric(&listen, "drover_state_unwritable "), 0.0, "{}", dump("metric after recovery"));
    assert_eq!(snapshot(&fx.target()), target_before, "nothing on the target changed meanwhile");

    // It goes on as before: a new bundle is applied and recorded.
    let v2_objects = vec![cm("app", "a", "2"), cm("app", "c", "2")];
    let v2 = fx.push(&objs(&v2_objects), 2, Some("k1"), &[]);
    wait_for(60, "v2 applied", &listen, &log, || live_status(&listen)["appliedDigest"] == v2.as_str());
    assert_eq!(terminate(&mut agent), Some(0), "{}", dump("SIGTERM exit code"));

    // Restart: the database reads back consistent, with the outage in its history.
    let st = fx.status();
    assert_eq!((st["appliedDigest"].as_str(), st["appliedSequence"].as_u64()), (Some(v2.as_str()), Some(2)), "{st:#}");
    let history = fx.history();
    assert!(
        history.iter().any(|a| a["result"] == "Failed" && a["stage"] == "record" && a["reason"].as_str().is_some_and(|r| r.contains(&db))),
        "the outage is in the history written after it: {history:#?}"
    );
    assert!(!fx.p("state/db/write-probe").exists(), "the probe file is not left behind");
    let once = fx.once(&[]);
    assert_eq!(once.code, 0, "a restarted agent runs on the state: {}", once.stderr);
    let files: Vec<String> = snapshot(&fx.target()).keys().cloned().collect();
    assert_eq!(files, ["manifests/app/ConfigMap.core.a.yaml", "manifests/app/ConfigMap.core.c.yaml"], "target holds v2");
}

#[test]
fn an_agent_killed_while_its_state_disk_is_full_restarts_from_the_state_written_last() {
    let fx = Fx::new();
    let v1 = fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut args = fx.agent_args(&fx.tag_ref);
    let i = args.iter().position(|a| a == "--listen").unwrap();
    args[i + 1] = listen.clone();
    args.extend(["--interval", "300ms", "--resync", "0s"].map(String::from));
    let (mut agent, log) = spawn_agent(&args);
    wait_for(60, "v1 applied", &listen, &log, || http_get(&listen, "/status").is_some() && live_status(&listen)["appliedDigest"] == v1.as_str());

    // The disk fills up; polls go on (each a resync that cannot be recorded); then kill -9.
    file_size_limit(agent.id(), Some(0));
    let polls = metric(&listen, "drover_polls_total{result=\"Failed\"}");
    wait_for(30, "three polls while the disk is full", &listen, &log, || metric(&listen, "drover_polls_total{result=\"Failed\"}") >= polls + 3.0);
    agent_support::unsafe_kill(agent.id(), "KILL");
    let _ = agent.wait();

    // The database opens and reads the state written last: consistent, not corrupt.
    let st = fx.status();
    assert_eq!((st["appliedDigest"].as_str(), st["appliedSequence"].as_u64()), (Some(v1.as_str()), Some(1)), "{st:#}");
    let history = fx.history();
    assert_eq!((history[0]["result"].as_str(), history[0]["digest"].as_str()), (Some("Applied"), Some(v1.as_str())), "{history:#?}");
    // A restarted agent runs on it: the same bundle, then the next one.
    let once = fx.once(&[]);
    assert_eq!(once.code, 0, "{}", once.stderr);
    let v2 = fx.push(&objs(&[cm("app", "a", "2"), cm("app", "b", "2")]), 2, Some("k1"), &[]);
    let once = fx.once(&[]);
    assert_eq!(once.code, 0, "{}", once.stderr);
    let st = fx.status();
    assert_eq!((st["appliedDigest"].as_str(), st["appliedSequence"].as_u64()), (Some(v2.as_str()), Some(2)), "{st:#}");
    let files: Vec<String> = snapshot(&fx.target()).keys().cloned().collect();
    assert_eq!(files, ["manifests/app/ConfigMap.core.a.yaml", "manifests/app/ConfigMap.core.b.yaml"], "target holds v2");
}
