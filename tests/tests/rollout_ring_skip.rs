//! The ring skip (issue 26), as a registry writer does it: while the health gate holds
//! `prod-ring0 -> prod-ring1`, one raw HTTP `PUT` copies the signed, never-promoted
//! candidate onto `prod-ring1`. The candidate's signatures verify — only the placement is
//! forged. The ring1 agent must refuse it, keep what it runs and name the missing channel
//! statement; the promoted path (`drover promote --key`) still works, and a channel moved
//! before statements existed is migrated by promoting it again, deliberately
//! (`--migrate-unplaced-source`; without it the promote refuses).

mod agent_support;
mod fleet_support;

use agent_support::snapshot;
use drover_tests::rawreg;
use drover_tests::Registry;
use fleet_support::{workload, Fleet, Target};
use serde_json::Value;

fn agent_state(f: &Fleet, name: &str) -> Value {
    let state = f.state_dir(name);
    drover_tests::run_ok("drover-agent", &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", state.to_str().unwrap()], &[]).json()
}

/// The attacker's write: the manifest `from` names, PUT under tag `to` (raw HTTP).
fn copy_tag(reg: &str, repo: &str, from: &str, to: &str) {
    let (bytes, media_type) = rawreg::manifest(reg, repo, from).expect("the candidate exists");
    rawreg::put_manifest(reg, repo, to, &bytes, &media_type);
}

#[test]
fn a_candidate_copied_onto_a_later_ring_is_refused_and_the_promoted_path_works() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    // Sequence 41 runs on both rings (placed with drover's own writes); the candidate,
    // sequence 43, is published to prod-ring0 only.
    let d41 = f.push("edge", "prod", "prod-ring0", 41, &workload("app", "41", None));
    assert_eq!(f.push("edge", "prod", "prod-ring1", 41, &workload("app", "41", None)), d41);
    f.agent_ok("r1", "edge", "prod", "prod-ring1", Target::Dir, &["--no-report"]);
    let before = snapshot(&f.dir.join("agents/r1/out/manifests"));
    let d43 = f.push("edge", "prod", "prod-ring0", 43, &workload("app", "43-candidate", None));

    // The attack: one PUT, by an attacker with push rights and no key.
    copy_tag(&f.reg, "fleet/edge", "prod-ring0", "prod-ring1");
    assert_eq!(f.digest_of(&f.channel("edge", "prod-ring1")).as_deref(), Some(d43.as_str()), "the tag moved");

    let out = f.agent("r1", "edge", "prod", "prod-ring1", Target::Dir, &["--no-report"]);
    assert_eq!(out.code, 1, "the ring1 agent refuses the candidate:\n{}", out.stderr);
    let st = agent_state(&f, "r1");
    assert_eq!(st["appliedDigest"].as_str(), Some(d41.as_str()), "it keeps what it runs: {st:#}");
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st:#}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("channel prod-ring1") && reason.contains("prod-ring1.statement"), "the reason names the channel and its statement: {reason}");
    assert!(reason.contains("drover promote"), "and says how a channel is placed: {reason}");
    assert_eq!(snapshot(&f.dir.join("agents/r1/out/manifests")), before, "nothing applied");

    // The attacker also copies ring0's statement onto ring1's: it names prod-ring0.
    copy_tag(&f.reg, "fleet/edge", "prod-ring0.statement", "prod-ring1.statement");
    let out = f.agent("r1", "edge", "prod", "prod-ring1", Target::Dir, &["--no-report"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let st = agent_state(&f, "r1");
    assert_eq!(st["appliedDigest"].as_str(), Some(d41.as_str()), "{st:#}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("channel prod-ring1") && reason.contains("statement"), "{reason}");

    // The promoted path: drover promote signs prod-ring1's statement, the agent follows.
    let out = f.drover(&["-o", "json", "promote", &f.channel("edge", "prod-ring0"), "prod-ring1", "--key", &f.key(), "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let promoted = out.json();
    assert_eq!(promoted["digest"], d43.as_str());
    assert!(promoted["statement"]["statement"].as_str().unwrap().ends_with("fleet/edge:prod-ring1.statement"), "{promoted:#}");
    f.agent_ok("r1", "edge", "prod", "prod-ring1", Target::Dir, &["--no-report"]);
    assert_eq!(agent_state(&f, "r1")["appliedDigest"].as_str(), Some(d43.as_str()));

    // The statement as any OCI tool sees it (skopeo), and what it says.
    let raw = drover_tests::tool_ok(
        "skopeo",
        &["inspect", "--raw", "--tls-verify=false", &format!("docker://{}/fleet/edge:prod-ring1.statement", f.reg)],
    );
    let manifest: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(manifest["artifactType"], "application/vnd.drover.channel-statement.v1");
    let blob = rawreg::request(&f.reg, "GET", &format!("/v2/fleet/edge/blobs/{}", manifest["config"]["digest"].as_str().unwrap()), &[], b"").unwrap().body;
    let statement: Value = serde_json::from_slice(&blob).unwrap();
    assert_eq!(
        (statement["repository"].as_str(), statement["channel"].as_str(), statement["digest"].as_str(), statement["sequence"].as_u64()),
        (Some("fleet/edge"), Some("prod-ring1"), Some(d43.as_str()), Some(43))
    );
    assert!(statement["time"].is_string());
}

#[test]
fn a_channel_without_a_statement_is_refused_until_promoted_again() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    let d1 = f.push("edge", "prod", "prod", 1, &workload("app", "1", None));
    f.agent_ok("c1", "edge", "prod", "prod", Target::Dir, &["--no-report"]);
    let d2 = f.push("edge", "prod", "prod", 2, &workload("app", "2", None));
    // A channel as drover before statements left it: the statement tag does not exist.
    let statement = rawreg::manifest(&f.reg, "fleet/edge", "prod.statement").expect("publish signs the statement");
    let deleted = rawreg::request(&f.reg, "DELETE", &format!("/v2/fleet/edge/manifests/{}", rawreg::digest(&statement.0)), &[], b"").unwrap();
    assert_eq!(deleted.status, 202, "{}", String::from_utf8_lossy(&deleted.body));
    let out = f.agent("c1", "edge", "prod", "prod", Target::Dir, &["--no-report"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let st = agent_state(&f, "c1");
    assert_eq!(st["appliedDigest"].as_str(), Some(d1.as_str()));
    let reason = st["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("does not exist") && reason.contains("drover promote") && reason.contains("prod --key") && reason.contains("--migrate-unplaced-source"), "the refusal says how to migrate: {reason}");
    // Without the migration flag, a channel without a statement is not promoted from
    // (a deleted statement must not let a bundle move on), the refusal names the flag.
    let src = f.channel("edge", "prod");
    let out = f.drover(&["promote", &src, "prod", "--key", &f.key(), "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("prod.statement") && out.stderr.contains("--migrate-unplaced-source"), "{}", out.stderr);
    // The migration: promote the channel onto itself, with the key, deliberately.
    let out = f.drover(&["promote", &src, "prod", "--key", &f.key(), "--trust-key", &f.pubkey(), "--migrate-unplaced-source"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("not checked"), "the unchecked source is said: {}", out.stderr);
    f.agent_ok("c1", "edge", "prod", "prod", Target::Dir, &["--no-report"]);
    assert_eq!(agent_state(&f, "c1")["appliedDigest"].as_str(), Some(d2.as_str()));
}
