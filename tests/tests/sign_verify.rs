//! `drover sign` / `drover verify` against a real registry: thresholds, rotation,
//! append-only signing, and an independent check of the byte format with `p256`.

mod sign_support;

use base64::Engine as _;
use p256::ecdsa::signature::Verifier as _;
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use sha2::Digest as _;
use sign_support::*;
use drover_tests::Registry;

#[test]
fn two_keys_threshold_two_and_rotation() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (a_key, a_pub) = keygen(&tmp.path().join("a"));
    let (b_key, b_pub) = keygen(&tmp.path().join("b"));
    let digest = push_bundle(&reg, "fleet/edge", "prod", "prod", 1, "one");
    let r = reg.reference("fleet/edge:prod");

    // Signed by A only: threshold 2 over {A, B} fails and says why B failed.
    sign(&r, &a_key);
    let out = verify(&r, &[&a_pub, &b_pub], 2);
    assert_ne!(out.code, 0, "threshold 2 with one signature must fail");
    let j = out.json();
    assert_eq!(j["satisfied"], false);
    assert_eq!(j["matched"].as_array().unwrap().len(), 1);
    let b_report = j["keys"].as_array().unwrap().iter().find(|k| k["key"] == b_pub.to_str().unwrap()).unwrap().clone();
    assert_eq!(b_report["matched"], false);
    assert!(b_report["reason"].as_str().unwrap().contains("verifies with this key"), "{b_report}");
    assert!(out.stderr.contains("1 of 2"), "{}", out.stderr);

    // Rotation: old (A) and new (B) trusted, threshold 1. A bundle signed by B only passes.
    let d2 = push_bundle(&reg, "fleet/edge", "prod", "prod", 2, "two");
    let r2 = reg.reference(&format!("fleet/edge@{d2}"));
    sign(&r2, &b_key);
    let out = verify(&r2, &[&a_pub, &b_pub], 1);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j = out.json();
    let b_fp = j["keys"].as_array().unwrap().iter().find(|k| k["key"] == b_pub.to_str().unwrap()).unwrap()["fingerprint"].clone();
    assert_eq!(j["matched"][0]["fingerprint"], b_fp);
    // ... and with only the retired key trusted it fails.
    assert_ne!(verify(&r2, &[&a_pub], 1).code, 0);

    // Second signature on the first bundle APPENDS: now threshold 2 passes.
    let before = sig_manifest(&reg, "fleet/edge", &digest).unwrap();
    assert_eq!(before["layers"].as_array().unwrap().len(), 1);
    let s = sign(&reg.reference(&format!("fleet/edge@{digest}")), &b_key);
    assert_eq!(s["added"], true);
    let after = sig_manifest(&reg, "fleet/edge", &digest).unwrap();
    assert_eq!(after["layers"].as_array().unwrap().len(), 2);
    assert_eq!(after["layers"][0], before["layers"][0], "the first signature layer is kept unchanged");
    let out = verify(&reg.reference(&format!("fleet/edge@{digest}")), &[&a_pub, &b_pub], 2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["matched"].as_array().unwrap().len(), 2);

    // Re-signing with the same key is idempotent: no third layer.
    let s = sign(&reg.reference(&format!("fleet/edge@{digest}")), &a_key);
    assert_eq!(s["added"], false);
    assert_eq!(sig_manifest(&reg, "fleet/edge", &digest).unwrap()["layers"].as_array().unwrap().len(), 2);

    // The same key given twice counts once: threshold 2 with A twice is refused as impossible.
    let out = verify(&r, &[&a_pub, &a_pub], 2);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("threshold 2 can never be met"), "{}", out.stderr);
}

#[test]
fn signature_is_cosign_format_checked_independently_with_p256() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let digest = push_bundle(&reg, "fleet/small", "dev", "dev", 7, "x");
    let info = sign(&reg.reference("fleet/small:dev"), &key);

    // Manifest shape, read straight from the registry API.
    let (bytes, content_type) = raw_manifest(&reg, "fleet/small", &sig_tag(&digest)).expect("sig manifest");
    assert_eq!(content_type, "application/vnd.oci.image.manifest.v1+json");
    let m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(m["schemaVersion"], 2);
    assert_eq!(m["config"]["mediaType"], "application/vnd.oci.image.config.v1+json");
    let config = raw_blob(&reg, "fleet/small", m["config"]["digest"].as_str().unwrap());
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["rootfs"]["diff_ids"][0], m["layers"][0]["digest"]);
    let layer = &m["layers"][0];
    assert_eq!(layer["mediaType"], "application/vnd.dev.cosign.simplesigning.v1+json");

    // Payload: the simple-signing document cosign writes.
    let payload = raw_blob(&reg, "fleet/small", layer["digest"].as_str().unwrap());
    assert_eq!(layer["size"].as_u64().unwrap(), payload.len() as u64);
    let expected = format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{}/fleet/small"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#,
        reg.addr
    );
    assert_eq!(String::from_utf8(payload.clone()).unwrap(), expected);

    // Signature: base64 of an ASN.1 DER ECDSA P-256 / SHA-256 signature over the payload bytes.
    let b64 = layer["annotations"]["dev.cosignproject.cosign/signature"].as_str().unwrap();
    let der = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    let sig = p256::ecdsa::Signature::from_der(&der).expect("ASN.1 DER signature");
    let pem = std::fs::read_to_string(&public).unwrap();
    let vk = p256::ecdsa::VerifyingKey::from_public_key_pem(&pem).expect("PEM SPKI P-256 public key");
    vk.verify(&payload, &sig).expect("p256 verifies drover's signature");
    assert!(vk.verify(b"other bytes", &sig).is_err());

    // Fingerprint: sha256 of the DER SPKI.
    let spki = vk.to_public_key_der().unwrap();
    assert_eq!(info["keyFingerprint"], hex::encode(sha2::Sha256::digest(spki.as_bytes())));
}

#[test]
fn layout_and_archive_verify_and_tampered_blob_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(&tmp.path().join("k"));
    let dir = tmp.path().join("layout");
    let bundle = drover_proto::bundle::assemble(&objects("v"), &Default::default());
    let layout_ref = format!("oci:{}:edge", dir.display());
    let r = drover_proto::Repo::open(&drover_proto::Reference::parse(&layout_ref).unwrap(), &client(), true).unwrap().0;
    rt().block_on(r.push_bundle(&bundle, &["edge"])).unwrap();

    sign(&layout_ref, &key);
    // By digest: the bundle's signatures alone.
    let pinned = format!("oci:{}@{}", dir.display(), bundle.digest);
    let out = verify(&pinned, &[&public], 1);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // By its tag: a channel no statement places the bundle on; an agent following it refuses.
    let out = verify(&layout_ref, &[&public], 1);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.json()["satisfied"], true);
    assert_eq!(out.json()["accepted"], false);

    // The same layout as an oci-archive (a tar of the layout) verifies too.
    let archive = tmp.path().join("bundle.tar");
    let st = std::process::Command::new("tar").arg("-C").arg(&dir).arg("-cf").arg(&archive).arg(".").status().unwrap();
    assert!(st.success());
    let out = verify(&format!("oci-archive:{}@{}", archive.display(), bundle.digest), &[&public], 1);
    assert_eq!(out.code, 0, "{}", out.stderr);

    // Flip the payload blob on disk: its bytes no longer match the descriptor digest.
    let m = {
        let (b, _) = rt().block_on(r.manifest(&sig_tag(&bundle.digest), 1 << 20)).unwrap();
        serde_json::from_slice::<serde_json::Value>(&b).unwrap()
    };
    let hexd = m["layers"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string();
    let blob = dir.join("blobs/sha256").join(&hexd);
    let mut data = std::fs::read(&blob).unwrap();
    data[10] ^= 0x20;
    std::fs::write(&blob, &data).unwrap();
    let out = verify(&pinned, &[&public], 1);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("digest mismatch"), "{}", out.stderr);
    assert_eq!(out.json()["satisfied"], false);
}
