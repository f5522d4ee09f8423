//! The agent's command line as a new user meets it (issue 17, items 2, 3 and 9):
//! `status --state-dir X` answers about the agent of X and says which it is, even with
//! another agent on the endpoint; one-shot runs do not bind the HTTP port; a warning is
//! logged once.

mod cli_support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::World;
use drover_tests::{bin, free_port, run, run_ok};

/// A long-running agent polling `source` with state `state`, serving on `port`.
fn spawn_agent(w: &World, source: &str, state: &str, port: u16) -> Child {
    let target = format!("dir:{}", w.s(&format!("{state}-target")));
    Command::new(bin("drover-agent"))
        .args([
            "run", "--source", source, "--plain-http", "--trust-key", &w.pubkey(), "--expect-cluster-type", "edge", "--expect-environment",
            "prod", "--target", &target, "--state-dir", &w.s(state), "--listen", &format!("127.0.0.1:{port}"), "--interval", "1h",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(w.p(&format!("{state}.log"))).unwrap())
        .spawn()
        .unwrap()
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["status", "-o", "json"];
    a.extend_from_slice(args);
    run_ok("drover-agent", &a, &[]).json()
}

#[test]
fn status_answers_about_the_agent_of_the_state_dir_given() {
    let w = World::new(); // `state`: an agent of fleet/edge:prod ran once and stopped
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let other_source = w.r("fleet/rb:prod");
    let _other = Killed(spawn_agent(&w, &other_source, "other", port));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = run("drover-agent", &["status", "-o", "json", "--endpoint", &endpoint], &[]);
        if o.code == 0 && o.json()["lastAttempt"].is_object() {
            break;
        }
        assert!(Instant::now() < deadline, "the other agent never answered: {}", std::fs::read_to_string(w.p("other.log")).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(100));
    }

    // Another agent answers at the endpoint: the answer is still about `state`.
    let state = w.s("state");
    let st = status_json(&["--state-dir", &state, "--endpoint", &endpoint]);
    assert_eq!(st["source"], w.r("fleet/edge:prod").as_str(), "status shows the agent of --state-dir, not the one at the endpoint: {st}");
    assert_eq!(st["agentRunning"], false, "{st}");
    assert_eq!(st["stateDir"], state.as_str(), "{st}");
    let text = run_ok("drover-agent", &["status", "--state-dir", &state, "--endpoint", &endpoint], &[]);
    assert!(text.stdout.contains(&state), "the table says which agent: {}", text.stdout);
    assert!(text.stdout.contains(&endpoint) && text.stdout.contains(&w.s("other")), "and that the endpoint serves another one: {}", text.stdout);

    // The running agent, by its state directory: through the endpoint it serves.
    let other = w.s("other");
    let st = status_json(&["--state-dir", &other, "--endpoint", &endpoint]);
    assert_eq!((st["source"].as_str(), st["agentRunning"].as_bool()), (Some(other_source.as_str()), Some(true)), "{st}");
    // ... also without --endpoint: through the socket in its state directory.
    let st = status_json(&["--state-dir", &other]);
    assert_eq!((st["source"].as_str(), st["agentRunning"].as_bool()), (Some(other_source.as_str()), Some(true)), "{st}");
    assert_eq!(st["stateDir"], other.as_str());
    // By endpoint alone: the answer names its state directory.
    let text = run_ok("drover-agent", &["status", "--endpoint", &endpoint], &[]);
    assert!(text.stdout.contains(&other) && text.stdout.contains(&other_source), "{}", text.stdout);
}

#[test]
fn one_shot_agents_do_not_bind_the_default_port() {
    let w = World::new();
    // Something (another agent) holds the default listen address.
    let _held = std::net::TcpListener::bind("127.0.0.1:9464");
    let spawn = |state: &str| {
        let target = format!("dir:{}", w.s(&format!("{state}-target")));
        Command::new(bin("drover-agent"))
            .args([
                "run", "--once", "--source", &w.r("fleet/edge:prod"), "--plain-http", "--trust-key", &w.pubkey(), "--expect-cluster-type",
                "edge", "--expect-environment", "prod", "--target", &target, "--state-dir", &w.s(state),
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| spawn("one"));
        let b = s.spawn(|| spawn("two"));
        (a.join().unwrap(), b.join().unwrap())
    });
    for o in [a, b] {
        assert!(o.status.success(), "a one-shot agent failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(w.p("one-target/manifests").is_dir() && w.p("two-target/manifests").is_dir());
}

#[test]
fn a_warning_is_logged_once() {
    let w = World::new();
    // A registry that is down: nothing listens on this port.
    let source = format!("127.0.0.1:{}/fleet/edge:prod", free_port());
    let o = w.agent_once(&source, "w", &[]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let warnings: Vec<&str> = o.stderr.lines().filter(|l| l.contains("WARN") && l.contains(&source)).collect();
    assert_eq!(warnings.len(), 1, "the unreachable registry is logged once:\n{}", o.stderr);
}
