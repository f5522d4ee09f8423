//! `drover inspect` reads the control documents, not only bundles (issue 33): a channel
//! statement shows its channel, the digest and sequence it places, its signatures (judged
//! with `--trust-key`) and what the channel's tag names now. Checked against skopeo as an
//! independent reader of the same registry.

mod agent_support;

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
