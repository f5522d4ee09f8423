//! drover-agent under failure: one request per unchanged poll, registry outage and
//! recovery, restart with the registry down (offline re-apply from the cache), kill -9
//! in the middle of an apply, SIGTERM.

mod agent_support;

use agent_support::*;
use drover_tests::run_ok;

fn status_via(listen: &str, state: &str) -> serde_json::Value {
    run_ok("drover-agent", &["status", "-o", "json", "--endpoint", &format!("http://{listen}"), "--state-dir", state], &[]).json()
}

#[test]
fn unchanged_poll_makes_exactly_one_request() {
    let fx = Fx::new();
    let proxy = CountingProxy::start(&fx.reg.addr);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1, Some("k1"), &[]);

    let out = fx.once_from(&source, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = proxy.count();
    assert!(first > 3, "the first apply fetches manifest, blobs and signatures: {:?}", proxy.lines());

    // A new process with the bundle applied: one HEAD, nothing else.
    let out = fx.once_from(&source, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = proxy.lines()[first..].to_vec();
    assert_eq!(lines.len(), 1, "an unchanged poll must make exactly one request: {lines:?}");
    assert!(lines[0].starts_with("HEAD /v2/fleet/edge/manifests/prod "), "{lines:?}");

    // A running agent polling every 200 ms: every request is one HEAD.
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&source, &listen, &["--interval", "200ms"]);
    wait_until(20, "agent ready", || http_get(&listen, "/readyz").map(|(c, _)| c == 200).unwrap_or(false));
    let start = proxy.count();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let metrics = http_get(&listen, "/metrics").unwrap().1;
    let lines = proxy.lines()[start..].to_vec();
    assert!(lines.len() >= 3, "expected several polls: {lines:?}");
    assert!(lines.iter().all(|l| l.starts_with("HEAD ")), "only HEADs while unchanged: {lines:?}");
    assert!(metrics.lines().any(|l| l.starts_with("drover_polls_total{") && l.contains("result=\"Unchanged\"")), "{metrics}");
    assert_eq!(terminate(&mut agent), Some(0));
}

#[test]
fn registry_outage_then_offline_restart_from_cache() {
    let mut fx = Fx::new();
    let d1 = fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let state = fx.state();
    let mut agent = fx.spawn(&fx.tag_ref.clone(), &listen, &["--interval", "300ms"]);
    wait_until(20, "first apply", || http_get(&listen, "/readyz").map(|(c, _)| c == 200).unwrap_or(false));
    assert_eq!(status_via(&listen, &state)["appliedDigest"], d1.as_str());
    let applied = snapshot(&fx.target());

    // Registry down: the agent keeps serving and keeps what is applied.
    fx.reg.stop();
    wait_until(20, "a failed poll", || status_via(&listen, &state)["consecutiveFailures"].as_u64().unwrap_or(0) >= 2);
    let st = status_via(&listen, &state);
    assert_eq!(st["agentRunning"], true);
    assert_eq!(st["appliedDigest"], d1.as_str());
    assert_eq!(st["lastAttempt"]["result"], "Failed", "{st}");
    assert_eq!(http_get(&listen, "/healthz").unwrap().0, 200);
    assert_eq!(http_get(&listen, "/readyz").unwrap().0, 200);
    assert_eq!(snapshot(&fx.target()), applied);

    // Back up with a new bundle: picked up after the backoff.
    fx.reg.restart();
    let d2 = fx.push(&objs(&[cm("app", "a", "2"), cm("app", "b", "2")]), 2, Some("k1"), &[]);
    wait_until(30, "the update after recovery", || status_via(&listen, &state)["appliedDigest"] == d2.as_str());
    let metrics = http_get(&listen, "/metrics").unwrap().1;
    assert!(metrics.contains(&format!("digest=\"{d2}\"")) && metrics.contains("drover_applies_total"), "{metrics}");
    assert_eq!(terminate(&mut agent), Some(0), "SIGTERM must exit 0");

    // Restart with the registry down and the target wiped: re-applied from the cache, ready.
    fx.reg.stop();
    std::fs::remove_dir_all(fx.target()).unwrap();
    let mut agent = fx.spawn(&fx.tag_ref.clone(), &listen, &["--interval", "300ms"]);
    wait_until(20, "ready from the cache", || http_get(&listen, "/readyz").map(|(c, _)| c == 200).unwrap_or(false));
    let st = status_via(&listen, &state);
    assert_eq!(st["appliedDigest"], d2.as_str());
    // The re-apply is recorded; later polls (every 300 ms) may already have failed again.
    let h = run_ok("drover-agent", &["history", "-o", "json", "--endpoint", &format!("http://{listen}")], &[]).json();
    let cached = h.as_array().unwrap().iter().find(|a| a["reason"].as_str().unwrap_or("").contains("cached"));
    assert!(cached.is_some_and(|a| a["result"] == "Applied" && a["digest"] == d2.as_str()), "{h}");
    let files = snapshot(&fx.target().join("manifests"));
    assert_eq!(files.len(), 2);
    assert!(files.values().all(|v| String::from_utf8_lossy(v).contains('2')));
    assert_eq!(terminate(&mut agent), Some(0));

    // With no agent running, status and history read the database directly.
    let st = fx.status();
    assert_eq!(st["agentRunning"], false);
    assert_eq!(st["appliedDigest"], d2.as_str());
    assert!(fx.history().len() >= 3);
}

#[test]
fn kill_9_mid_apply_then_restart_converges() {
    let fx = Fx::new();
    let n = 3000;
    let v1: Vec<_> = (0..n).map(|i| cm("app", &format!("c{i}"), "one")).collect();
    fx.push(&objs(&v1), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let v2: Vec<_> = (0..n).map(|i| cm("app", &format!("c{i}"), "two")).collect();
    let d2 = fx.push(&objs(&v2), 2, Some("k1"), &[]);

    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref.clone(), &listen, &["--interval", "1h"]);
    let stage = fx.target().join(".drover-stage");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut caught = false;
    while std::time::Instant::now() < deadline {
        if stage.exists() {
            caught = true;
            break;
        }
        if agent.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    unsafe_kill(agent.id(), "KILL");
    let _ = agent.wait();
    eprintln!("killed {} the staged apply", if caught { "during" } else { "after" });

    // Whatever the kill left, the next start converges to v2 exactly.
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let files = snapshot(&fx.target());
    assert_eq!(files.len(), n, "exactly the bundle's files, no leftovers");
    assert!(files.values().all(|v| String::from_utf8_lossy(v).contains("two")));
    assert_eq!(fx.status()["appliedDigest"], d2.as_str());
}
