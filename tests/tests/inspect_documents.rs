//! `drover inspect` reads the control documents, not only bundles (issue 33): a channel
//! statement shows its channel, the digest and sequence it places, its signatures (judged
//! with `--trust-key`) and what the channel's tag names now; the fleet roster its enrolled
//! clusters and keys; a cluster's report what it applied, the key that signed it and
//! whether it counts. Listing pending clusters needs no private key. Checked against
//! skopeo as an independent reader of the same registry.

mod agent_support;
mod fleet_support;

use agent_support::{cm, objs, Fx};
use drover_tests::{rawreg, run, tool_ok, Out};

fn drover(args: &[&str]) -> Out {
    let mut a = args.to_vec();
    a.push("--plain-http");
    run("drover", &a, agent_support::ENV)
}

#[test]
fn inspect_of_a_channel_statement_prints_its_channel_digest_and_sequence() {
    let fx = Fx::new();
    let digest = fx.push(&objs(&[cm("demo", "a", "1")]), 41, Some("k1"), &[]);
    let statement = fx.reg.reference("fleet/edge:prod.statement");

    let out = drover(&["inspect", &statement]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for want in ["channel statement", "prod", &digest, "41", "not verified: pass --trust-key PUB", "(the placed bundle)"] {
        assert!(out.stdout.contains(want), "{want:?} in:\n{}", out.stdout);
    }

    let j = drover(&["-o", "json", "inspect", &statement]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let j = j.json();
    assert_eq!(j["kind"], "channelStatement", "{j:#}");
    assert_eq!(j["statement"]["channel"], "prod");
    assert_eq!(j["statement"]["digest"], digest.as_str());
    assert_eq!(j["statement"]["sequence"], 41);
    assert_eq!(j["statement"]["repository"], "fleet/edge");
    assert_eq!(j["channelHolds"], digest.as_str());
    assert!(j["signatures"]["present"].as_bool().unwrap() && j["signatures"].get("verified").is_none(), "{j:#}");
    // The statement manifest's digest, as skopeo reads it.
    let raw = tool_ok("skopeo", &["inspect", "--raw", "--tls-verify=false", &format!("docker://{statement}")]);
    assert_eq!(j["digest"], rawreg::digest(raw.as_bytes()).as_str());

    // With the release key: verified; with another key: not, and why.
    let j = drover(&["-o", "json", "inspect", &statement, "--trust-key", &fx.pubkey("k1")]).json();
    assert_eq!(j["signatures"]["verified"]["satisfied"], true, "{j:#}");
    let out = drover(&["inspect", &statement, "--trust-key", &fx.pubkey("k1")]);
    assert!(out.stdout.contains("verified: 1 of 1 required trusted key(s) signed"), "{}", out.stdout);
    let other = drover(&["-o", "json", "inspect", &statement, "--trust-key", &fx.pubkey("k2")]);
    assert_eq!(other.code, 0, "inspect shows, verify gates: {}", other.stderr);
    let j = other.json();
    assert_eq!(j["signatures"]["verified"]["satisfied"], false, "{j:#}");
    assert!(j["signatures"]["verified"]["reason"].as_str().unwrap().contains("0 of 1"), "{j:#}");

    // The tag moved by hand (no statement): the statement says what it places, and that
    // the channel now names another bundle.
    let other = fx.push_at(&fx.reg.reference("fleet/edge:candidate"), "edge", &objs(&[cm("demo", "a", "2")]), 42, Some("k1"), &[]);
    let (bytes, media_type) = rawreg::manifest(&fx.reg.addr, "fleet/edge", "candidate").unwrap();
    rawreg::put_manifest(&fx.reg.addr, "fleet/edge", "prod", &bytes, &media_type);
    let out = drover(&["inspect", &statement]);
    assert!(out.stdout.contains(&format!("{other}: another bundle than the statement places")), "{}", out.stdout);
    let j = drover(&["-o", "json", "inspect", &statement]).json();
    assert_eq!((j["statement"]["digest"].as_str(), j["channelHolds"].as_str()), (Some(digest.as_str()), Some(other.as_str())));
}

#[test]
fn inspect_of_the_roster_and_a_report_and_listing_pending_clusters_need_no_private_key() {
    use fleet_support::{workload, Fleet, Target};
    let reg = drover_tests::Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    let digest = f.push("edge", "prod", "prod", 7, &workload("app", "1", None));
    f.agent_ok("e1", "edge", "prod", "prod", Target::Dir, &[]);
    f.agent_ok("e2", "edge", "prod", "prod", Target::Dir, &[]);
    let prefix = format!("{}/fleet", f.reg);
    let pubkey = f.pubkey();

    // Listing with the public key alone: both pending, nothing written.
    let out = f.drover(&["-o", "json", "fleet", "enroll", "--registry", &prefix, "--trust-key", &pubkey]);
    assert_eq!(out.code, 0, "listing needs no private key: {}", out.stderr);
    let j = out.json();
    let pending: Vec<(&str, &str)> = j["clusters"].as_array().unwrap().iter().map(|c| (c["cluster"].as_str().unwrap(), c["action"].as_str().unwrap())).collect();
    assert_eq!(pending, [("edge.e1", "pending"), ("edge.e2", "pending")], "{j:#}");
    assert_eq!(j["written"], false);
    // Changing the roster without the private key: refused, naming --key.
    let out = f.drover(&["fleet", "enroll", "--registry", &prefix, "--trust-key", &pubkey, "--all-pending"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--key KEY"), "{}", out.stderr);

    f.enroll(&["--cluster", "edge.e1"]);
    let roster = format!("{prefix}/drover-reports:drover-roster");
    let out = f.drover(&["inspect", &roster, "--trust-key", &pubkey]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for want in ["fleet roster", "edge.e1", "1 cluster(s)", "verified: 1 of 1"] {
        assert!(out.stdout.contains(want), "{want:?} in:\n{}", out.stdout);
    }
    assert!(!out.stdout.contains("edge.e2"), "e2 is not enrolled: {}", out.stdout);
    let j = f.drover(&["-o", "json", "inspect", &roster]).json();
    assert_eq!(j["kind"], "fleetRoster", "{j:#}");
    assert_eq!(j["roster"]["sequence"], 1);
    let (_, e1) = f.raw_report("edge.e1");
    let e1_key = j["roster"]["clusters"]["edge.e1"].as_str().unwrap().to_string();
    assert_eq!(e1_key.len(), 64, "{j:#}");

    // A report: what it applied; with --trust-key whether it counts (e1 yes, e2 not enrolled).
    let report = format!("{prefix}/drover-reports:edge.e1");
    let out = f.drover(&["inspect", &report, "--trust-key", &pubkey]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for want in ["fleet report", "edge.e1", &digest, "Healthy", "counts", &e1_key[..12]] {
        assert!(out.stdout.contains(want), "{want:?} in:\n{}", out.stdout);
    }
    let j = f.drover(&["-o", "json", "inspect", &report, "--trust-key", &pubkey]).json();
    assert_eq!(j["kind"], "fleetReport", "{j:#}");
    assert_eq!(j["report"], e1, "the report as skopeo reads it");
    assert_eq!(j["reportKey"], e1_key.as_str());
    assert_eq!(j["standing"], "trusted", "{j:#}");
    let e2 = format!("{prefix}/drover-reports:edge.e2");
    let j = f.drover(&["-o", "json", "inspect", &e2, "--trust-key", &pubkey]).json();
    let why = j["standing"]["untrusted"].as_str().unwrap().to_string();
    assert!(why.contains("not enrolled"), "{j:#}");
    // The next step is the enroll command, pinned to the key the report carries; it runs
    // as written once PREFIX and KEY are filled in, and then the report counts.
    let step = why.split('`').nth(1).unwrap_or_else(|| panic!("a command in backquotes: {why}"));
    let e2_key = j["reportKey"].as_str().unwrap();
    assert!(step.starts_with("drover fleet enroll --registry PREFIX --cluster edge.e2=") && e2_key.starts_with(step.split('=').nth(1).unwrap().split(' ').next().unwrap()), "{step}");
    let key = f.key();
    let args: Vec<String> = step.split(' ').skip(1).map(|w| w.replace("PREFIX", &prefix).replace("KEY", &key)).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let done = f.drover(&args);
    assert_eq!(done.code, 0, "{step}: {}", done.stderr);
    let j = f.drover(&["-o", "json", "inspect", &e2, "--trust-key", &pubkey]).json();
    assert_eq!(j["standing"], "trusted", "{j:#}");
    let out = f.drover(&["inspect", &e2]);
    assert!(out.stdout.contains("whether it counts: pass --trust-key PUB"), "{}", out.stdout);
}
