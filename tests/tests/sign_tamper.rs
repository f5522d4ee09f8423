//! Fail-closed verification: an attacker with registry write access rewrites the
//! `.sig` manifest; every variant is refused by `drover verify` with the reason.

mod sign_support;

use std::path::Path;

use drover_proto::keys::PrivateKey;
use drover_proto::manifest::Descriptor;
use drover_proto::trust::sigmanifest;
use drover_tests::Registry;
use sign_support::*;

/// Replaces the `.sig` manifest of `digest` with exactly `layers` (attacker move).
fn write_sig(reg: &Registry, repository: &str, digest: &str, layers: Vec<(Descriptor, Vec<u8>)>) {
    let r = repo(&reg.reference(repository));
    rt().block_on(async {
        for (d, data) in &layers {
            r.put_blob(&d.digest, data.clone()).await.unwrap();
        }
        let (manifest, config) = sigmanifest::build(layers.into_iter().map(|(d, _)| d).collect());
        r.put_blob(&drover_proto::digest::sha256_digest(&config), config).await.unwrap();
        r.put_manifest(manifest, drover_proto::media::OCI_MANIFEST, Some(&sig_tag(digest))).await.unwrap();
    });
}

/// A correctly signed layer over arbitrary payload bytes.
fn layer(key: &PrivateKey, payload: &[u8]) -> (Descriptor, Vec<u8>) {
    (sigmanifest::signature_layer(payload, &key.sign(payload).unwrap()), payload.to_vec())
}

fn refused(reg: &Registry, digest: &str, public: &Path, needle: &str) {
    let r = reg.reference(&format!("fleet/edge@{digest}"));
    let out = verify(&r, &[public], 1);
    assert_ne!(out.code, 0, "must be refused ({needle}):\n{}", out.stdout);
    assert!(out.stderr.contains(needle), "stderr should say {needle:?}:\n{}", out.stderr);
    let j = out.json();
    assert_eq!(j["satisfied"], false);
    assert!(j["error"].as_str().unwrap().contains(needle), "{j}");
}

#[test]
fn tampered_signatures_are_refused_with_a_reason() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key_path, public) = keygen(&tmp.path().join("trusted"));
    let (other_key, _) = keygen(&tmp.path().join("other"));
    let key = PrivateKey::from_file(&key_path, PW).unwrap();
    let d = push_bundle(&reg, "fleet/edge", "prod", "prod", 1, "a");
    let d_old = push_bundle(&reg, "fleet/edge", "old", "prod", 0, "old");
    let docker_ref = reg.reference("fleet/edge");

    // Unsigned: no .sig manifest at all.
    refused(&reg, &d, &public, "is not signed");
    refused(&reg, &d, &public, &sig_tag(&d));

    // Wrong key: signed, but by a key that is not trusted.
    let out = drover(&["sign", &reg.reference(&format!("fleet/edge@{d}")), "--key", other_key.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    refused(&reg, &d, &public, "0 of 1");
    refused(&reg, &d, &public, "none of the 1 signature layer(s) verifies with this key");

    // Replay: a valid trusted signature over ANOTHER digest copied into this .sig.
    write_sig(&reg, "fleet/edge", &d, vec![layer(&key, &sigmanifest::payload(&docker_ref, &d_old))]);
    refused(&reg, &d, &public, &format!("payload signs docker-manifest-digest {d_old}, not this bundle {d}"));

    // Malformed payload (signed by the trusted key, but not a simple-signing document).
    write_sig(&reg, "fleet/edge", &d, vec![layer(&key, br#"{"critical":{"image":"nope"}}"#)]);
    refused(&reg, &d, &public, "malformed simple-signing payload");

    // Wrong critical.type.
    let p = String::from_utf8(sigmanifest::payload(&docker_ref, &d)).unwrap().replace("cosign container image signature", "attestation");
    write_sig(&reg, "fleet/edge", &d, vec![layer(&key, p.as_bytes())]);
    refused(&reg, &d, &public, "critical.type");

    // Foreign layer media type next to a valid signature: the whole manifest is refused.
    let good = layer(&key, &sigmanifest::payload(&docker_ref, &d));
    let mut foreign = good.clone();
    foreign.0.media_type = "application/octet-stream".into();
    write_sig(&reg, "fleet/edge", &d, vec![good.clone(), foreign]);
    refused(&reg, &d, &public, "media type \"application/octet-stream\"");

    // Signature annotation that is not base64, or missing, does not count.
    let mut bad_b64 = good.clone();
    bad_b64.0.annotations.insert("dev.cosignproject.cosign/signature".into(), "***".into());
    write_sig(&reg, "fleet/edge", &d, vec![bad_b64]);
    refused(&reg, &d, &public, "0 of 1");

    // Descriptor lies about the size of the payload blob.
    let mut wrong_size = good.clone();
    wrong_size.0.size += 1;
    write_sig(&reg, "fleet/edge", &d, vec![wrong_size]);
    refused(&reg, &d, &public, "refused");

    // Empty signature manifest (no layers) is unsigned, not "Ok with zero constraints".
    write_sig(&reg, "fleet/edge", &d, vec![]);
    refused(&reg, &d, &public, "is not signed");

    // docker-reference is informational: a signature made for another registry still counts.
    write_sig(&reg, "fleet/edge", &d, vec![layer(&key, &sigmanifest::payload("elsewhere.example/fleet/edge", &d))]);
    let out = verify(&reg.reference(&format!("fleet/edge@{d}")), &[&public], 1);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["matched"][0]["dockerReference"], "elsewhere.example/fleet/edge");
}

/// `drover verify` (the audit command) reads the `.sig` manifest once and every payload
/// once per layer, drover's own payloads included, so a damaged store is reported (the
/// channel reads skip drover's own payload; `platform_publish.rs` counts those).
#[test]
fn verify_reads_one_manifest_and_one_blob_per_distinct_payload() {
    let reg = Registry::start();
    let proxy = CountingProxy::start(&reg.addr);
    let tmp = tempfile::tempdir().unwrap();
    let (a, a_pub) = keygen(&tmp.path().join("a"));
    let (b, b_pub) = keygen(&tmp.path().join("b"));
    let (c, _) = keygen(&tmp.path().join("c"));
    let d = push_bundle(&reg, "fleet/edge", "prod", "prod", 1, "a");
    let r = format!("{}/fleet/edge@{d}", proxy.addr);
    for k in [&a, &b, &c] {
        sign(&r, k);
    }
    proxy.take();
    let out = verify(&r, &[&a_pub, &b_pub], 2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen: Vec<String> = proxy.take().into_iter().filter(|l| l != "GET /v2/").collect();
    let manifests = seen.iter().filter(|l| l.starts_with("GET ") && l.contains("/manifests/")).count();
    let blobs = seen.iter().filter(|l| l.starts_with("GET ") && l.contains("/blobs/")).count();
    assert_eq!(manifests, 1, "one .sig manifest GET: {seen:?}");
    // Three layers (three signers) over the one payload drover writes: read once.
    assert_eq!(blobs, 1, "one blob GET per distinct payload (3 layers, 1 payload): {seen:?}");
    assert!(seen.iter().all(|l| l.starts_with("GET ") || l.starts_with("HEAD ")), "{seen:?}");

    // Signatures made under another repository's name (a copy, another tool): each
    // layer's payload is fetched and checked; the threshold still counts distinct keys.
    let foreign = sigmanifest::payload("elsewhere.example/fleet/edge", &d);
    let ka = PrivateKey::from_file(&a, PW).unwrap();
    let kb = PrivateKey::from_file(&b, PW).unwrap();
    write_sig(&reg, "fleet/edge", &d, vec![layer(&ka, &foreign), layer(&kb, &foreign)]);
    proxy.take();
    let out = verify(&r, &[&a_pub, &b_pub], 2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen: Vec<String> = proxy.take().into_iter().filter(|l| l != "GET /v2/").collect();
    let blobs = seen.iter().filter(|l| l.starts_with("GET ") && l.contains("/blobs/")).count();
    assert_eq!(blobs, 1, "one blob GET per distinct payload (2 layers, 1 payload): {seen:?}");
}

/// The channel reads (`trust::verify`: publish, promote, the agent) know drover's own
/// payload by its digest and do not read it: a missing payload blob does not change their
/// answer, an untrusted key's signature over that payload is still refused; the audit
/// (`trust::verify_stored`, `drover verify`) reads it and reports the damage.
#[test]
fn own_payload_is_known_by_digest_but_still_needs_a_trusted_signature() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key_path, public) = keygen(&tmp.path().join("trusted"));
    let (other_path, _) = keygen(&tmp.path().join("other"));
    let key = PrivateKey::from_file(&key_path, PW).unwrap();
    let other = PrivateKey::from_file(&other_path, PW).unwrap();
    let d = push_bundle(&reg, "fleet/fast", "prod", "prod", 1, "a");
    let r = repo(&reg.reference("fleet/fast"));
    let policy = drover_proto::trust::TrustPolicy::from_files(std::slice::from_ref(&public), 1).unwrap();
    let ours = sigmanifest::payload(&reg.reference("fleet/fast"), &d);

    // Signed by a key the policy does not trust: refused, whatever is stored.
    write_sig(&reg, "fleet/fast", &d, vec![layer(&other, &ours)]);
    let e = rt().block_on(drover_proto::trust::verify(&r, &d, &policy)).unwrap_err();
    assert!(e.to_string().contains("0 of 1"), "{e}");

    // Signed by the trusted key, then the payload blob deleted over the registry API.
    write_sig(&reg, "fleet/fast", &d, vec![layer(&key, &ours)]);
    let payload_digest = sigmanifest::payload_digest(&ours);
    let del = drover_tests::rawreg::request(&reg.addr, "DELETE", &format!("/v2/fleet/fast/blobs/{payload_digest}"), &[], b"").unwrap();
    assert_eq!(del.status, 202, "blob delete");
    let v = rt().block_on(drover_proto::trust::verify(&r, &d, &policy)).expect("known payload, trusted signature");
    assert_eq!(v.matched.len(), 1);
    let e = rt().block_on(drover_proto::trust::verify_stored(&r, &d, &policy)).unwrap_err();
    assert!(e.to_string().contains("layer 0"), "the audit reads the payload and reports it missing: {e}");
}
