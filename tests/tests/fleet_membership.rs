//! Declared membership (issue 30), attacked as a registry writer without a key does it —
//! raw HTTP, skopeo, an edited archive — never through drover:
//!
//! - with `--fleet`, overwriting, relabelling, copying or deleting a lagging cluster's
//!   report leaves the gate refusing and naming that cluster; a declared cluster that never
//!   reported holds the gate and is listed MISSING by `fleet status -o json` and the page;
//!   `fleet enroll --fleet FILE --all-pending` writes 64-hex fingerprints and keeps the
//!   file's comments;
//! - after a cluster is removed from the file (retired: one step), a report signed with
//!   its stolen key never counts; an old roster put back, or an old archive imported,
//!   changes nothing the gate sees;
//! - duplicated reports in an archive count once;
//! - a statement signed into an `oci:` layout (no repository), copied into a registry
//!   repository, is refused by that repository's agent; an older statement is never
//!   imported over a newer one;
//! - `promote` from a channel whose statement was deleted refuses by default (also under
//!   the health gate, which promotes by digest); the cluster that refused that channel's
//!   bundle is `behind` in `fleet status -o json`, with its last attempt's result and reason.

mod fleet_support;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use drover_tests::{rawreg, tool_ok, Out, Registry};
use fleet_support::{curl_report, workload, Fleet, Target, FLEET_FILE};
use serde_json::{json, Value};

fn world() -> (Registry, tempfile::TempDir, Fleet) {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    (reg, tmp, f)
}

/// `drover promote fleet/edge:prod-ring0 prod-ring1 --require-healthy 100%` (+ `extra`).
fn gated(f: &Fleet, extra: &[&str]) -> Out {
    let src = f.channel("edge", "prod-ring0");
    let (key, public) = (f.key(), f.pubkey());
    let mut a = vec!["promote", src.as_str(), "prod-ring1", "--key", &key, "--trust-key", &public, "--require-healthy", "100%"];
    a.extend_from_slice(extra);
    f.drover(&a)
}

/// The line of `out`'s stderr naming `cluster` (`TYPE.NAME:`).
fn named<'a>(out: &'a Out, cluster: &str) -> &'a str {
    out.stderr.lines().find(|l| l.trim_start().starts_with(&format!("{cluster}:"))).unwrap_or_else(|| panic!("{cluster} is named: {}", out.stderr))
}

/// The fingerprint of cluster `name`'s report key (from its agent's state directory).
fn key_of(f: &Fleet, name: &str) -> String {
    let pem = std::fs::read(f.state_dir(name).join("report-key.pem")).unwrap();
    drover_proto::keys::PrivateKey::from_pem(&pem, "", "report-key.pem").unwrap().public_key().fingerprint().to_string()
}

/// Rewrites the index of the OCI archive `from` into `to`: `edit` gets the manifests list.
fn edit_archive(from: &Path, to: &Path, edit: impl FnOnce(&mut Vec<Value>)) {
    let dir = tempfile::tempdir().unwrap();
    tool_ok("tar", &["-xf", from.to_str().unwrap(), "-C", dir.path().to_str().unwrap()]);
    let index_path = dir.path().join("index.json");
    let mut index: Value = serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    let mut manifests = index["manifests"].as_array().unwrap().clone();
    edit(&mut manifests);
    index["manifests"] = Value::Array(manifests);
    std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
    tool_ok("tar", &["-cf", to.to_str().unwrap(), "-C", dir.path().to_str().unwrap(), "oci-layout", "index.json", "blobs"]);
}

fn ref_name(m: &Value) -> &str {
    m["annotations"]["org.opencontainers.image.ref.name"].as_str().unwrap_or_default()
}

fn utc_now() -> String {
    drover_proto::time::now_rfc3339()
}

#[test]
fn with_declared_membership_a_lagging_cluster_cannot_leave_the_vote() {
    let (_reg, tmp, f) = world();
    let d1 = f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    for c in ["e1", "e2", "e3"] {
        f.agent_ok(c, "edge", "prod", "prod-ring0", Target::Dir, &[]);
    }
    // Enrolment is a reviewed change of the Fleet file: full fingerprints, comments kept.
    let file = f.fleet_file(&["edge"]);
    let enrolled = f.enroll_fleet(&file, &["--all-pending"]);
    assert_eq!((enrolled["written"].as_bool(), enrolled["enrolled"].as_u64()), (Some(true), Some(3)), "{enrolled:#}");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut rest = text.as_str();
    for line in FLEET_FILE.lines().filter(|l| !l.contains("clusters: []")) {
        let at = rest.find(line).unwrap_or_else(|| panic!("{line:?} kept, in order:\n{text}"));
        rest = &rest[at + line.len()..];
    }
    assert!(text.contains("  # Every cluster, one entry each (drover fleet enroll --fleet adds them).\n  clusters:\n"), "{text}");
    for c in ["e1", "e2", "e3"] {
        let entry = format!("    - {{name: edge.{c}, environment: prod, channel: prod-ring0, reportKey: {}}}\n", key_of(&f, c));
        assert!(text.contains(&entry), "{entry:?} in\n{text}");
        assert_eq!(key_of(&f, c).len(), 64);
    }
    let diff: Vec<&str> = enrolled["diff"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(diff.contains(&"-  clusters: []") && diff.iter().filter(|l| l.starts_with("+    - {name: edge.")).count() == 3, "{diff:?}");

    // A cluster declared before it ever reported holds the gate and is MISSING.
    let e4 = format!("    - {{name: edge.e4, environment: prod, channel: prod-ring0, reportKey: {}}}\n", "4e".repeat(32));
    let e3 = format!("    - {{name: edge.e3, environment: prod, channel: prod-ring0, reportKey: {}}}\n", key_of(&f, "e3"));
    std::fs::write(&file, text.replace(&e3, &format!("{e3}{e4}"))).unwrap();
    let fleet = file.to_str().unwrap();
    let out = gated(&f, &["--fleet", fleet]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(named(&out, "edge.e4").contains("missing: no report"), "{}", out.stderr);
    assert!(out.stderr.contains("3 of 4 cluster(s)"), "{}", out.stderr);
    let st = f.status_fleet(&file, &[]);
    assert_eq!(Fleet::row(&st, "edge", "e4")["class"], "missing", "{st:#}");
    assert_eq!((st["summary"][0]["missing"].as_u64(), st["summary"][0]["allReady"].as_bool()), (Some(1), Some(false)), "{st:#}");
    let page = tmp.path().join("fleet.html");
    let prefix = format!("{}/fleet", f.reg);
    let out = f.drover(&["fleet", "view", "--registry", &prefix, "--fleet", fleet, "--out", page.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    let chip = &html[html.find("data-cluster=\"edge.e4\" data-health").expect("e4 on the page")..];
    assert!(chip[..chip.find("</span></span>").unwrap()].contains("data-class=\"missing\"") && chip.contains("MISSING"), "{}", &chip[..400]);
    assert!(!html.contains("Every cluster is ready"), "the page does not say all is well while a gate would refuse");

    // Retiring a cluster is one step: remove it from the file (a reviewed change).
    let removed = f.enroll_fleet(&file, &["--cluster", "edge.e4", "--remove"]);
    assert_eq!(removed["diff"], json!([format!("-{}", e4.trim_end())]), "{removed:#}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "the file is as before e4");
    let out = gated(&f, &["--fleet", fleet, "-o", "json"]);
    assert_eq!(out.code, 0, "e4 no longer holds the gate: {}", out.stderr);
    let ring1 = f.channel("edge", "prod-ring1");
    assert_eq!(f.digest_of(&ring1).as_deref(), Some(d1.as_str()));

    // The candidate: e1 and e2 run it, e3 lags.
    let d2 = f.push("edge", "prod", "prod-ring0", 2, &workload("app", "2", None));
    f.agent_ok("e1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.agent_ok("e2", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let out = gated(&f, &["--fleet", fleet]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(named(&out, "edge.e3").contains("behind: runs sequence 1"), "{}", out.stderr);
    let st = f.status_fleet(&file, &[]);
    assert_eq!(Fleet::row(&st, "edge", "e3")["class"], "behind", "{st:#}");
    assert_eq!(Fleet::row(&st, "edge", "e3")["lastResult"], "Applied", "{st:#}");

    // 1. Overwritten and relabelled: an unsigned report under e3's tag claiming another channel.
    let (_, mut relabelled) = f.raw_report("edge.e1");
    relabelled["clusterName"] = json!("e3");
    relabelled["channel"] = json!("prod-ring9");
    relabelled["reportedAt"] = json!(utc_now());
    curl_report(&f.reg, "fleet/drover-reports", "edge.e3", &relabelled);
    let out = gated(&f, &["--fleet", fleet]);
    assert_eq!(out.code, 1, "the vote is the declared set, not what the registry holds: {}", out.stderr);
    assert!(out.stderr.contains("2 of 3 cluster(s)"), "{}", out.stderr);
    assert!(named(&out, "edge.e3").contains("untrusted") && named(&out, "edge.e3").contains("unsigned"), "{}", out.stderr);
    // Without --fleet the registry decides who votes, and every reader says so.
    let out = gated(&f, &[]);
    assert!(out.stderr.contains("a registry writer can roll it back"), "{}", out.stderr);
    // fleet wait applies the same gate.
    let src = f.channel("edge", "prod-ring0");
    let out = f.drover(&["fleet", "wait", &src, "--trust-key", &f.pubkey(), "--fleet", fleet, "--timeout", "1s", "--interval", "1s"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("timed out") && named(&out, "edge.e3").contains("untrusted"), "{}", out.stderr);
    // Signed with the attacker's own key: enrolment never replaces a declared key by it.
    let attacker = drover_proto::keys::PrivateKey::generate().unwrap();
    let body = serde_json::to_vec(&relabelled).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let annotations = json!({
        "dev.drover.report.key": b64.encode(attacker.public_key().spki_der()),
        "dev.drover.report.signature": b64.encode(attacker.sign(&body).unwrap()),
    });
    fleet_support::curl_report_bytes(&f.reg, "fleet/drover-reports", "edge.e3", &body, annotations);
    let before = std::fs::read_to_string(&file).unwrap();
    let listed = f.enroll_fleet(&file, &["--all-pending"]);
    assert_eq!((listed["written"].as_bool(), listed["clusters"][0]["action"].as_str()), (Some(false), Some("key changed")), "{listed:#}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before, "the file is unchanged");
    let out = gated(&f, &["--fleet", fleet]);
    assert!(named(&out, "edge.e3").contains(&format!("signed with report key {}", attacker.public_key().fingerprint())), "{}", out.stderr);

    // 2. Deleted.
    let (bytes, _) = rawreg::manifest(&f.reg, "fleet/drover-reports", "edge.e3").unwrap();
    let deleted = rawreg::request(&f.reg, "DELETE", &format!("/v2/fleet/drover-reports/manifests/{}", rawreg::digest(&bytes)), &[], b"").unwrap();
    assert_eq!(deleted.status, 202);
    let out = gated(&f, &["--fleet", fleet]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(named(&out, "edge.e3").contains("missing: no report"), "{}", out.stderr);

    // 3. Copied: e2's own signed report under e3's tag.
    let (bytes, media) = rawreg::manifest(&f.reg, "fleet/drover-reports", "edge.e2").unwrap();
    rawreg::put_manifest(&f.reg, "fleet/drover-reports", "edge.e3", &bytes, &media);
    let out = gated(&f, &["--fleet", fleet]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("2 of 3 cluster(s)"), "e2 counts once: {}", out.stderr);
    assert!(named(&out, "edge.e3").contains("missing") && named(&out, "edge.e3").contains("holds the report of edge.e2"), "{}", out.stderr);
    assert_eq!(f.digest_of(&ring1).as_deref(), Some(d1.as_str()), "nothing moved");

    // e3 catches up (its agent writes its own report): the gate passes.
    f.agent_ok("e3", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let out = gated(&f, &["--fleet", fleet, "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!((out.json()["gate"]["ready"].as_u64(), out.json()["gate"]["declaredIn"].as_str()), (Some(3), Some(fleet)));
    assert_eq!(f.digest_of(&ring1).as_deref(), Some(d2.as_str()));
}

#[test]
fn a_removed_cluster_never_counts_and_old_rosters_or_archives_change_nothing() {
    let (_reg, tmp, f) = world();
    f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    for c in ["c1", "c2"] {
        f.agent_ok(c, "edge", "prod", "prod-ring0", Target::Dir, &[]);
    }
    // The registry roster (for readers without --fleet) and the Fleet file enroll both.
    f.enroll(&["--all-pending"]);
    let old_roster = rawreg::manifest(&f.reg, "fleet/drover-reports", "drover-roster").unwrap();
    let old_archive = tmp.path().join("reports-old.tar");
    let reports = format!("{}/fleet/drover-reports", f.reg);
    let out = f.drover(&["export", &reports, "--out", old_archive.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let file = f.fleet_file(&["edge"]);
    f.enroll_fleet(&file, &["--all-pending"]);
    let fleet = file.to_str().unwrap();

    // c2 is retired: removed from the file (and from the roster), one step each.
    let removed = f.enroll_fleet(&file, &["--cluster", "edge.c2", "--remove"]);
    assert_eq!(removed["clusters"][0]["action"], "removed", "{removed:#}");
    f.enroll(&["--cluster", "edge.c2", "--remove"]);
    let roster_now = f.digest_of(&format!("{reports}:drover-roster"));

    // c2's report key is stolen: a fresh Healthy report signed with it.
    f.rewrite_own_report("edge", "c2", |r| r["reportedAt"] = json!(utc_now()));
    let check = |f: &Fleet| {
        let out = gated(f, &["--fleet", fleet, "--min-clusters", "2"]);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(out.stderr.contains("1 of 1 cluster(s)") && out.stderr.contains("2 required"), "{}", out.stderr);
        assert!(named(&out, "not counted: edge.c2").contains("not declared in"), "{}", out.stderr);
    };
    check(&f);

    // The old archive imported: its roster is older than the registry's, refused.
    let out = f.drover(&["import", old_archive.to_str().unwrap(), "--to", &f.reg, "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("drover-roster") && out.stderr.contains("a lower sequence"), "{}", out.stderr);
    assert_eq!(f.digest_of(&format!("{reports}:drover-roster")), roster_now, "nothing imported");
    check(&f);
    // The old reports alone (a truncated archive): older than what the registry holds, not written.
    let truncated = tmp.path().join("reports-truncated.tar");
    edit_archive(&old_archive, &truncated, |m| m.retain(|x| ref_name(x).ends_with(":edge.c1") || ref_name(x).ends_with(":edge.c2")));
    let c1_now = f.digest_of(&format!("{reports}:edge.c1"));
    let out = f.drover(&["-o", "json", "import", truncated.to_str().unwrap(), "--to", &f.reg, "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = out.json();
    let actions: Vec<&str> = doc["manifests"].as_array().unwrap().iter().map(|m| m["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["unchanged", "older"], "c1 has not reported since; c2's report is newer: {}", out.stdout);
    assert_eq!(f.digest_of(&format!("{reports}:edge.c1")), c1_now);
    check(&f);

    // The old roster put back by raw HTTP (its .sig is still there): the gate does not read it.
    rawreg::put_manifest(&f.reg, "fleet/drover-reports", "drover-roster", &old_roster.0, &old_roster.1);
    assert_ne!(f.digest_of(&format!("{reports}:drover-roster")), roster_now, "the roster is rolled back");
    check(&f);
    let st = f.status_fleet(&file, &[]);
    assert_eq!(st["clusters"].as_array().unwrap().len(), 1, "{st:#}");
    assert_eq!((st["untrusted"]["reports"].as_u64(), st["untrusted"]["named"][0]["cluster"].as_str()), (Some(1), Some("edge.c2")), "listed apart: {st:#}");

    // Retiring released the gate: c1 alone is the ring.
    let out = gated(&f, &["--fleet", fleet, "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["gate"]["notCounted"][0]["cluster"], "edge.c2");
}

#[test]
fn duplicated_reports_in_an_archive_count_once() {
    let (_reg, tmp, f) = world();
    f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    for c in ["c1", "c2"] {
        f.agent_ok(c, "edge", "prod", "prod-ring0", Target::Dir, &[]);
    }
    f.enroll(&["--all-pending"]);
    let file = f.fleet_file(&["edge"]);
    f.enroll_fleet(&file, &["--all-pending"]);
    f.push("edge", "prod", "prod-ring0", 2, &workload("app", "2", None));
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let archive = tmp.path().join("reports.tar");
    let out = f.drover(&["export", &format!("{}/fleet/drover-reports", f.reg), "--out", archive.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The carrier duplicates c1's report and the roster (with its signature) under three
    // more repository names.
    let forged = tmp.path().join("forged.tar");
    edit_archive(&archive, &forged, |manifests| {
        let copies: Vec<Value> = manifests
            .iter()
            .filter(|m| ref_name(m).ends_with(":edge.c1") || !ref_name(m).contains(":edge."))
            .flat_map(|m| {
                (1..=3).map(move |n| {
                    let mut c = m.clone();
                    let name = ref_name(m).replace("fleet/drover-reports:", &format!("fleet/dup{n}/drover-reports:"));
                    c["annotations"]["org.opencontainers.image.ref.name"] = json!(name);
                    c
                })
            })
            .collect();
        manifests.extend(copies);
    });
    let reports = format!("oci-archive:{}", forged.display());
    for fleet in [None, Some(file.to_str().unwrap())] {
        let mut extra = vec!["--reports", reports.as_str(), "--min-clusters", "3"];
        extra.extend(fleet.map(|f| ["--fleet", f]).into_iter().flatten());
        let src = f.channel("edge", "prod-ring0");
        let (key, public) = (f.key(), f.pubkey());
        let mut a = vec!["promote", src.as_str(), "prod-ring1", "--key", &key, "--trust-key", &public, "--require-healthy", "75%"];
        a.extend_from_slice(&extra);
        let out = f.drover(&a);
        assert_eq!(out.code, 1, "one cluster votes once ({fleet:?}): {}", out.stderr);
        assert!(out.stderr.contains("1 of 2 cluster(s)") && out.stderr.contains("3 required"), "{}", out.stderr);
    }
    assert_eq!(f.digest_of(&f.channel("edge", "prod-ring1")), None, "nothing moved");
}

/// `skopeo copy` of `tag` from the layout `dir` into `REG/repo` (an independent peer).
fn skopeo_copy(dir: &Path, tag: &str, reg: &str, repo: &str) {
    tool_ok("skopeo", &["copy", "--dest-tls-verify=false", &format!("oci:{}:{tag}", dir.display()), &format!("docker://{reg}/{repo}:{tag}")]);
}

#[test]
fn placements_are_bound_to_a_repository_and_never_imported_lower() {
    let (_reg, tmp, f) = world();
    let d1 = f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    // Promoted into an OCI layout without a repository name: its statement names none.
    let layout: PathBuf = tmp.path().join("layout");
    let dst = format!("oci:{}:prod-ring2", layout.display());
    let out = f.drover(&["-o", "json", "promote", &f.channel("edge", "prod-ring0"), &dst, "--key", &f.key(), "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("names no repository"), "{}", out.stderr);
    let statement = out.json()["statement"]["digest"].as_str().unwrap().to_string();
    // Copied with skopeo, bundle, statement and both signatures, into another repository.
    let sig = |d: &str| format!("{}.sig", d.replace(':', "-"));
    for tag in ["prod-ring2".to_string(), "prod-ring2.statement".to_string(), sig(&d1), sig(&statement)] {
        skopeo_copy(&layout, &tag, &f.reg, "fleet/other");
    }
    let source = format!("{}/fleet/other:prod-ring2", f.reg);
    assert_eq!(f.digest_of(&source).as_deref(), Some(d1.as_str()), "the copy keeps the digest");
    let state = tmp.path().join("ring2-state");
    let target = format!("dir:{}", tmp.path().join("ring2-out").display());
    let pubkey = f.pubkey();
    let out = drover_tests::run(
        "drover-agent",
        &[
            "run", "--once", "--source", &source, "--plain-http", "--trust-key", &pubkey, "--expect-cluster-type", "edge", "--expect-environment", "prod",
            "--target", &target, "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0",
        ],
        &[],
    );
    assert_eq!(out.code, 1, "the layout's placement places nothing in fleet/other:\n{}", out.stderr);
    let refused = out.stderr.lines().find(|l| l.contains("bundle refused")).unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(refused.contains("channel") && refused.contains("names no repository"), "{refused}");
    assert!(!tmp.path().join("ring2-out/manifests").exists(), "nothing applied");

    // An older statement is never imported over a newer one (a truncated old archive).
    let old = tmp.path().join("edge-old.tar");
    let out = f.drover(&["export", &format!("{}/fleet/edge", f.reg), "--out", old.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let d2 = f.push("edge", "prod", "prod-ring0", 2, &workload("app", "2", None));
    let newer = f.digest_of(&format!("{}/fleet/edge:prod-ring0.statement", f.reg));
    let truncated = tmp.path().join("edge-truncated.tar");
    edit_archive(&old, &truncated, |m| {
        let statement = m.iter().find(|x| ref_name(x) == "fleet/edge:prod-ring0.statement").expect("the statement was exported")["digest"].as_str().unwrap().to_string();
        let keep = ["fleet/edge:prod-ring0.statement".to_string(), format!("fleet/edge:{}", sig(&statement))];
        m.retain(|x| keep.iter().any(|k| k == ref_name(x)));
        assert_eq!(m.len(), 2, "the statement and its signature");
    });
    let out = f.drover(&["import", truncated.to_str().unwrap(), "--to", &f.reg, "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("prod-ring0.statement") && out.stderr.contains("a lower sequence"), "{}", out.stderr);
    assert_eq!(f.digest_of(&format!("{}/fleet/edge:prod-ring0.statement", f.reg)), newer, "nothing imported");
    f.agent_ok("r0", "edge", "prod", "prod-ring0", Target::Dir, &["--no-report"]);
    let out = f.drover(&["-o", "json", "promote", &f.channel("edge", "prod-ring0"), "prod-ring1", "--key", &f.key(), "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 0, "the current placement still counts: {}", out.stderr);
    assert_eq!(out.json()["digest"], d2.as_str());
}

#[test]
fn promote_refuses_a_source_channel_whose_statement_was_deleted() {
    let (_reg, _tmp, f) = world();
    f.push("edge", "prod", "prod-hotfix", 1, &workload("app", "1", None));
    f.agent_ok("h1", "edge", "prod", "prod-hotfix", Target::Dir, &[]);
    let file = f.fleet_file(&["edge"]);
    f.enroll_fleet(&file, &["--all-pending"]);
    let d2 = f.push("edge", "prod", "prod-hotfix", 2, &workload("app", "2", None));
    // The attacker deletes the hotfix channel's statement (raw HTTP).
    let (bytes, _) = rawreg::manifest(&f.reg, "fleet/edge", "prod-hotfix.statement").unwrap();
    let deleted = rawreg::request(&f.reg, "DELETE", &format!("/v2/fleet/edge/manifests/{}", rawreg::digest(&bytes)), &[], b"").unwrap();
    assert_eq!(deleted.status, 202);
    // Its agent refuses the bundle; fleet status says so, with the reason, and classifies
    // the cluster against what the channel holds.
    let out = f.agent("h1", "edge", "prod", "prod-hotfix", Target::Dir, &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let st = f.status_fleet(&file, &["--trust-key", &f.pubkey()]);
    let row = Fleet::row(&st, "edge", "h1");
    assert_eq!((row["class"].as_str(), row["lastResult"].as_str()), (Some("behind"), Some("Rejected")), "{row:#}");
    assert!(row["lastReason"].as_str().unwrap().contains("prod-hotfix.statement does not exist"), "{row:#}");
    assert!(row["reason"].as_str().unwrap().contains("its last attempt on it: Rejected"), "{row:#}");
    assert_eq!((st["summary"][0]["target"]["from"].as_str(), st["summary"][0]["target"]["sequence"].as_u64()), (Some("channel"), Some(2)), "{st:#}");
    let src = f.channel("edge", "prod-hotfix");
    let (key, public) = (f.key(), f.pubkey());
    let promote = |extra: &[&str]| {
        let mut a = vec!["promote", src.as_str(), "prod-ring1", "--key", &key, "--trust-key", &public];
        a.extend_from_slice(extra);
        f.drover(&a)
    };
    for extra in [vec![], vec!["--require-healthy", "100%", "--fleet", file.to_str().unwrap()]] {
        let out = promote(&extra);
        assert_eq!(out.code, 1, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains("prod-hotfix.statement") && out.stderr.contains("--migrate-unplaced-source"), "{}", out.stderr);
        assert_eq!(f.digest_of(&f.channel("edge", "prod-ring1")), None, "nothing moved");
    }
    // The documented migration flag, deliberately.
    let out = promote(&["--migrate-unplaced-source", "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["digest"], d2.as_str());
    assert!(out.stderr.contains("not checked"), "{}", out.stderr);
}

/// An agent with several sources writes one report per source, each into that source's
/// reports repository, all under the cluster's one tag and key (docs/fleet.md). Reading a
/// platform's and a tenant's reports repositories together with the platform's Fleet file
/// must judge the cluster on the report of the channel the file declares for it, whichever
/// source reported last: the tenant's newer report is not the platform's.
#[test]
fn a_tenants_report_of_the_same_cluster_does_not_stand_in_for_the_declared_channel() {
    let (_reg, _tmp, f) = world();
    f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    f.push("edge", "prod", "tenant-prod", 2, &workload("team", "1", None));
    f.agent_ok("e1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let file = f.fleet_file(&["edge"]);
    f.enroll_fleet(&file, &["--all-pending"]);
    let fleet = file.to_str().unwrap();
    assert_eq!(Fleet::row(&f.status_fleet(&file, &[]), "edge", "e1")["class"], "ready");

    // The same cluster's tenant source reports later, into the tenant's repository.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let tenant_reports = format!("{}/tenant/drover-reports", f.reg);
    f.agent_ok("e1", "edge", "prod", "tenant-prod", Target::Dir, &["--report-to", &tenant_reports]);
    let (_, platform) = f.raw_report("edge.e1");
    assert_eq!(platform["channel"], "prod-ring0", "the platform's report is untouched: {platform:#}");

    let both = f.status_fleet(&file, &["--reports", &tenant_reports]);
    let row = Fleet::row(&both, "edge", "e1");
    assert_eq!(row["class"], "ready", "judged on the tenant's report: {row:#}");
    // The gate reads one reports repository (the platform's by default): still ready.
    let out = gated(&f, &["--fleet", fleet]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}
