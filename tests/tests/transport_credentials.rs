//! Explicit credentials (`--username`/`--password-stdin`) go only to the registry they
//! were given for: a command that reaches two registries sends the other one what the
//! Docker config holds for it, never the explicit credentials (seen through recording
//! proxies in front of two real registries with different htpasswd users, and a token
//! server that logs who asked).

mod transport_support;

use drover_tests::proxy::RecordingProxy;
use drover_tests::spawn::run_with_stdin;
use drover_tests::token::TokenServer;
use drover_tests::{Registry, RegistrySetup};
use transport_support::*;

struct Two {
    _a: Registry,
    _b: Registry,
    pa: RecordingProxy,
    pb: RecordingProxy,
    tmp: tempfile::TempDir,
    key: String,
    public: String,
}

/// Registry A (user alice) and B (user bob), each behind a recording proxy; a bundle
/// pushed to A with explicit credentials.
fn two() -> Two {
    let a = Registry::start_with(RegistrySetup::default().user("alice", "alice-pw"));
    let b = Registry::start_with(RegistrySetup::default().user("bob", "bob-pw"));
    let (pa, pb) = (RecordingProxy::start(&a.addr), RecordingProxy::start(&b.addr));
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let dir = input(tmp.path(), "app", "1");
    let empty = docker_config(&tmp.path().join("empty"), &[]);
    let out = run_with_stdin(
        "drover",
        &["push", &dir, &format!("{}/fleet/app:prod", pa.addr), "--plain-http", "--sequence", "1", "--key", &key, "--username", "alice", "--password-stdin"],
        &[KEY_ENV, ("DOCKER_CONFIG", empty.to_str().unwrap())],
        "alice-pw\n",
    );
    assert_eq!(out.code, 0, "push to A: {}", out.stderr);
    Two { _a: a, _b: b, pa, pb, tmp, key, public }
}

fn assert_never_sent(proxy: &RecordingProxy, auth: &str, who: &str) {
    let leaked: Vec<_> = proxy.seen().into_iter().filter(|s| s.authorization.as_deref() == Some(auth)).collect();
    assert!(leaked.is_empty(), "{who} received credentials meant for another registry: {leaked:?}");
}

#[test]
fn promote_across_registries_sends_each_registry_only_its_own_credentials() {
    let t = two();
    let cfg = docker_config(&t.tmp.path().join("dc"), &[(&t.pb.addr, "bob", "bob-pw")]);
    let out = run_with_stdin(
        "drover",
        &[
            "promote", &format!("{}/fleet/app:prod", t.pa.addr), &format!("{}/fleet/app:prod", t.pb.addr), "--key", &t.key, trust_flag("promote"), &t.public,
            "--plain-http", "--username", "alice", "--password-stdin", "--credentials-for", &t.pa.addr,
        ],
        &[("DOCKER_CONFIG", cfg.to_str().unwrap())],
        "alice-pw\n",
    );
    assert_eq!(out.code, 0, "promote A -> B: {}", out.stderr);
    assert_never_sent(&t.pb, &basic("alice", "alice-pw"), "B");
    assert_never_sent(&t.pa, &basic("bob", "bob-pw"), "A");
    assert!(t.pb.seen().iter().any(|s| s.authorization.as_deref() == Some(basic("bob", "bob-pw").as_str())), "B got its Docker config credentials");
    assert!(t.pb.count("PUT /v2/fleet/app/manifests/prod ") >= 1, "{:?}", t.pb.lines());
}

#[test]
fn explicit_credentials_for_a_command_that_reaches_two_registries_must_name_their_host() {
    let t = two();
    let cfg = docker_config(&t.tmp.path().join("dc"), &[(&t.pb.addr, "bob", "bob-pw")]);
    let out = run_with_stdin(
        "drover",
        &[
            "promote", &format!("{}/fleet/app:prod", t.pa.addr), &format!("{}/fleet/app:prod", t.pb.addr), "--key", &t.key, trust_flag("promote"), &t.public,
            "--plain-http", "--username", "alice", "--password-stdin",
        ],
        &[("DOCKER_CONFIG", cfg.to_str().unwrap())],
        "alice-pw\n",
    );
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert_never_sent(&t.pb, &basic("alice", "alice-pw"), "B");
    assert!(
        out.stderr.contains("--credentials-for") && out.stderr.contains(&t.pa.addr) && out.stderr.contains(&t.pb.addr),
        "the error names both registries and --credentials-for:\n{}",
        out.stderr
    );
    assert!(t.pb.seen().is_empty(), "nothing was sent to B: {:?}", t.pb.lines());
}

#[test]
fn a_token_realm_of_another_registry_never_sees_explicit_credentials() {
    let t = two();
    let tokens = TokenServer::start(&[("carol", "carol-pw")], false);
    let reg_t = Registry::start_with(RegistrySetup::default().token(&tokens));
    let cfg = docker_config(&t.tmp.path().join("dc"), &[(&reg_t.addr, "carol", "carol-pw")]);
    let env = [KEY_ENV, ("DOCKER_CONFIG", cfg.to_str().unwrap())];
    let dir = input(t.tmp.path(), "other", "2");
    let out = drover_tests::run("drover", &["push", &dir, &reg_t.reference("fleet/other:prod"), "--plain-http", "--sequence", "1", "--key", &t.key], &env);
    assert_eq!(out.code, 0, "push to the token registry with Docker config credentials: {}", out.stderr);

    // One export reaching A (explicit credentials) and T (Docker config, token realm).
    let archive = t.tmp.path().join("both.tar").display().to_string();
    let out = run_with_stdin(
        "drover",
        &[
            "export", &format!("{}/fleet/app:prod", t.pa.addr), &reg_t.reference("fleet/other:prod"), "--out", &archive, "--plain-http",
            "--username", "alice", "--password-stdin", "--credentials-for", &t.pa.addr,
        ],
        &env,
        "alice-pw\n",
    );
    assert_eq!(out.code, 0, "export from A and T: {}", out.stderr);
    let reqs = tokens.requests();
    assert!(!reqs.is_empty(), "the token server was asked");
    assert!(reqs.iter().all(|r| r.user.as_deref() == Some("carol")), "the token realm only ever saw carol: {reqs:?}");
    assert_never_sent(&t.pa, &basic("carol", "carol-pw"), "A");
}
