//! TLS and authentication errors say what is wrong and what to do, against the real
//! docker-registry: a plain HTTP registry without `--plain-http`, an HTTPS registry
//! whose CA is not trusted (no `--ca-file`, or the wrong one), `--plain-http` against
//! HTTPS, a certificate for another name, and refused credentials (naming the host and
//! where credentials were looked for).

mod transport_support;

use drover_tests::spawn::run_with_stdin;
use drover_tests::tls::TestCa;
use drover_tests::{free_port, run, Registry, RegistrySetup};
use transport_support::*;

fn agent_once(source: &str, public: &str, dir: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let state = dir.join("state").display().to_string();
    let target = format!("dir:{}", dir.join("out").display());
    let listen = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["run", "--once", "--source", source, "--trust-key", public, "--target", &target, "--state-dir", &state, "--listen", &listen];
    args.extend_from_slice(extra);
    run("drover-agent", &args, env);
    run("drover-agent", &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", &state], &[]).json()
}

#[test]
fn plain_http_registry_without_plain_http_names_the_flag() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let reference = reg.reference("fleet/app:prod");
    let out = run("drover", &["inspect", &reference], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("{} answered plain HTTP", reg.addr)) && out.stderr.contains("--plain-http"),
        "say the registry speaks plain HTTP and name --plain-http:\n{}",
        out.stderr
    );

    let (_, public) = keygen(tmp.path());
    let st = agent_once(&reg.reference("fleet/edge:prod"), &public, tmp.path(), &[], &[]);
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("answered plain HTTP") && reason.contains("--plain-http"), "{st}");
}

#[test]
fn untrusted_or_mismatched_certificates_name_ca_file_and_plain_http_against_https_is_explained() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new("drover test CA");
    let other = TestCa::new("some other CA");
    let ca_file = ca.write(tmp.path(), "ca.pem").display().to_string();
    let other_file = other.write(tmp.path(), "other-ca.pem").display().to_string();
    let reg = Registry::start_with(RegistrySetup::default().tls(ca.issue(&["127.0.0.1", "localhost"])));
    let reference = reg.reference("fleet/app:prod");
    let dir = input(tmp.path(), "app", "1");
    let out = run("drover", &["push", &dir, &reference, "--sequence", "1", "--ca-file", &ca_file], &[]);
    assert_eq!(out.code, 0, "push over TLS with --ca-file: {}", out.stderr);

    let out = run("drover", &["inspect", &reference], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("not trusted") && out.stderr.contains("--ca-file"), "no CA: {}", out.stderr);

    let out = run("drover", &["inspect", &reference, "--ca-file", &other_file], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("not trusted") && out.stderr.contains(&other_file), "wrong CA: {}", out.stderr);

    let out = run("drover", &["inspect", &reference, "--plain-http"], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("HTTPS") && out.stderr.contains("without --plain-http"), "--plain-http against HTTPS: {}", out.stderr);

    let out = run("drover", &["-o", "json", "inspect", &reference, "--ca-file", &ca_file], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    // A certificate for another name.
    let wrong_name = Registry::start_with(RegistrySetup::default().tls(ca.issue(&["registry.example"])));
    let out = run("drover", &["inspect", &wrong_name.reference("fleet/app:prod"), "--ca-file", &ca_file], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("not valid for 127.0.0.1"), "name mismatch: {}", out.stderr);

    // The agent says the same.
    let (_, public) = keygen(tmp.path());
    let st = agent_once(&reg.reference("fleet/edge:prod"), &public, tmp.path(), &[], &[]);
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("not trusted") && reason.contains("--ca-file"), "{st}");
}

#[test]
fn refused_credentials_name_the_host_and_where_credentials_were_looked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = Registry::start_with(RegistrySetup::default().user("alice", "secret"));
    let reference = reg.reference("fleet/app:prod");
    let dir = input(tmp.path(), "app", "1");
    let empty = docker_config(&tmp.path().join("empty"), &[]);
    let empty_env = [("DOCKER_CONFIG", empty.to_str().unwrap())];
    let out = run_with_stdin(
        "drover",
        &["push", &dir, &reference, "--plain-http", "--sequence", "1", "--username", "alice", "--password-stdin"],
        &empty_env,
        "secret\n",
    );
    assert_eq!(out.code, 0, "push with explicit credentials: {}", out.stderr);

    // No credentials anywhere.
    let failed = format!("authentication failed for {}", reg.addr);
    let out = run("drover", &["inspect", &reference, "--plain-http"], &empty_env);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(&failed), "{}", out.stderr);
    assert!(out.stderr.contains(&empty.join("config.json").display().to_string()) && out.stderr.contains("--username"), "where credentials were looked for: {}", out.stderr);

    // Wrong explicit password.
    let out = run_with_stdin("drover", &["inspect", &reference, "--plain-http", "--username", "alice", "--password-stdin"], &empty_env, "wrong\n");
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(&failed) && out.stderr.contains("user alice given on the command line"), "{}", out.stderr);

    // Wrong password in the Docker config.
    let bad = docker_config(&tmp.path().join("bad"), &[(&reg.addr, "alice", "wrong")]);
    let out = run("drover", &["inspect", &reference, "--plain-http"], &[("DOCKER_CONFIG", bad.to_str().unwrap())]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(&failed) && out.stderr.contains(&bad.join("config.json").display().to_string()), "{}", out.stderr);

    // The agent (Docker config only) says the same.
    let (_, public) = keygen(tmp.path());
    let st = agent_once(&reg.reference("fleet/edge:prod"), &public, tmp.path(), &["--plain-http"], &empty_env);
    assert!(st["lastAttempt"]["reason"].as_str().unwrap_or("").contains(&failed), "{st}");
}
