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

/// Verification reads the `.sig` manifest once; a payload drover itself writes for this
/// repository and digest is not downloaded (its layer's digest names exactly those bytes);
/// any other payload is fetched once per layer.
#[test]
fn verify_reads_one_manifest_and_one_blob_per_foreign_layer() {
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
    assert_eq!(blobs, 0, "drover's own payload (3 layers) is not downloaded: {seen:?}");
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
    assert_eq!(blobs, 2, "one blob GET per signature layer of another form (2 layers): {seen:?}");
}
