//! The trust policy (docs/design.md §4), shared by `drover verify/promote/import` and the agent:
//! a set of public keys and a threshold; verification of cosign key-based signatures
//! read through any [`Repo`] (registry, OCI layout, OCI archive), fail closed.

pub mod sigmanifest;
pub mod sign;

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;

use crate::digest::{is_valid_digest, signature_tag};
use crate::error::StoreError;
use crate::keys::{KeyError, PublicKey};
use crate::manifest::Descriptor;
use crate::media;
use crate::repo::Repo;

/// Trusted public keys and how many distinct ones must have signed.
#[derive(Debug, Clone)]
pub struct TrustPolicy {
    /// The trusted keys (distinct by fingerprint).
    pub keys: Vec<PublicKey>,
    /// Distinct trusted keys required (at least 1, at most `keys.len()`).
    pub threshold: usize,
}

impl TrustPolicy {
    /// A policy from loaded keys; duplicates (same fingerprint) are counted once.
    pub fn new(keys: Vec<PublicKey>, threshold: usize) -> Result<Self, TrustError> {
        let mut seen = BTreeSet::new();
        let keys: Vec<PublicKey> = keys.into_iter().filter(|k| seen.insert(k.fingerprint().to_string())).collect();
        if keys.is_empty() {
            return Err(TrustError::Policy("no trusted public key given (pass --trust-key PUB at least once)".into()));
        }
        if threshold == 0 {
            return Err(TrustError::Policy("threshold must be at least 1".into()));
        }
        if threshold > keys.len() {
            return Err(TrustError::Policy(format!(
                "threshold {threshold} can never be met with {} distinct trusted key(s)",
                keys.len()
            )));
        }
        Ok(TrustPolicy { keys, threshold })
    }

    /// Loads PEM public keys from files and builds the policy.
    pub fn from_files(paths: &[PathBuf], threshold: usize) -> Result<Self, TrustError> {
        Self::new(crate::keys::load_public_keys(paths)?, threshold)
    }
}

/// A trusted key that signed the digest.
#[derive(Debug, Clone, Serialize)]
pub struct KeyMatch {
    /// Key fingerprint (hex sha256 of the DER SPKI).
    pub fingerprint: String,
    /// Where the key was loaded from.
    pub key: String,
    /// Index of the first signature layer it verified.
    pub layer: usize,
    /// The payload's docker-reference (informational).
    pub docker_reference: String,
}

/// Outcome for one trusted key.
#[derive(Debug, Clone, Serialize)]
pub struct KeyReport {
    /// Key fingerprint.
    pub fingerprint: String,
    /// Where the key was loaded from.
    pub key: String,
    /// True when it signed this exact digest.
    pub matched: bool,
    /// Why it did not count (absent when matched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Outcome for one signature layer.
#[derive(Debug, Clone, Serialize)]
pub struct LayerReport {
    /// Position in the signature manifest.
    pub index: usize,
    /// Layer (payload) digest.
    pub digest: String,
    /// Trusted keys whose signature over this layer's payload verifies.
    pub signed_by: Vec<String>,
    /// Why the layer does not count (absent when it counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The result of verifying one digest against a policy.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The verified manifest digest.
    pub digest: String,
    /// The signature manifest reference that was read.
    pub signature_reference: String,
    /// Distinct trusted keys required.
    pub threshold: usize,
    /// True when at least `threshold` distinct trusted keys signed `digest`.
    pub satisfied: bool,
    /// Trusted keys that signed, each counted once.
    pub matched: Vec<KeyMatch>,
    /// Per trusted key outcome.
    pub keys: Vec<KeyReport>,
    /// Per signature layer outcome.
    pub layers: Vec<LayerReport>,
}

impl Verification {
    /// One line per failed key, for error messages.
    pub fn failure_summary(&self) -> String {
        self.keys
            .iter()
            .filter(|k| !k.matched)
            .map(|k| format!("key {} ({}): {}", short(&k.fingerprint), k.key, k.reason.as_deref().unwrap_or("no valid signature")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn short(fp: &str) -> &str {
    &fp[..fp.len().min(16)]
}

/// Why verification refused (fail closed), or could not run.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The policy itself is unusable.
    #[error("trust policy: {0}")]
    Policy(String),
    /// A key file could not be loaded.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The digest has no signature manifest.
    #[error("{digest} is not signed: no signature manifest {reference} (sign the digest you built: {})", crate::hint::sign_digest(.bundle))]
    Unsigned {
        /// The manifest digest.
        digest: String,
        /// The `.sig` reference that is missing.
        reference: String,
        /// The bundle by digest (`HOST/REPO@sha256:…`).
        bundle: String,
    },
    /// The signature manifest or one of its blobs is malformed or tampered with.
    #[error("signature manifest {reference} refused: {reason}")]
    Tampered {
        /// The `.sig` reference.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// Not enough distinct trusted keys signed.
    #[error("{}: {} of {} required trusted key(s) signed {}; {}", .0.signature_reference, .0.matched.len(), .0.threshold, .0.digest, .0.failure_summary())]
    NotSatisfied(Box<Verification>),
    /// Reading from the store failed (network, I/O).
    #[error("reading signatures: {0}")]
    Store(#[from] StoreError),
}

/// The `docker-reference` cosign writes for a repository: `HOST/REPO` for registries,
/// the repository name for layouts (informational only; verification ignores it).
pub fn docker_reference(repo: &Repo) -> String {
    match repo {
        Repo::Registry { repo, .. } => repo.repository_url(),
        Repo::Layout { .. } => repo.repository_name(),
    }
}

/// Verifies that at least `policy.threshold` distinct trusted keys signed exactly `digest`
/// in `repo`. Reads the signature manifest (one manifest GET, at most
/// [`sigmanifest::MAX_LAYERS`] layers) and each distinct payload once (one blob GET per
/// payload digest, digest checked; layers naming the same payload share it) — except the
/// payload drover writes for this repository and digest: equal digests are equal bytes,
/// so that payload is known without reading it. Never returns Ok unless satisfied.
pub async fn verify(repo: &Repo, digest: &str, policy: &TrustPolicy) -> Result<Verification, TrustError> {
    verify_reading(repo, digest, policy, false).await
}

/// [`verify`] that also reads every payload blob the signature manifest names, drover's
/// own included, so that a damaged or missing payload in the store is reported
/// (`drover verify`, the audit command; the trust decision is the same).
pub async fn verify_stored(repo: &Repo, digest: &str, policy: &TrustPolicy) -> Result<Verification, TrustError> {
    verify_reading(repo, digest, policy, true).await
}

async fn verify_reading(repo: &Repo, digest: &str, policy: &TrustPolicy, read_all: bool) -> Result<Verification, TrustError> {
    if !is_valid_digest(digest) {
        return Err(TrustError::Policy(format!("{digest:?} is not a sha256 manifest digest")));
    }
    if policy.keys.is_empty() || policy.threshold == 0 || policy.threshold > policy.keys.len() {
        return Err(TrustError::Policy("empty keys or impossible threshold".into()));
    }
    let tag = signature_tag(digest);
    let reference = repo.describe(&tag);
    let tampered = |reason: String| TrustError::Tampered { reference: reference.clone(), reason };
    let bytes = match repo.manifest(&tag, sigmanifest::MAX_SIGNATURE_MANIFEST).await {
        Ok((bytes, _)) => bytes,
        Err(StoreError::NotFound(_)) => return Err(TrustError::Unsigned { digest: digest.into(), reference, bundle: repo.describe(digest) }),
        // Other bytes than the digest the registry named for the tag: damaged on the way
        // (a cut or flipped body), read again like a dropped connection. What the
        // registry itself holds is judged below: unreadable there is tampering.
        Err(e @ StoreError::DigestMismatch { .. }) => return Err(e.into()),
        Err(e @ (StoreError::TooLarge { .. } | StoreError::Malformed(_))) => return Err(tampered(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    let manifest = sigmanifest::parse(&bytes).map_err(tampered)?;
    if manifest.layers.is_empty() {
        return Err(TrustError::Unsigned { digest: digest.into(), reference, bundle: repo.describe(digest) });
    }
    // The payload drover itself writes for this repository and digest: a layer named by
    // its digest holds exactly these bytes (equal sha256, equal bytes), so it is not
    // downloaded. Any other payload (another signer's formatting, a copy signed under
    // another repository's name) is fetched and checked against its digest.
    let ours = (!read_all).then(|| {
        let payload = sigmanifest::payload(&docker_reference(repo), digest);
        (sigmanifest::payload_digest(&payload), payload)
    });
    // Integrity first: every layer must be a simple-signing layer whose bytes match its
    // descriptor. Each distinct payload is read once (a .sig of many layers naming one
    // payload costs one GET).
    let mut read: std::collections::HashMap<&str, Vec<u8>> = std::collections::HashMap::new();
    let mut payloads = Vec::with_capacity(manifest.layers.len());
    for (i, layer) in manifest.layers.iter().enumerate() {
        if layer.media_type != media::COSIGN_SIMPLESIGNING {
            return Err(tampered(format!(
                "layer {i} has media type {:?}, expected {:?}",
                layer.media_type,
                media::COSIGN_SIMPLESIGNING
            )));
        }
        if layer.size > sigmanifest::MAX_PAYLOAD {
            return Err(tampered(format!("layer {i} payload is {} bytes, over {}", layer.size, sigmanifest::MAX_PAYLOAD)));
        }
        let fetched = match (&ours, read.get(layer.digest.as_str())) {
            (_, Some(payload)) => Ok(payload.clone()),
            (Some((known, payload)), _) if *known == layer.digest => Ok(payload.clone()),
            _ => repo.blob(&layer.digest, sigmanifest::MAX_PAYLOAD).await,
        };
        let data = match fetched {
            Ok(d) => d,
            // Bytes that do not hash to the digest naming them were damaged on the way
            // (the digest is fixed): a store error, retried, not a tampered signature.
            Err(e @ (StoreError::Transport { .. } | StoreError::DigestMismatch { .. })) => return Err(e.into()),
            Err(e) => return Err(tampered(format!("layer {i}: {e}"))),
        };
        if data.len() as u64 != layer.size {
            return Err(tampered(format!("layer {i} is {} bytes, its descriptor says {}", data.len(), layer.size)));
        }
        read.entry(layer.digest.as_str()).or_insert_with(|| data.clone());
        payloads.push(data);
    }
    evaluate(digest, &reference, &manifest.layers, &payloads, policy)
}

/// Judges one signature layer on its own (pure): a simple-signing layer whose payload
/// signs exactly `digest` with a decodable signature and, when a policy is given, whose
/// signature verifies with one of its keys. `Err` says why the layer is not worth keeping.
pub fn screen_layer(digest: &str, layer: &Descriptor, payload: &[u8], policy: Option<&TrustPolicy>) -> Result<(), String> {
    if layer.media_type != media::COSIGN_SIMPLESIGNING {
        return Err(format!("media type {:?} is not {:?}", layer.media_type, media::COSIGN_SIMPLESIGNING));
    }
    if payload.len() as u64 != layer.size || payload.len() as u64 > sigmanifest::MAX_PAYLOAD {
        return Err(format!("payload is {} bytes, its descriptor says {} (limit {})", payload.len(), layer.size, sigmanifest::MAX_PAYLOAD));
    }
    if crate::digest::sha256_digest(payload) != layer.digest {
        return Err(format!("payload does not hash to {}", layer.digest));
    }
    let sig = sigmanifest::layer_signature(layer)?;
    sigmanifest::check_payload(payload, digest)?;
    if let Some(policy) = policy {
        if !policy.keys.iter().any(|k| k.verify(payload, &sig)) {
            return Err("signature does not verify with any trusted key".into());
        }
    }
    Ok(())
}

/// Checks fetched layers against the policy (pure; no I/O): at least `policy.threshold`
/// distinct trusted keys must have signed `digest`; `reference` names the `.sig` manifest.
pub fn evaluate(
    digest: &str,
    reference: &str,
    layers: &[Descriptor],
    payloads: &[Vec<u8>],
    policy: &TrustPolicy,
) -> Result<Verification, TrustError> {
    let mut reports = Vec::with_capacity(layers.len());
    let mut matched: Vec<KeyMatch> = Vec::new();
    let mut key_reasons: Vec<Vec<String>> = vec![Vec::new(); policy.keys.len()];
    for (i, (layer, payload)) in layers.iter().zip(payloads).enumerate() {
        let mut report = LayerReport { index: i, digest: layer.digest.clone(), signed_by: vec![], problem: None };
        let sig = match sigmanifest::layer_signature(layer) {
            Ok(s) => s,
            Err(e) => {
                report.problem = Some(e);
                reports.push(report);
                continue;
            }
        };
        let signers: Vec<usize> = (0..policy.keys.len()).filter(|&k| policy.keys[k].verify(payload, &sig)).collect();
        report.signed_by = signers.iter().map(|&k| policy.keys[k].fingerprint().to_string()).collect();
        if signers.is_empty() {
            report.problem = Some("signature does not verify with any trusted key".into());
            reports.push(report);
            continue;
        }
        match sigmanifest::check_payload(payload, digest) {
            Ok(docker_reference) => {
                for k in signers {
                    let fp = policy.keys[k].fingerprint();
                    if !matched.iter().any(|m| m.fingerprint == fp) {
                        matched.push(KeyMatch {
                            fingerprint: fp.to_string(),
                            key: policy.keys[k].source().to_string(),
                            layer: i,
                            docker_reference: docker_reference.clone(),
                        });
                    }
                }
            }
            Err(problem) => {
                for k in signers {
                    key_reasons[k].push(format!("layer {i}: {problem}"));
                }
                report.problem = Some(problem);
            }
        }
        reports.push(report);
    }
    let keys = policy
        .keys
        .iter()
        .zip(key_reasons)
        .map(|(k, reasons)| {
            let is_match = matched.iter().any(|m| m.fingerprint == k.fingerprint());
            KeyReport {
                fingerprint: k.fingerprint().to_string(),
                key: k.source().to_string(),
                matched: is_match,
                reason: (!is_match).then(|| {
                    if reasons.is_empty() {
                        format!("none of the {} signature layer(s) verifies with this key", layers.len())
                    } else {
                        reasons.join("; ")
                    }
                }),
            }
        })
        .collect();
    let satisfied = matched.len() >= policy.threshold;
    let v = Verification {
        digest: digest.to_string(),
        signature_reference: reference.to_string(),
        threshold: policy.threshold,
        satisfied,
        matched,
        keys,
        layers: reports,
    };
    if satisfied {
        Ok(v)
    } else {
        Err(TrustError::NotSatisfied(Box::new(v)))
    }
}

/// The signature manifest of a digest as it is in a repository before an append.
#[derive(Debug, Clone, Default)]
pub struct ExistingSignatures {
    /// Its digest (`None`: there is no signature manifest yet).
    pub digest: Option<String>,
    /// Its layers.
    pub layers: Vec<Descriptor>,
}

/// Reads the signature manifest of `digest` in `repo` (one manifest GET; absent is empty).
pub async fn existing_signatures(repo: &Repo, digest: &str) -> Result<ExistingSignatures, StoreError> {
    let tag = signature_tag(digest);
    match repo.manifest(&tag, sigmanifest::MAX_SIGNATURE_MANIFEST).await {
        Ok((bytes, d)) => {
            let layers = sigmanifest::parse(&bytes).map_err(|e| StoreError::Malformed(format!("{}: {e}", repo.describe(&tag))))?.layers;
            Ok(ExistingSignatures { digest: Some(d), layers })
        }
        Err(StoreError::NotFound(_)) => Ok(ExistingSignatures::default()),
        Err(e) => Err(e),
    }
}

/// Adds signature layers (descriptor + payload bytes) to the signature manifest of
/// `digest` in `repo`, keeping every existing layer; layers already present (same
/// digest and signature) are skipped. Pushes payload blobs, the config and the manifest.
/// Returns (signature manifest digest, number of layers added, total layers).
pub async fn append_signature_layers(
    repo: &Repo,
    digest: &str,
    new_layers: Vec<(Descriptor, Vec<u8>)>,
) -> Result<(String, usize, usize), StoreError> {
    let existing = existing_signatures(repo, digest).await?;
    append_to(repo, digest, existing, new_layers).await
}

/// [`append_signature_layers`] onto `existing`, as just read by [`existing_signatures`]
/// (no second read). When there was no signature manifest, its payload and config blobs
/// are new: they are uploaded without asking the registry first.
pub async fn append_to(
    repo: &Repo,
    digest: &str,
    existing: ExistingSignatures,
    new_layers: Vec<(Descriptor, Vec<u8>)>,
) -> Result<(String, usize, usize), StoreError> {
    let tag = signature_tag(digest);
    let fresh = existing.digest.is_none();
    let mut layers = existing.layers;
    let mut added = 0;
    for (desc, payload) in new_layers {
        let present = layers.iter().any(|l| {
            l.digest == desc.digest
                && l.annotations.get(media::ANN_COSIGN_SIGNATURE) == desc.annotations.get(media::ANN_COSIGN_SIGNATURE)
        });
        if present {
            continue;
        }
        if fresh {
            repo.put_new_blob(&desc.digest, payload).await?;
        } else {
            repo.put_blob(&desc.digest, payload).await?;
        }
        layers.push(desc);
        added += 1;
    }
    let total = layers.len();
    if added == 0 {
        if let Some(d) = existing.digest {
            return Ok((d, 0, total));
        }
    }
    let (manifest, config) = sigmanifest::build(layers);
    // The config lists every layer digest: with a layer added it is new.
    repo.put_new_blob(&crate::digest::sha256_digest(&config), config).await?;
    let d = repo.put_manifest(manifest, media::OCI_MANIFEST, Some(&tag)).await?;
    Ok((d, added, total))
}
