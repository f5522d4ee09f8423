//! Manifests are read with their size cap while streaming: a registry that answers a
//! manifest GET with an endless body gets hung up on at the cap (4 MiB), not read into
//! memory to the end.

mod transport_support;

use std::time::Duration;

use drover_tests::misbehave::EndlessManifestServer;
use drover_tests::spawn::run_within;
use drover_tests::run;
use transport_support::*;

/// The server stops by itself after this many bytes; a client that reads to the end
/// gets all of it.
const ENDLESS: u64 = 512 << 20;
/// What a client that stops at the 4 MiB cap can have been sent (cap plus socket buffers).
const STOPPED_EARLY: u64 = 16 << 20;

#[test]
fn inspect_stops_reading_an_endless_manifest_at_the_cap() {
    let srv = EndlessManifestServer::start(ENDLESS);
    let reference = format!("{}/fleet/app:prod", srv.addr);
    let (out, _) = run_within(Duration::from_secs(120), "drover", &["inspect", &reference, "--plain-http"], &[])
        .unwrap_or_else(|e| panic!("inspect must not hang on an endless manifest: {e}"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("over the limit of 4194304 bytes"), "{}", out.stderr);
    assert!(srv.requests().iter().any(|l| l.starts_with("GET /v2/fleet/app/manifests/prod ")), "{:?}", srv.requests());
    let sent = srv.sent();
    assert!(sent < STOPPED_EARLY, "the client must hang up at the cap, but the server wrote {sent} bytes");
}

#[test]
fn the_agent_stops_reading_an_endless_manifest_at_the_cap() {
    let srv = EndlessManifestServer::start(ENDLESS);
    let tmp = tempfile::tempdir().unwrap();
    let (args, state) = agent_once(tmp.path(), &srv.addr);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _) = run_within(Duration::from_secs(120), "drover-agent", &args, &[]).unwrap_or_else(|e| panic!("the agent must not hang: {e}"));
    assert_ne!(out.code, 0, "{}", out.stderr);
    let st = run("drover-agent", &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", &state], &[]).json();
    let result = st["lastAttempt"]["result"].as_str().unwrap_or("");
    assert!(result == "Rejected" || result == "Failed", "{st}");
    assert!(st["lastAttempt"]["reason"].as_str().unwrap_or("").contains("over the limit"), "{st}");
    let sent = srv.sent();
    assert!(sent < STOPPED_EARLY, "the agent must hang up at the cap, but the server wrote {sent} bytes");
    assert!(!tmp.path().join("out").join("manifests").exists(), "nothing applied");
}
