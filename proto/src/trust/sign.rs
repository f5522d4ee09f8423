//! Where signatures are made (docs/design.md §4): a simple-signing payload over the
//! manifest digest, signed ECDSA-P256/SHA-256, APPENDED as a layer to the
//! `sha256-<hex>.sig` manifest in the same repository (never overwriting others).
//!
//! Only the channel module calls [`sign`], and only for bytes it assembled itself or a
//! digest that first verified against a trust policy (see `crate::channel`).

use serde::Serialize;

use crate::digest::{is_valid_digest, signature_tag};
use crate::error::StoreError;
use crate::keys::PrivateKey;
use crate::repo::Repo;
use crate::trust::{append_to, docker_reference, existing_signatures, sigmanifest, ExistingSignatures};

/// What a signing run did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignatureInfo {
    /// The signed manifest digest.
    pub digest: String,
    /// Where the signature manifest lives (`...:sha256-<hex>.sig`).
    pub signature_reference: String,
    /// Digest of the signature manifest after the push.
    pub signature_manifest: String,
    /// Fingerprint of the signing key (hex sha256 of its DER SPKI).
    pub key_fingerprint: String,
    /// The payload's `critical.identity.docker-reference`.
    pub docker_reference: String,
    /// False when this key's identical signature layer was already there.
    pub added: bool,
    /// Signature layers in the manifest now.
    pub layers: usize,
}


/// Signs `digest` in `repo`: checks the manifest exists, then appends one signature layer
/// to its `.sig` manifest (skipped when this key's signature over the same payload is
/// already there). Callers must have built or verified `digest` (see `crate::channel`).
pub async fn sign(repo: &Repo, digest: &str, key: &PrivateKey) -> Result<SignatureInfo, StoreError> {
    if !is_valid_digest(digest) {
        return Err(StoreError::Malformed(format!("{digest:?} is not a sha256 manifest digest")));
    }
    if repo.resolve(digest).await?.is_none() {
        return Err(StoreError::NotFound(format!("{} (nothing signed)", repo.describe(digest))));
    }
    sign_stored(repo, digest, key, false).await
}

/// [`sign`] for a manifest this process has just stored (the channel write order): no
/// existence check; the `.sig` manifest is read once (one GET) and appended to — or, when
/// `fresh` (the repository held no tag when the caller read it, so no `.sig` manifest
/// either), written new without the GET.
pub async fn sign_stored(repo: &Repo, digest: &str, key: &PrivateKey, fresh: bool) -> Result<SignatureInfo, StoreError> {
    if !is_valid_digest(digest) {
        return Err(StoreError::Malformed(format!("{digest:?} is not a sha256 manifest digest")));
    }
    let docker_reference = docker_reference(repo);
    let payload = sigmanifest::payload(&docker_reference, digest);
    let tag = signature_tag(digest);
    let info = |signature_manifest: String, added: bool, layers: usize| SignatureInfo {
        digest: digest.into(),
        signature_reference: repo.describe(&tag),
        signature_manifest,
        key_fingerprint: key.public_key().fingerprint().into(),
        docker_reference: docker_reference.clone(),
        added,
        layers,
    };
    let existing = if fresh { ExistingSignatures::default() } else { existing_signatures(repo, digest).await? };
    // Idempotent: a layer with this exact payload whose signature verifies with our key.
    let payload_digest = sigmanifest::payload_digest(&payload);
    let mine = existing.layers.iter().any(|l| {
        l.digest == payload_digest && sigmanifest::layer_signature(l).map(|s| key.public_key().verify(&payload, &s)).unwrap_or(false)
    });
    if let (true, Some(d)) = (mine, &existing.digest) {
        return Ok(info(d.clone(), false, existing.layers.len()));
    }
    let signature = key.sign(&payload).map_err(|e| StoreError::Config(format!("signing with {}: {e}", key.public_key().source())))?;
    let layer = sigmanifest::signature_layer(&payload, &signature);
    let (signature_manifest, added, layers) = append_to(repo, digest, existing, vec![(layer, payload)]).await?;
    Ok(info(signature_manifest, added > 0, layers))
}
