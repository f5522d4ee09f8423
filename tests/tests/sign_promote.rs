//! `drover promote` (verify, then move a channel tag; copy signatures across
//! repositories; never lower the sequence) and `drover rollback` (old content, new
//! higher sequence, signed, history tag).

mod sign_support;

use drover_proto::repo::FetchLimits;
use drover_tests::Registry;
use sign_support::*;

fn digest_of(reg: &Registry, repository: &str, tag: &str) -> Option<String> {
    raw_manifest(reg, repository, tag).map(|(b, _)| drover_proto::digest::sha256_digest(&b))
}

fn sequence_of(reference: &str) -> (u64, Vec<String>) {
    let r = repo(reference);
    let lookup = drover_proto::Reference::parse(reference).unwrap().as_registry().unwrap().lookup().unwrap().to_string();
    let b = rt().block_on(r.fetch_bundle(&lookup, &FetchLimits::default())).unwrap();
    (b.config.sequence, b.config.objects.iter().map(|o| format!("{} {}", o.path, o.sha256)).collect())
}

#[test]
fn promote_moves_verified_digests_and_never_lowers_the_sequence() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let p = public.to_str().unwrap();
    let k = key.to_str().unwrap();
    let d1 = push_bundle(&reg, "fleet/edge", "prod-ring0", "prod", 1, "one");
    sign(&reg.reference("fleet/edge:prod-ring0"), &key);

    // prod-ring0 was pushed without a key and its bundle signed by digest afterwards: no
    // statement places it there, so promoting from it is refused unless migrated deliberately.
    let out = drover(&["promote", &reg.reference("fleet/edge:prod-ring0"), "prod", "--key", k, "--trust-key", p]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("prod-ring0.statement") && out.stderr.contains("--migrate-unplaced-source"), "{}", out.stderr);
    let m = "--migrate-unplaced-source";

    // Same repository, destination given as a bare tag.
    let out = drover(&["promote", &reg.reference("fleet/edge:prod-ring0"), "prod", "--key", k, "--trust-key", p, "-o", "json", m]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["copied"], false);
    assert_eq!(digest_of(&reg, "fleet/edge", "prod").as_deref(), Some(d1.as_str()));

    // A newer, signed bundle promotes over it.
    let d2 = push_bundle(&reg, "fleet/edge", "prod-ring0", "prod", 2, "two");
    sign(&reg.reference("fleet/edge:prod-ring0"), &key);
    let out = drover(&["promote", &reg.reference("fleet/edge:prod-ring0"), "prod", "--key", k, "--trust-key", p, "-o", "json", m]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["previous"]["sequence"], 1);
    assert_eq!(digest_of(&reg, "fleet/edge", "prod").as_deref(), Some(d2.as_str()));

    // The old (still validly signed) bundle cannot be promoted back: lower sequence.
    let out = drover(&["promote", &reg.reference("fleet/edge:prod-1"), "prod", "--key", k, "--trust-key", p]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("holds sequence 2") && out.stderr.contains("drover rollback"), "{}", out.stderr);
    assert_eq!(digest_of(&reg, "fleet/edge", "prod").as_deref(), Some(d2.as_str()), "prod unchanged");

    // An unsigned newer bundle is refused before anything moves.
    push_bundle(&reg, "fleet/edge", "prod-ring0", "prod", 3, "three");
    let out = drover(&["promote", &reg.reference("fleet/edge:prod-ring0"), "prod", "--key", k, "--trust-key", p, m]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("is not signed"), "{}", out.stderr);
    assert_eq!(digest_of(&reg, "fleet/edge", "prod").as_deref(), Some(d2.as_str()));

    // Another repository: bundle and signature manifest are copied; the copy verifies.
    let out = drover(&["promote", &reg.reference("fleet/edge:prod"), &reg.reference("mirror/edge:prod"), "--key", k, "--trust-key", p, "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["copied"], true);
    assert_eq!(digest_of(&reg, "mirror/edge", "prod").as_deref(), Some(d2.as_str()));
    assert!(sig_manifest(&reg, "mirror/edge", &d2).is_some());
    assert_eq!(verify(&reg.reference("mirror/edge:prod"), &[&public], 1).code, 0);
    // Promoting again into the mirror does not duplicate signature layers.
    let out = drover(&["promote", &reg.reference("fleet/edge:prod"), &reg.reference("mirror/edge:prod"), "--key", k, "--trust-key", p]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(sig_manifest(&reg, "mirror/edge", &d2).unwrap()["layers"].as_array().unwrap().len(), 1);

    // Into a new OCI layout (relocation): the copy verifies offline, docker-reference
    // still names the original registry.
    let layout = tmp.path().join("airgap");
    let dst = format!("oci:{}:prod", layout.display());
    let out = drover(&["promote", &reg.reference("fleet/edge:prod"), &dst, "--key", k, "--trust-key", p]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = verify(&dst, &[&public], 1);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["matched"][0]["dockerReference"], reg.reference("fleet/edge"));
}

#[test]
fn rollback_republishes_old_content_with_a_higher_sequence() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let d1 = push_bundle(&reg, "fleet/edge", "prod", "prod", 1, "good");
    sign(&reg.reference("fleet/edge:prod"), &key);
    let d2 = push_bundle(&reg, "fleet/edge", "prod", "prod", 2, "bad");
    sign(&reg.reference("fleet/edge:prod"), &key);
    let (_, old_objects) = sequence_of(&reg.reference("fleet/edge:prod-1"));

    let out = drover(&["rollback", &reg.reference("fleet/edge:prod"), "--to", "prod-1", "--key", key.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j = out.json();
    assert_eq!(j["sequence"], 3);
    assert_eq!(j["restoredFrom"], d1.as_str());
    let new = j["digest"].as_str().unwrap().to_string();
    assert!(new != d1 && new != d2);
    assert_eq!(digest_of(&reg, "fleet/edge", "prod").as_deref(), Some(new.as_str()));
    assert_eq!(digest_of(&reg, "fleet/edge", "prod-3").as_deref(), Some(new.as_str()), "history tag written");
    let (seq, objects) = sequence_of(&reg.reference("fleet/edge:prod"));
    assert_eq!(seq, 3);
    assert_eq!(objects, old_objects, "same content as the restored bundle");
    assert_eq!(verify(&reg.reference("fleet/edge:prod"), &[&public], 1).code, 0, "the new bundle is signed");

    // Replaying the old signed bundle onto prod is now a lower sequence: refused.
    let out = drover(&["promote", &reg.reference("fleet/edge:prod-1"), "prod", "--key", key.to_str().unwrap(), "--trust-key", public.to_str().unwrap()]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("holds sequence 3"), "{}", out.stderr);

    // Bad input: unknown --to changes nothing.
    let tags = raw_tags(&reg, "fleet/edge");
    let out = drover(&["rollback", &reg.reference("fleet/edge:prod"), "--to", "prod-99", "--key", key.to_str().unwrap()]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("prod-99"), "{}", out.stderr);
    assert_eq!(raw_tags(&reg, "fleet/edge"), tags);
}
