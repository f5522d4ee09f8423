//! Registry authorisation is reused per (registry, repository, scope): importing many
//! bundles makes O(1) `GET /v2/` requests (none on an anonymous registry), not one per
//! request, and asks a token server at most twice per repository (pull, then push).
//! Counted with a recording proxy in front of the real registry; run with
//! `--nocapture` to see the numbers.

mod transport_support;

use drover_tests::proxy::RecordingProxy;
use drover_tests::token::TokenServer;
use drover_tests::{run, run_ok, Registry, RegistrySetup};
use transport_support::*;

const BUNDLES: usize = 10;

/// Pushes `BUNDLES` bundles (one repository each) to a fresh registry and exports them.
fn archive(tmp: &std::path::Path) -> (Registry, String) {
    let src = Registry::start();
    let mut refs = Vec::new();
    for i in 0..BUNDLES {
        let dir = input(tmp, &format!("b{i}"), &i.to_string());
        let r = src.reference(&format!("fleet/type-{i}:prod"));
        run_ok("drover", &["push", &dir, &r, "--plain-http", "--sequence", "1"], &[]);
        refs.push(r);
    }
    let file = tmp.join("all.tar").display().to_string();
    let mut args = vec!["export", "--out", &file, "--plain-http"];
    args.extend(refs.iter().map(String::as_str));
    run_ok("drover", &args, &[]);
    (src, file)
}

#[test]
fn import_reuses_authorisation_instead_of_asking_before_every_request() {
    let tmp = tempfile::tempdir().unwrap();
    let (_src, file) = archive(tmp.path());

    // Anonymous registry: nothing to authorise, so no GET /v2/ at all.
    let dst = Registry::start();
    let proxy = RecordingProxy::start(&dst.addr);
    let out = run("drover", &["-o", "json", "import", &file, "--to", &format!("{}/mirror", proxy.addr), "--plain-http"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (total, v2) = (proxy.seen().len(), proxy.count("GET /v2/ "));
    eprintln!("anonymous registry: import of {BUNDLES} bundles made {total} requests, {v2} of them GET /v2/");
    assert!(total > 3 * BUNDLES, "every bundle was pushed: {total} requests");
    assert!(v2 <= 1, "GET /v2/ must not precede every request: {v2} of {total}");

    // Token auth: one token per repository and scope, reused.
    let tokens = TokenServer::start(&[("carol", "carol-pw")], false);
    let treg = Registry::start_with(RegistrySetup::default().token(&tokens));
    let tproxy = RecordingProxy::start(&treg.addr);
    let cfg = docker_config(&tmp.path().join("dc"), &[(&tproxy.addr, "carol", "carol-pw")]);
    let out = run(
        "drover",
        &["-o", "json", "import", &file, "--to", &format!("{}/mirror", tproxy.addr), "--plain-http"],
        &[("DOCKER_CONFIG", cfg.to_str().unwrap())],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (total, v2, issued) = (tproxy.seen().len(), tproxy.count("GET /v2/ "), tokens.requests().len());
    eprintln!("token registry: import of {BUNDLES} bundles made {total} requests, {v2} GET /v2/, {issued} token requests");
    assert!(v2 <= 1, "GET /v2/ must not precede every request: {v2} of {total}");
    assert!(issued <= 2 * BUNDLES, "at most a pull and a push token per repository: {issued} token requests for {BUNDLES} repositories");
    let unauthorised_retries = total - tproxy.seen().iter().filter(|s| s.authorization.is_some()).count();
    assert!(unauthorised_retries <= 2, "only the first request goes out without a token: {unauthorised_retries}");
}
