//! Bounded, clean text (issue 26): what reaches a terminal, a CI log or the fleet page
//! from the registry is bounded by the report format's limits and stripped of control
//! characters. The attacker writes 40 reports over the limits (thousands of failing
//! objects, huge messages full of escape sequences and lines that GitHub Actions and Azure
//! Pipelines read as workflow commands) with curl; one enrolled cluster's own, signed
//! report carries the same hostile text within the limits (an API server's message is the
//! cluster's words, not the agent's). `fleet view` stays a small page; `fleet status`,
//! `fleet wait` and `promote` print no escape byte and no line starting with `::` or `##`.
//! Every drover process runs under a data-segment cap: a reader without limits cannot
//! take the machine down.

mod fleet_support;

use drover_tests::Out;
use fleet_support::{curl_report, workload, Fleet, Target};
use serde_json::{json, Value};

/// Data-segment cap for the drover processes of this test.
const DATA_CAP: u64 = 1 << 30;

/// `drover ARGS --plain-http` under [`DATA_CAP`].
fn drover_capped(args: &[&str]) -> Out {
    let args: Vec<&str> = args.iter().copied().chain(["--plain-http"]).collect();
    drover_tests::run_capped("drover", DATA_CAP, &args, &[("DROVER_KEY_PASSWORD", "")])
}

/// What an attacker puts in every free-text field: terminal escapes (clear screen, a
/// window title, a fake green "Healthy"), C1 CSI, a bidi override, and lines of their own
/// that CI runners obey.
const HOSTILE: &str = "\x1b[2J\x1b]0;owned\x07\x1b[32mHealthy\x1b[0m \u{9b}31m \u{202e}txt.exe\n::add-mask::hunter2\n::error title=pwned::ok\r\n##vso[task.setvariable variable=x]1\n";

/// Asserts that `text` (a process's output) carries nothing a terminal or CI runner obeys.
fn assert_clean(what: &str, text: &str) {
    let bad = text.chars().find(|c| *c != '\n' && drover_proto::text::clean::is_unsafe(*c));
    assert!(bad.is_none(), "{what}: unsafe character {bad:?} in:\n{text}");
    for line in text.lines() {
        let t = line.trim_start();
        assert!(!t.starts_with("::") && !t.starts_with("##"), "{what}: a line a CI runner obeys: {line:?}");
    }
}

fn failing(n: usize, message: &str) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": format!("web-{i}"), "state": "Degraded", "message": message}))
        .collect()
}

#[test]
fn hostile_reports_make_a_small_page_and_reach_no_terminal_raw() {
    let reg = drover_tests::Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.enroll(&["--all-pending"]);
    // c1's own signed report says Degraded with the hostile text in every free field.
    f.rewrite_own_report("edge", "c1", |r| {
        r["health"] = json!("Degraded");
        r["failing"] = json!(failing(3, HOSTILE));
        r["lastAttempt"]["result"] = json!("Failed");
        r["lastAttempt"]["reason"] = json!(HOSTILE);
        r["lastAttempt"]["digest"] = r["appliedDigest"].clone();
    });
    // 40 forged reports over every limit, each just under the 64 KiB a report may take.
    let (_, template) = f.raw_report("edge.c1");
    let long = format!("{}{}", HOSTILE, "x".repeat(1000));
    for i in 0..40 {
        let mut r = template.clone();
        r["clusterName"] = json!(format!("forged-{i:02}"));
        r["failing"] = json!(failing(35, &long));
        r["lastAttempt"]["reason"] = json!(long.repeat(2));
        r["agentVersion"] = json!(HOSTILE.repeat(4));
        let size = serde_json::to_vec(&r).unwrap().len();
        assert!(size < 64 << 10, "{size}");
        curl_report(&f.reg, "fleet/drover-reports", &format!("edge.forged-{i:02}"), &r);
    }

    let prefix = format!("{}/fleet", f.reg);
    let (key, public) = (f.key(), f.pubkey());
    let page = tmp.path().join("fleet.html");
    let out = drover_capped(&["fleet", "view", "--registry", &prefix, "--trust-key", &public, "--out", page.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_clean("fleet view", &format!("{}{}", out.stdout, out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.len() < 512 << 10, "41 reports make a small page, not {} bytes", html.len());
    assert_clean("the page", &html);
    assert!(html.contains("data-cluster=\"edge.forged-00\"") && html.contains("data-untrusted=\"true\""), "the forged reports are shown, untrusted");
    assert!(html.contains("failing: 35 objects, the first 10 kept"), "what was cut is named");

    let channel = f.channel("edge", "prod-ring0");
    let runs: [(&str, Vec<&str>); 3] = [
        ("fleet status", vec!["fleet", "status", "--registry", &prefix, "--trust-key", &public]),
        ("fleet status -o json", vec!["-o", "json", "fleet", "status", "--registry", &prefix, "--trust-key", &public]),
        ("fleet wait", vec!["fleet", "wait", &channel, "--trust-key", &public, "--timeout", "1s", "--interval", "1s"]),
    ];
    for (what, args) in runs {
        let out = drover_capped(&args);
        assert_clean(what, &format!("{}{}", out.stdout, out.stderr));
        assert!(out.stdout.len() + out.stderr.len() < 256 << 10, "{what}: {} bytes of output", out.stdout.len() + out.stderr.len());
    }
    let status = drover_capped(&["fleet", "status", "--registry", &prefix, "--trust-key", &public]);
    assert!(status.stdout.contains("edge.forged-00") && status.stdout.contains("over the report format's limits"), "{}", status.stdout);

    let out = drover_capped(&["promote", &channel, "prod-ring1", "--key", &key, "--trust-key", &public, "--require-healthy", "100%"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_clean("promote", &format!("{}{}", out.stdout, out.stderr));
    let c1 = out.stderr.lines().find(|l| l.contains("edge.c1:")).unwrap_or_else(|| panic!("c1 named: {}", out.stderr));
    assert!(c1.contains("\\u{1b}[2J") && c1.contains("\\n::add-mask"), "the text is shown, escaped, inside the line: {c1}");
}

/// A registry that answers every request with HTTP 500 and an error body full of escapes
/// and workflow commands (JSON `\u001b` decodes to a real ESC): what a hostile registry or
/// a proxy in between says. Stops when the test process ends; answers at most 200 times.
fn hostile_registry() -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in l.incoming().take(200).flatten() {
            let mut conn = conn;
            let mut buf = [0u8; 4096];
            let n = conn.read(&mut buf).unwrap_or(0);
            if buf[..n].starts_with(b"HEAD ") {
                // The tag resolves (the agent's poll), so the GET that follows meets the body.
                let digest = format!("sha256:{}", "0".repeat(64));
                let head = format!("HTTP/1.1 200 OK\r\nDocker-Content-Digest: {digest}\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n");
                let _ = conn.write_all(head.as_bytes());
                continue;
            }
            let body = r#"{"errors":[{"code":"UNKNOWN","message":"\u001b[2J\u001b]0;owned\u0007\n::add-mask::hunter2\n##vso[task.complete result=Succeeded]\u009b31m"}]}"#;
            let head = format!("HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body.as_bytes());
        }
    });
    addr
}

#[test]
fn a_registrys_error_body_reaches_no_terminal_log_or_record_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = hostile_registry();
    let reference = format!("{reg}/fleet/edge:prod");
    let out = drover_capped(&["inspect", &reference]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("HTTP 500") && out.stderr.contains("\\u{1b}[2J"), "the body is shown, escaped: {}", out.stderr);
    assert_clean("drover inspect", &format!("{}{}", out.stdout, out.stderr));

    // The agent: its log line and the attempt it records.
    let f = Fleet::new(&reg, tmp.path());
    let state = f.state_dir("c1");
    let target = format!("dir:{}", tmp.path().join("out").display());
    let out = drover_tests::run(
        "drover-agent",
        &["run", "--once", "--source", &reference, "--plain-http", "--trust-key", &f.pubkey(), "--target", &target, "--state-dir", state.to_str().unwrap()],
        &[],
    );
    assert_ne!(out.code, 0);
    assert_clean("drover-agent run (log)", &out.stderr);
    let status = drover_tests::run_ok("drover-agent", &["status", "--endpoint", "http://127.0.0.1:9", "--state-dir", state.to_str().unwrap()], &[]);
    assert_clean("drover-agent status", &status.stdout);
    let json = drover_tests::run_ok("drover-agent", &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", state.to_str().unwrap()], &[]);
    let reason = json.json()["lastAttempt"]["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("HTTP 500") && !reason.chars().any(drover_proto::text::clean::is_unsafe), "the record holds the cleaned text: {reason:?}");
}
