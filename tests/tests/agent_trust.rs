//! The agent as the last line of defence against whoever can write the registry (with
//! skopeo, never through drover): nothing is downloaded before the signatures over the
//! manifest digest are verified (an unsigned bundle with a 45 MiB layer costs the agent
//! one manifest and one signature lookup), a signed bundle for another cluster type costs
//! its config but not its layer, and removing a key from the trust set stops re-applying
//! (also from the offline cache) what only that key signed.

mod agent_support;

use std::collections::BTreeMap;
use std::io::{Read, Write};

use agent_support::*;
use drover_proto::bundle::{assemble, Bundle, BundleMeta};
use drover_proto::digest::{sha256_digest, sha256_hex, signature_tag};
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::media;
use drover_proto::object::ObjectRef;
use drover_proto::registry::{RegistryClient, RegistryOptions};
use drover_proto::{Reference, Repo};

/// `n` random bytes from the kernel.
fn random(n: usize) -> Vec<u8> {
    let mut data = vec![0u8; n];
    std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut data).unwrap();
    data
}

/// A well-formed bundle for edge/prod whose one file is `size` random bytes: a tar.gz that
/// does not compress, and a config index that matches it (only the signature is missing).
fn incompressible_bundle(size: usize, sequence: u64) -> Bundle {
    let id = ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("app".into()), name: "blob".into() };
    let data = random(size);
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_path(id.bundle_path()).unwrap();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append(&h, data.as_slice()).unwrap();
    let tar = tar.into_inner().unwrap();
    let mut gz = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::none());
    gz.write_all(&tar).unwrap();
    let layer = gz.finish().unwrap();

    let meta = BundleMeta { cluster_type: "edge".into(), environment: "prod".into(), sequence, ..Default::default() };
    let base = assemble(&BTreeMap::from([(id, b"placeholder".to_vec())]), &meta);
    let mut config_doc = base.config_doc;
    config_doc.objects[0].sha256 = sha256_hex(&data);
    let config = serde_json::to_vec(&config_doc).unwrap();
    let mut m = base.manifest_doc;
    m.config = Descriptor::of(media::BUNDLE_CONFIG, &config);
    let mut layer_desc = Descriptor::of(media::BUNDLE_LAYER, &layer);
    layer_desc.annotations = m.layers[0].annotations.clone();
    layer_desc.annotations.insert(media::ANN_ORAS_DIGEST.into(), sha256_digest(&tar));
    m.layers = vec![layer_desc];
    let manifest = m.to_bytes();
    Bundle { digest: sha256_digest(&manifest), manifest, config, layer, config_doc, manifest_doc: m }
}

/// The manifest of `digest` in fleet/edge, read straight from the registry (not through a proxy).
fn manifest_of(fx: &Fx, digest: &str) -> Manifest {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() }).unwrap();
    let (repo, _) = Repo::open(&Reference::parse(&fx.tag_ref).unwrap(), &client, false).unwrap();
    let (bytes, _) = rt.block_on(repo.manifest(digest, 4 << 20)).unwrap();
    Manifest::from_slice(&bytes).unwrap()
}

fn blob_requests<'a>(lines: &'a [String], digest: &str) -> Vec<&'a String> {
    lines.iter().filter(|l| l.contains("/blobs/") && l.contains(digest)).collect()
}

#[test]
fn unsigned_bundle_is_refused_before_any_blob_is_downloaded() {
    let fx = Fx::new();
    let proxy = CountingProxy::start(&fx.reg.addr);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    let evil = incompressible_bundle(45 << 20, 100);
    assert!(evil.layer.len() > 45 << 20, "the layer must not compress: {}", evil.layer.len());
    fx.skopeo_put(&evil, "fleet/edge:prod");

    let out = fx.once_from(&source, &[]);
    assert_eq!(out.code, 1, "an unsigned bundle must be refused:\n{}", out.stderr);
    assert!(out.stderr.contains("reason=\"unsigned\""), "{}", out.stderr);
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st}");
    assert_eq!(st["lastAttempt"]["digest"], evil.digest.as_str(), "{st}");
    assert!(st["lastAttempt"]["reason"].as_str().unwrap().contains("not signed"), "{st}");
    assert!(st["appliedDigest"].is_null(), "{st}");
    assert!(snapshot(&fx.target()).is_empty(), "nothing may be written to the target");

    // What went over the wire: the manifest and the signature lookup, never a bundle blob.
    let lines = proxy.lines();
    assert!(lines.iter().any(|l| l.starts_with(&format!("GET /v2/fleet/edge/manifests/{} ", evil.digest))), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains(&signature_tag(&evil.digest))), "the signature must be looked up: {lines:#?}");
    let layer = blob_requests(&lines, &evil.manifest_doc.layers[0].digest);
    assert!(layer.is_empty(), "the 45 MiB layer of an unsigned bundle was requested: {layer:?}");
    let config = blob_requests(&lines, &evil.manifest_doc.config.digest);
    assert!(config.is_empty(), "the config of an unsigned bundle was requested: {config:?}");
}

#[test]
fn signed_bundle_for_another_cluster_type_costs_its_config_but_not_its_layer() {
    let fx = Fx::new();
    let proxy = CountingProxy::start(&fx.reg.addr);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    let digest = fx.push_for("core", &objs(&[cm("app", "a", "core")]), 5, Some("k1"), &[]);
    let m = manifest_of(&fx, &digest);

    let out = fx.once_from(&source, &[]);
    assert_eq!(out.code, 1, "a bundle for cluster type core must be refused by an edge agent:\n{}", out.stderr);
    assert!(out.stderr.contains("reason=\"cluster_type\""), "{}", out.stderr);
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st}");
    assert!(st["lastAttempt"]["reason"].as_str().unwrap().contains("expects \"edge\""), "{st}");
    assert!(snapshot(&fx.target()).is_empty());

    let lines = proxy.lines();
    let sig = lines.iter().position(|l| l.contains(&signature_tag(&digest))).expect("signature looked up");
    let config = lines.iter().position(|l| l.contains("/blobs/") && l.contains(&m.config.digest)).expect("config read");
    assert!(sig < config, "the config must be read after the signature was checked: {lines:#?}");
    let layer = blob_requests(&lines, &m.layers[0].digest);
    assert!(layer.is_empty(), "the layer of a bundle for another cluster type was requested: {layer:?}");
}

#[test]
fn a_key_removed_from_the_trust_set_stops_reapplying_what_it_signed() {
    let mut fx = Fx::new();
    let source = fx.tag_ref.clone();
    let d1 = fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1, Some("k1"), &[]);
    let out = fx.once_trusting(&source, &["k1", "k2"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let applied = snapshot(&fx.target());
    assert_eq!(applied.len(), 2);
    // Drift that a resync would repair: the file of ConfigMap a is deleted.
    let a = fx.target().join("manifests/app/ConfigMap.core.a.yaml");
    std::fs::remove_file(&a).unwrap();
    let drifted = snapshot(&fx.target());

    // Restarted trusting only k2: the applied bundle (signed by k1 only) is not re-applied.
    let out = fx.once_trusting(&source, &["k2"], &[]);
    assert_eq!(out.code, 1, "the resync must refuse what no trusted key signed:\n{}", out.stderr);
    assert!(out.stderr.contains("reason=\"signature\""), "{}", out.stderr);
    assert_eq!(snapshot(&fx.target()), drifted, "the target was touched");
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st}");
    assert_eq!(st["lastAttempt"]["digest"], d1.as_str(), "{st}");
    assert!(st["lastAttempt"]["reason"].as_str().unwrap().contains("trust policy changed"), "{st}");
    assert_eq!(st["appliedDigest"], d1.as_str(), "what is on the target is still recorded: {st}");

    // Registry down: it cannot be re-verified, so it is not re-applied from the cache either.
    fx.reg.stop();
    let out = fx.once_trusting(&source, &["k2"], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(snapshot(&fx.target()), drifted, "re-applied from the cache without re-verification");
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Failed", "{st}");
    assert!(st["lastAttempt"]["reason"].as_str().unwrap().contains("not re-applying"), "{st}");

    // Control: under the policy it was verified with, the offline restart re-applies it.
    let out = fx.once_trusting(&source, &["k1", "k2"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(snapshot(&fx.target()), applied);

    // k2 signs it too: trusted by k2 alone it is re-verified, re-applied, and from then on
    // re-applied offline under that policy.
    fx.reg.restart();
    fx.sign(&d1, "k2");
    std::fs::remove_file(&a).unwrap();
    let out = fx.once_trusting(&source, &["k2"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(snapshot(&fx.target()), applied);
    fx.reg.stop();
    std::fs::remove_file(&a).unwrap();
    let out = fx.once_trusting(&source, &["k2"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(snapshot(&fx.target()), applied);
}
