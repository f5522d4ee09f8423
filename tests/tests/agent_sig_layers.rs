//! One manifest `PUT` must not cost every agent megabytes on every poll. A registry writer
//! without a key, with raw HTTP: points the channel at a copy of the release (a new
//! digest) whose `.sig` has 256 layers all naming one 64 KiB payload. Counted at a proxy
//! in front of the real registry over three polls of a running agent:
//!
//! - the 256-layer signature is refused for its layer count (named) with at most a
//!   handful of payload GETs (before: 256 per poll, 768 in all);
//! - a refused digest is not fetched again on the next polls (its `.sig` is read once);
//! - a new digest on the tag is judged at once; a `.sig` of 64 layers naming one payload
//!   (within the bound) costs one payload GET.

mod agent_support;


use agent_support::{cm, http_get, live_status, metric, objs, wait_until, CountingProxy, Fx};
use drover_tests::rawreg;

const REPO: &str = "fleet/edge";

/// The attacker's copy of the release manifest `of` (one annotation added: a new digest
/// with the same signed blobs), put at the channel tag; returns its digest.
fn copy_release(fx: &Fx, of: &str, mark: &str) -> String {
    let (bytes, media_type) = rawreg::manifest(&fx.reg.addr, REPO, of).expect("the release manifest");
    let mut m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    m["annotations"]["attacker.example/copy"] = mark.into();
    let copy = serde_json::to_vec(&m).unwrap();
    rawreg::put_manifest(&fx.reg.addr, REPO, "prod", &copy, &media_type);
    rawreg::digest(&copy)
}

/// A `.sig` for `digest` with `layers` layers naming one 64 KiB payload (a signature no
/// key made); returns the payload's digest.
fn sig_with_identical_layers(fx: &Fx, digest: &str, layers: usize) -> String {
    let addr = &fx.reg.addr;
    let mut payload = serde_json::json!({
        "critical": {"identity": {"docker-reference": format!("{addr}/{REPO}")}, "image": {"docker-manifest-digest": digest}, "type": "cosign container image signature"},
        "optional": {"pad": ""},
    });
    let base = serde_json::to_vec(&payload).unwrap().len();
    payload["optional"]["pad"] = "a".repeat((64 << 10) - 1 - base).into();
    let payload = serde_json::to_vec(&payload).unwrap();
    let payload_digest = rawreg::put_blob(addr, REPO, &payload);
    let config = br#"{"architecture":"","os":"","config":{},"rootfs":{"type":"layers","diff_ids":[]}}"#;
    let config_digest = rawreg::put_blob(addr, REPO, config);
    use base64::Engine;
    let signature = base64::engine::general_purpose::STANDARD.encode([7u8; 70]);
    let layer = serde_json::json!({
        "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": payload_digest, "size": payload.len(),
        "annotations": {"dev.cosignproject.cosign/signature": signature},
    });
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": vec![layer; layers],
    });
    let tag = format!("sha256-{}.sig", &digest[7..]);
    rawreg::put_manifest(addr, REPO, &tag, &serde_json::to_vec(&manifest).unwrap(), "application/vnd.oci.image.manifest.v1+json");
    payload_digest
}

fn gets(proxy: &CountingProxy, what: &str) -> usize {
    proxy.lines().iter().filter(|l| l.starts_with("GET ") && l.contains(what)).count()
}

#[test]
fn a_sig_with_256_identical_layers_costs_a_handful_of_gets_over_three_polls() {
    let fx = Fx::new();
    let release = fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    let proxy = CountingProxy::start(&fx.reg.addr);
    let source = format!("{}/{REPO}:prod", proxy.addr);
    assert_eq!(fx.once_from(&source, &[]).code, 0);
    let copy = copy_release(&fx, &release, "one");
    let payload = sig_with_identical_layers(&fx, &copy, 256);

    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let _agent = fx.spawn(&source, &listen, &["--interval", "1s"]);
    let rejected = || metric(&listen, "drover_polls_total{result=\"Rejected\"}");
    wait_until(60, "three polls refusing the copy", || rejected() >= 3.0);
    let st = live_status(&listen);
    assert_eq!(st["lastAttempt"]["digest"], copy.as_str(), "{st:#}");
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st:#}");
    let blob_gets = gets(&proxy, &format!("/blobs/{payload}"));
    eprintln!("256 identical layers, three polls: {blob_gets} payload GETs, {} .sig GETs", gets(&proxy, &format!("/manifests/sha256-{}.sig", &copy[7..])));
    assert!(blob_gets <= 4, "{blob_gets} GETs of the one payload over three polls ({} requests in all)", proxy.count());
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("256") && reason.contains("layers"), "the refusal names the layer count: {reason}");
    let sig_gets = gets(&proxy, &format!("/manifests/sha256-{}.sig", &copy[7..]));
    assert!(sig_gets <= 1, "the refused digest's .sig was read {sig_gets} times: a refusal is remembered");

    // A new digest on the tag is judged at once; 64 layers naming one payload: one GET.
    let second = copy_release(&fx, &release, "two");
    let payload2 = sig_with_identical_layers(&fx, &second, 64);
    wait_until(30, "the new digest judged", || http_get(&listen, "/status").is_some() && live_status(&listen)["lastAttempt"]["digest"] == second.as_str());
    let now = rejected();
    wait_until(30, "three more polls", || rejected() >= now + 3.0);
    let st = live_status(&listen);
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st:#}");
    assert_eq!(st["appliedDigest"], release.as_str(), "the release stays applied: {st:#}");
    let blob_gets = gets(&proxy, &format!("/blobs/{payload2}"));
    eprintln!("64 identical layers, three polls or more: {blob_gets} payload GETs");
    assert_eq!(blob_gets, 1, "one GET per distinct payload, and none on the polls after the refusal");
}
