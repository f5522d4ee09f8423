//! The whole flow against registries that speak TLS (a test CA) and require
//! authentication (htpasswd users, or a token server), through the built binaries:
//! push, publish (examples/platform), promote across two registries with different
//! users (Docker config), export and import into a token-auth registry, and the agent
//! (Docker config credentials, `--ca-file`) against TLS and token registries.

mod transport_support;

use std::path::{Path, PathBuf};

use drover_tests::tls::TestCa;
use drover_tests::token::TokenServer;
use drover_tests::{free_port, run, Out, Registry, RegistrySetup};
use transport_support::*;

fn ok(out: Out, what: &str) -> serde_json::Value {
    assert_eq!(out.code, 0, "{what} failed:\nstdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    out.json()
}

fn examples_platform() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform")
}

/// `drover-agent run --once` against `source`; returns its status.
fn agent_once(source: &str, public: &str, dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let state = dir.join("state").display().to_string();
    let target = format!("dir:{}", dir.join("out").display());
    let listen = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["run", "--once", "--source", source, "--trust-key", public, "--target", &target, "--state-dir", &state, "--listen", &listen];
    args.extend_from_slice(extra);
    let out = run("drover-agent", &args, env);
    assert_eq!(out.code, 0, "agent --once against {source}: {}", out.stderr);
    run("drover-agent", &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", &state], &[]).json()
}

#[test]
fn push_publish_promote_export_import_and_agent_over_tls_and_auth() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new("drover test CA");
    let ca_file = ca.write(tmp.path(), "ca.pem").display().to_string();
    let names = ["127.0.0.1", "localhost"];
    let r1 = Registry::start_with(RegistrySetup::default().tls(ca.issue(&names)).user("alice", "alice-pw"));
    let r2 = Registry::start_with(RegistrySetup::default().tls(ca.issue(&names)).user("bob", "bob-pw"));
    let tokens = TokenServer::start(&[("carol", "carol-pw")], false);
    let r3 = Registry::start_with(RegistrySetup::default().token(&tokens));
    let cfg = docker_config(&tmp.path().join("dc"), &[(&r1.addr, "alice", "alice-pw"), (&r2.addr, "bob", "bob-pw"), (&r3.addr, "carol", "carol-pw")]);
    let dc = cfg.to_str().unwrap();
    let env = [KEY_ENV, ("DOCKER_CONFIG", dc)];
    let (key, public) = keygen(tmp.path());

    // push (TLS + basic auth from the Docker config)
    let dir = input(tmp.path(), "app", "1");
    let app = r1.reference("fleet/app:prod");
    let pushed = ok(run("drover", &["-o", "json", "push", &dir, &app, "--sequence", "1", "--environment", "prod", "--cluster-type", "edge", "--key", &key, "--ca-file", &ca_file], &env), "push");
    let digest = pushed["digest"].as_str().unwrap().to_string();

    // publish examples/platform
    let published = ok(
        run(
            "drover",
            &["-o", "json", "publish", examples_platform().to_str().unwrap(), "--env", "dev", "--registry", &r1.reference("platform"), "--key", &key, "--revision", "r1", "--ca-file", &ca_file],
            &env,
        ),
        "publish",
    );
    let results = published["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.iter().all(|r| r["changed"] == true), "{published}");

    // promote across two TLS registries with different users
    let dest = r2.reference("fleet/app:prod");
    ok(run("drover", &["-o", "json", "promote", &app, &dest, "--key", &key, trust_flag("promote"), &public, "--ca-file", &ca_file], &env), "promote");
    let verified = ok(run("drover", &["-o", "json", "verify", &dest, trust_flag("verify"), &public, "--ca-file", &ca_file], &env), "verify the copy");
    assert_eq!(verified["digest"], digest.as_str(), "{verified}");

    // export from TLS, import into the token registry
    let archive = tmp.path().join("air.tar").display().to_string();
    ok(run("drover", &["-o", "json", "export", &app, "--out", &archive, "--ca-file", &ca_file], &env), "export");
    let imported = ok(run("drover", &["-o", "json", "import", &archive, "--to", &r3.reference("mirror"), trust_flag("import"), &public, "--plain-http"], &env), "import");
    assert!(imported["manifests"].as_array().is_some_and(|m| !m.is_empty()), "{imported}");
    assert!(tokens.requests().iter().all(|r| r.user.as_deref() == Some("carol") && r.granted), "{:?}", tokens.requests());

    // the agent: Docker config credentials and --ca-file against TLS, tokens against r3
    let st = agent_once(&app, &public, &tmp.path().join("agent-tls"), &["--ca-file", &ca_file], &[("DOCKER_CONFIG", dc)]);
    assert_eq!(st["appliedDigest"], digest.as_str(), "{st}");
    let mirrored = r3.reference("mirror/app:prod"); // --to PREFIX replaces the parent path
    let st = agent_once(&mirrored, &public, &tmp.path().join("agent-token"), &["--plain-http"], &[("DOCKER_CONFIG", dc)]);
    assert_eq!(st["appliedDigest"], digest.as_str(), "{st}");
}
