//! The cosign signature manifest (docs/design.md §4): the simple-signing payload, one layer per
//! signature, and the manifest + image config cosign writes at tag `sha256-<hex>.sig`.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Serialize;
use sigstore::cosign::payload::simple_signing::{Critical, Identity, Image, SimpleSigning, CRITICAL_TYPE_NAME};

use crate::digest::sha256_digest;
use crate::manifest::{Descriptor, Manifest};
use crate::media;

/// Media type of the OCI image config blob cosign puts in signature manifests.
pub const OCI_IMAGE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// Largest signature manifest read during verification.
pub const MAX_SIGNATURE_MANIFEST: u64 = 1 << 20;
/// Largest simple-signing payload read during verification.
pub const MAX_PAYLOAD: u64 = 64 << 10;
/// Most signature layers in one signature manifest (more is refused, naming the count):
/// one layer per signature, and no trust policy needs more than a few signers; a bound
/// keeps what one manifest `PUT` can make every verifier read small.
pub const MAX_LAYERS: usize = 64;

/// The simple-signing payload bytes cosign signs, in cosign's field order:
/// `{"critical":{"identity":{"docker-reference":..},"image":{"docker-manifest-digest":..},"type":..},"optional":null}`.
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    let ss = SimpleSigning {
        critical: Critical {
            identity: Identity { docker_reference: docker_reference.to_string() },
            image: Image { docker_manifest_digest: digest.to_string() },
            type_name: CRITICAL_TYPE_NAME.to_string(),
        },
        optional: None,
    };
    serde_json::to_vec(&ss).expect("payload serializes")
}

/// Parses and checks a payload against the digest it must sign. Returns the docker-reference.
/// The whole payload must be JSON, unknown fields included: serde_json skips an unknown
/// field's string without checking its encoding or escapes, and drover must not accept a
/// payload that cosign and other JSON parsers refuse (found by fuzzing). So it is read
/// as UTF-8, parsed whole into a JSON value (every string checked), then into its fields.
pub fn check_payload(bytes: &[u8], digest: &str) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("malformed simple-signing payload: not UTF-8 JSON ({e})"))?;
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("malformed simple-signing payload: {e}"))?;
    let ss: SimpleSigning =
        serde_json::from_value(value).map_err(|e| format!("malformed simple-signing payload: {e}"))?;
    if ss.critical.type_name != CRITICAL_TYPE_NAME {
        return Err(format!("payload critical.type is {:?}, expected {CRITICAL_TYPE_NAME:?}", ss.critical.type_name));
    }
    if ss.critical.image.docker_manifest_digest != digest {
        return Err(format!(
            "payload signs docker-manifest-digest {}, not this bundle {digest}",
            ss.critical.image.docker_manifest_digest
        ));
    }
    Ok(ss.critical.identity.docker_reference)
}

/// The layer descriptor for one signature: payload digest/size, base64 signature annotation.
pub fn signature_layer(payload: &[u8], signature_der: &[u8]) -> Descriptor {
    let mut d = Descriptor::of(media::COSIGN_SIMPLESIGNING, payload);
    d.annotations.insert(
        media::ANN_COSIGN_SIGNATURE.to_string(),
        base64::engine::general_purpose::STANDARD.encode(signature_der),
    );
    d
}

/// Decodes the base64 signature annotation of a layer (newlines tolerated, as cosign does).
pub fn layer_signature(layer: &Descriptor) -> Result<Vec<u8>, String> {
    let b64 = layer
        .annotations
        .get(media::ANN_COSIGN_SIGNATURE)
        .ok_or_else(|| format!("layer has no {} annotation", media::ANN_COSIGN_SIGNATURE))?;
    let cleaned: String = b64.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    base64::engine::general_purpose::STANDARD
        .decode(cleaned.as_bytes())
        .map_err(|e| format!("signature annotation is not base64: {e}"))
}

#[derive(Serialize)]
struct History {
    created: &'static str,
}

#[derive(Serialize)]
struct RootFs<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    diff_ids: Vec<&'a str>,
}

#[derive(Serialize)]
struct ImageConfig<'a> {
    architecture: &'static str,
    created: &'static str,
    history: Vec<History>,
    os: &'static str,
    rootfs: RootFs<'a>,
    config: BTreeMap<String, String>,
}

/// Builds a signature manifest holding `layers`, as cosign writes it (OCI manifest, an
/// image config whose `rootfs.diff_ids` are the layer digests). Returns (manifest bytes, config bytes).
pub fn build(layers: Vec<Descriptor>) -> (Vec<u8>, Vec<u8>) {
    const ZERO_TIME: &str = "0001-01-01T00:00:00Z";
    let config = ImageConfig {
        architecture: "",
        created: ZERO_TIME,
        history: layers.iter().map(|_| History { created: ZERO_TIME }).collect(),
        os: "",
        rootfs: RootFs { kind: "layers", diff_ids: layers.iter().map(|l| l.digest.as_str()).collect() },
        config: BTreeMap::new(),
    };
    let config_bytes = serde_json::to_vec(&config).expect("config serializes");
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(media::OCI_MANIFEST.to_string()),
        artifact_type: None,
        config: Descriptor::of(OCI_IMAGE_CONFIG, &config_bytes),
        layers,
        annotations: BTreeMap::new(),
    };
    (manifest.to_bytes(), config_bytes)
}

/// Parses signature manifest bytes (OCI or Docker schema 2 image manifest).
pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
    let m = Manifest::from_slice(bytes)?;
    match m.media_type.as_deref() {
        None | Some(media::OCI_MANIFEST) | Some(media::DOCKER_MANIFEST) => {}
        Some(other) => return Err(format!("signature manifest has media type {other:?}, expected an image manifest")),
    }
    if m.layers.len() > MAX_LAYERS {
        return Err(format!(
            "signature manifest has {} layers, more than the {MAX_LAYERS} drover reads (one layer per signature): delete that signature tag and sign again",
            m.layers.len()
        ));
    }
    Ok(m)
}

/// Digest of a payload (the layer digest it gets).
pub fn payload_digest(payload: &[u8]) -> String {
    sha256_digest(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `bench/fuzz.sh 600` (target `signature_payload`): a valid payload with an
    /// unknown field whose string holds bytes that are not UTF-8 was accepted, though it is
    /// not JSON.
    #[test]
    fn a_payload_that_is_not_json_is_refused() {
        let good = payload("registry.example.com/fleet/edge", "sha256:abc");
        let mut bad = good[..good.len() - 1].to_vec();
        bad.extend_from_slice(b",\"x\":\"\xff\xff%\"}");
        assert!(serde_json::from_slice::<serde_json::Value>(&bad).is_err(), "not JSON");
        let err = check_payload(&bad, "sha256:abc").unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
        assert!(check_payload(&good, "sha256:abc").is_ok());
        // The second find of the same run: a broken escape in an unknown field's string.
        let mut bad = good[..good.len() - 1].to_vec();
        bad.extend_from_slice(b",\"x\":\"\\u00\"}");
        assert!(serde_json::from_slice::<serde_json::Value>(&bad).is_err(), "not JSON");
        let err = check_payload(&bad, "sha256:abc").unwrap_err();
        assert!(err.contains("malformed simple-signing payload"), "{err}");
        // The fuzzer's inputs themselves (kept as seeds of the target).
        let fuzz_digest = "sha256:7d865e959b2466918c9863afca942d0fb89d7c9ac0c99bafc3749504ded97730";
        for found in [
            &include_bytes!("../../../fuzz/seeds/signature_payload/crash-9b2bed85ce5ea726fdb54d7be5754f33ca4dfd40")[..],
            &include_bytes!("../../../fuzz/seeds/signature_payload/crash-c691e0c512c549b4a09cda96a563c4058fe51398")[..],
        ] {
            assert!(check_payload(found, fuzz_digest).is_err());
        }
    }

    #[test]
    fn payload_matches_cosign_bytes() {
        let p = payload("localhost:5000/fleet/edge", "sha256:abc");
        assert_eq!(
            std::str::from_utf8(&p).unwrap(),
            r#"{"critical":{"identity":{"docker-reference":"localhost:5000/fleet/edge"},"image":{"docker-manifest-digest":"sha256:abc"},"type":"cosign container image signature"},"optional":null}"#
        );
        assert_eq!(check_payload(&p, "sha256:abc").unwrap(), "localhost:5000/fleet/edge");
        assert!(check_payload(&p, "sha256:abd").is_err());
        assert!(check_payload(b"{}", "sha256:abc").is_err());
    }
}
