//! Every registry request has a total deadline: a registry that accepts connections
//! and never answers (a stalled socket) makes the agent report `Failed` with a reason
//! naming the timeout and keep polling, and makes `drover inspect`, `pull` and `push`
//! fail with a clear error instead of hanging. The deadline is short here through
//! `DROVER_REGISTRY_TIMEOUT` (read in one place) or `--registry-timeout`.

mod transport_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use drover_tests::misbehave::SilentServer;
use drover_tests::spawn::run_within;
use drover_tests::{bin, run, free_port};
use transport_support::*;

/// Far above the 2 s deadline: only a hang reaches it.
const HANG: Duration = Duration::from_secs(90);

fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out after {secs}s waiting for {what}");
}

#[test]
fn agent_against_a_stalled_registry_reports_the_timeout_and_keeps_polling() {
    let silent = SilentServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let (_, public) = keygen(tmp.path());
    let state = tmp.path().join("state").display().to_string();
    let listen = format!("127.0.0.1:{}", free_port());
    let source = format!("{}/fleet/edge:prod", silent.addr);
    let target = format!("dir:{}", tmp.path().join("out").display());
    let log = std::fs::File::create(tmp.path().join("agent.log")).unwrap();
    let mut agent = Command::new(bin("drover-agent"))
        .args(["run", "--source", &source, "--plain-http", "--trust-key", &public, "--target", &target])
        .args(["--state-dir", &state, "--listen", &listen, "--interval", "1s"])
        .env("DROVER_REGISTRY_TIMEOUT", "2s")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();

    wait_until(60, "two failed polls", || {
        let st = run("drover-agent", &["status", "-o", "json", "--endpoint", &format!("http://{listen}"), "--state-dir", &state], &[]);
        st.code == 0 && st.json()["consecutiveFailures"].as_u64().unwrap_or(0) >= 2
    });
    let st = agent_status(&listen, &state);
    assert_eq!(st["agentRunning"], true, "{st}");
    assert_eq!(st["lastAttempt"]["result"], "Failed", "{st}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("within 2s") && reason.contains("DROVER_REGISTRY_TIMEOUT"), "the reason must name the timeout: {st}");
    assert!(silent.accepted() >= 2, "a second attempt reached the registry: {}", silent.accepted());

    // SIGTERM during a stalled request still ends the agent cleanly.
    let _ = Command::new("kill").arg("-TERM").arg(agent.id().to_string()).status();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let code = loop {
        if let Some(s) = agent.try_wait().unwrap() {
            break s.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = agent.kill();
            panic!("agent did not exit within 15 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0), "SIGTERM must exit 0");
}

#[test]
fn inspect_pull_and_push_against_a_stalled_registry_fail_with_the_deadline() {
    let silent = SilentServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let reference = format!("{}/fleet/app:prod", silent.addr);
    let env = [("DROVER_REGISTRY_TIMEOUT", "2s"), KEY_ENV];
    let out_dir = tmp.path().join("pulled").display().to_string();
    let dir = input(tmp.path(), "app", "1");
    for args in [
        vec!["inspect", reference.as_str(), "--plain-http"],
        vec!["pull", reference.as_str(), "--out", &out_dir, "--plain-http"],
        vec!["push", &dir, reference.as_str(), "--plain-http", "--sequence", "1"],
    ] {
        let (out, _) = run_within(HANG, "drover", &args, &env).unwrap_or_else(|e| panic!("drover must not hang on a stalled registry: {e}"));
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("within 2s") && out.stderr.contains(&silent.addr) && out.stderr.contains("DROVER_REGISTRY_TIMEOUT"),
            "{args:?}: the error must say which registry did not answer within which deadline:\n{}",
            out.stderr
        );
    }
    assert!(!std::path::Path::new(&out_dir).exists(), "a failed pull writes nothing");
}

#[test]
fn the_deadline_is_a_flag_and_bad_values_are_refused() {
    let silent = SilentServer::start();
    let reference = format!("{}/fleet/app:prod", silent.addr);
    let (out, _) = run_within(HANG, "drover", &["inspect", &reference, "--plain-http", "--registry-timeout", "1s"], &[])
        .unwrap_or_else(|e| panic!("drover must not hang: {e}"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    // The message names the setting both programs read (the agent has no flag for it).
    assert!(out.stderr.contains("within 1s") && out.stderr.contains("DROVER_REGISTRY_TIMEOUT"), "{}", out.stderr);

    let before = silent.accepted();
    let out = run("drover", &["inspect", &reference, "--plain-http", "--registry-timeout", "soon"], &[]);
    assert_eq!(out.code, 2, "a malformed flag is a usage error: {}", out.stderr);
    assert!(out.stderr.contains("--registry-timeout"), "{}", out.stderr);

    let out = run("drover", &["inspect", &reference, "--plain-http"], &[("DROVER_REGISTRY_TIMEOUT", "soon")]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("DROVER_REGISTRY_TIMEOUT") && out.stderr.contains("soon"), "the error names the variable and value: {}", out.stderr);
    assert_eq!(silent.accepted(), before, "a bad timeout is refused before any request");
}
