//! Forged health and forged times (issue 26), written as a registry writer does it — with
//! curl, never through drover — against the health gate:
//!
//! - a forged Healthy report for an enrolled cluster, written without its key (unsigned,
//!   or signed with the attacker's own key), does not let `promote --require-healthy`
//!   through, and the refusal names that cluster; the enrolled clusters' own signed
//!   reports do;
//! - a report from 2099 is not fresh (nor trusted) in `fleet status` or the gate;
//! - a new agent pod (an empty state directory) does not adopt a forged, older
//!   `healthSince`: it keeps only what its own cluster signed.

mod fleet_support;

use base64::Engine as _;
use fleet_support::{curl_report, curl_report_bytes, workload, Fleet, Target};
use serde_json::{json, Value};

fn world() -> (drover_tests::Registry, tempfile::TempDir, Fleet) {
    let reg = drover_tests::Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    (reg, tmp, f)
}

/// `drover promote fleet/edge:prod-ring0 prod-ring1 --require-healthy 100%` (+ `extra`).
fn gated_promote(f: &Fleet, extra: &[&str]) -> drover_tests::Out {
    let src = f.channel("edge", "prod-ring0");
    let (key, public) = (f.key(), f.pubkey());
    let mut a = vec!["promote", src.as_str(), "prod-ring1", "--key", &key, "--trust-key", &public, "--require-healthy", "100%"];
    a.extend_from_slice(extra);
    f.drover(&a)
}

#[test]
fn a_forged_healthy_report_for_an_enrolled_cluster_does_not_open_the_gate() {
    let (_reg, _tmp, f) = world();
    f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    for c in ["e1", "e2"] {
        f.agent_ok(c, "edge", "prod", "prod-ring0", Target::Dir, &[]);
    }
    assert_eq!(f.enroll(&["--all-pending"])["enrolled"], 2);
    // The candidate: e1 runs it, e2 does not (its agent is down).
    let d2 = f.push("edge", "prod", "prod-ring0", 2, &workload("app", "2", None));
    f.agent_ok("e1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let out = gated_promote(&f, &[]);
    assert_eq!(out.code, 1, "e2 is behind: {}", out.stderr);

    // The attack: e1's Healthy report, renamed to e2, written with curl (no key).
    let (_, mut forged) = f.raw_report("edge.e1");
    forged["clusterName"] = json!("e2");
    curl_report(&f.reg, "fleet/drover-reports", "edge.e2", &forged);
    let out = gated_promote(&f, &[]);
    assert_eq!(out.code, 1, "the forged report must not open the gate: {}", out.stderr);
    let e2 = out.stderr.lines().find(|l| l.contains("edge.e2:")).unwrap_or_else(|| panic!("e2 named: {}", out.stderr));
    assert!(e2.contains("untrusted") && e2.contains("unsigned"), "{e2}");
    assert_eq!(f.digest_of(&f.channel("edge", "prod-ring1")), None, "nothing moved");

    // Signed with a key of the attacker's own: not the one enrolled for e2.
    let attacker = drover_proto::keys::PrivateKey::generate().unwrap();
    let body = serde_json::to_vec(&forged).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let annotations = json!({
        "dev.drover.report.key": b64.encode(attacker.public_key().spki_der()),
        "dev.drover.report.signature": b64.encode(attacker.sign(&body).unwrap()),
    });
    curl_report_bytes(&f.reg, "fleet/drover-reports", "edge.e2", &body, annotations);
    let out = gated_promote(&f, &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let e2 = out.stderr.lines().find(|l| l.contains("edge.e2:")).unwrap_or_else(|| panic!("e2 named: {}", out.stderr));
    assert!(e2.contains("but the roster enrolls"), "{e2}");
    // enroll --all-pending does not take the attacker's key for an enrolled cluster.
    let listed = f.enroll(&["--all-pending"]);
    assert_eq!(listed["written"], false, "{listed:#}");
    assert_eq!(listed["clusters"][0]["action"], "key changed", "{listed:#}");
    // Nor does a report signed with a key the report does not name.
    let mut tampered = forged.clone();
    tampered["health"] = json!("Healthy");
    tampered["reportedAt"] = json!(drover_proto::time::now_rfc3339());
    let other = serde_json::to_vec(&tampered).unwrap();
    let e1_manifest = f.raw_report("edge.e1").0;
    let copied = json!({
        "dev.drover.report.key": e1_manifest["annotations"]["dev.drover.report.key"],
        "dev.drover.report.signature": e1_manifest["annotations"]["dev.drover.report.signature"],
    });
    curl_report_bytes(&f.reg, "fleet/drover-reports", "edge.e2", &other, copied);
    let out = gated_promote(&f, &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.lines().any(|l| l.contains("edge.e2:") && l.contains("badly signed")), "{}", out.stderr);

    // fleet status shows the forged report as untrusted, named, and counts it nowhere.
    let st = f.status();
    let row = Fleet::row(&st, "edge", "e2");
    assert!(row["untrusted"].as_str().is_some_and(|w| w.contains("badly signed")), "{row:#}");
    assert_eq!((st["summary"][0]["healthy"].as_u64(), st["summary"][0]["untrusted"].as_u64()), (Some(1), Some(1)), "{st:#}");

    // The real e2 catches up and reports (signed with its own, enrolled key): the gate passes.
    f.agent_ok("e2", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let out = gated_promote(&f, &["-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["digest"], d2.as_str());
    assert_eq!(f.digest_of(&f.channel("edge", "prod-ring1")).as_deref(), Some(d2.as_str()));
}

#[test]
fn a_report_from_2099_is_not_fresh_and_a_new_pod_keeps_no_forged_health_since() {
    let (_reg, _tmp, f) = world();
    f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.enroll(&["--all-pending"]);
    let (_, genuine) = f.raw_report("edge.c1");
    let since = genuine["healthSince"].as_str().unwrap().to_string();

    // Even signed with the cluster's own key (a clock gone wrong), a report dated 2099 is
    // neither fresh nor counted, under any --stale.
    f.rewrite_own_report("edge", "c1", |r| r["reportedAt"] = json!("2099-01-01T00:00:00Z"));
    let prefix = format!("{}/fleet", f.reg);
    let out = f.drover(&["-o", "json", "fleet", "status", "--registry", &prefix, "--trust-key", &f.pubkey(), "--stale", "8760h"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let st = out.json();
    let named = st["untrusted"]["named"].as_array().unwrap().iter().find(|n| n["cluster"] == "edge.c1").cloned().unwrap_or_else(|| panic!("{st:#}"));
    assert!(named["reason"].as_str().is_some_and(|w| w.contains("in the future") && w.contains("not fresh")), "{named:#}");
    assert!(st["clusters"].as_array().unwrap().is_empty(), "nothing counts: {st:#}");
    let out = f.drover(&["fleet", "status", "--registry", &prefix, "--trust-key", &f.pubkey()]);
    assert!(out.stdout.contains("Not counted") && out.stdout.contains("in the future") && !out.stdout.contains("0s ago"), "{}", out.stdout);
    let out = gated_promote(&f, &["--stale", "8760h"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.lines().any(|l| l.contains("edge.c1:") && l.contains("in the future")), "{}", out.stderr);

    // The attacker writes a report under c1's tag claiming Healthy since 2000, then the
    // cluster's agent pod is replaced (a new pod: empty state directory).
    let mut forged = genuine.clone();
    forged["healthSince"] = json!("2000-01-01T00:00:00Z");
    forged["reportedAt"] = json!(drover_proto::time::now_rfc3339());
    curl_report(&f.reg, "fleet/drover-reports", "edge.c1", &forged);
    let key_before = std::fs::read(f.state_dir("c1").join("report-key.pem")).unwrap();
    std::fs::remove_dir_all(f.state_dir("c1")).unwrap();
    std::fs::create_dir_all(f.state_dir("c1")).unwrap();
    // The new pod keeps the cluster's identity (here: the same key restored into the new
    // state directory, as the kube target's Secret does; see kube_report_key).
    std::fs::write(f.state_dir("c1").join("report-key.pem"), &key_before).unwrap();
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let (_, after): (Value, Value) = f.raw_report("edge.c1");
    let adopted = after["healthSince"].as_str().unwrap();
    assert_ne!(adopted, "2000-01-01T00:00:00Z", "the forged healthSince must not be adopted: {after:#}");
    assert!(adopted >= since.as_str(), "{adopted} is the cluster's own time ({since} or later)");
    let out = gated_promote(&f, &["--soak", "24h"]);
    assert_eq!(out.code, 1, "a 24h soak is not over a minute after setup: {}", out.stderr);
    assert!(out.stderr.contains("soaking"), "{}", out.stderr);
}
