//! Signing bundles the cosign way (DESIGN §4): a simple-signing payload over the
//! manifest digest, signed ECDSA-P256/SHA-256, APPENDED as a layer to the
//! `sha256-<hex>.sig` manifest in the same repository (never overwriting others).

use std::path::Path;

use anyhow::Context;
use drover_proto::digest::{is_valid_digest, signature_tag};
use drover_proto::keys::{password_from_env, PrivateKey};
use drover_proto::trust::{append_signature_layers, sigmanifest};
use drover_proto::Repo;
use serde::Serialize;

/// What a signing run did.
#[derive(Debug, Clone, Serialize)]
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

/// Loads a private signing key with the CLI password rule
/// (`DROVER_KEY_PASSWORD`, else `COSIGN_PASSWORD`, else empty).
pub fn load_signing_key(path: &Path) -> anyhow::Result<PrivateKey> {
    Ok(PrivateKey::from_file(path, &password_from_env())?)
}

/// The `docker-reference` cosign writes for a repository: `HOST/REPO` for registries,
/// the repository name for layouts (informational only; verification ignores it).
pub fn docker_reference(repo: &Repo) -> String {
    match repo {
        Repo::Registry { repo, .. } => repo.repository_url(),
        Repo::Layout { .. } => repo.repository_name(),
    }
}

/// Loads `key` (password rule above) and signs `digest` in `repo`; see [`sign_with`].
pub async fn sign_bundle(repo: &Repo, digest: &str, key: &Path) -> anyhow::Result<SignatureInfo> {
    let key = load_signing_key(key)?;
    sign_with(repo, digest, &key).await
}

/// Signs `digest` in `repo` with an already loaded key: checks the manifest exists,
/// then appends one signature layer to its `.sig` manifest (skipped when this key's
/// signature over the same payload is already there).
pub async fn sign_with(repo: &Repo, digest: &str, key: &PrivateKey) -> anyhow::Result<SignatureInfo> {
    anyhow::ensure!(is_valid_digest(digest), "{digest:?} is not a sha256 manifest digest");
    let exists = repo.resolve(digest).await.with_context(|| format!("looking up {}", repo.describe(digest)))?;
    anyhow::ensure!(exists.is_some(), "{} does not exist; nothing signed", repo.describe(digest));
    let docker_reference = docker_reference(repo);
    let payload = sigmanifest::payload(&docker_reference, digest);
    let tag = signature_tag(digest);
    // Idempotent: a layer with this exact payload whose signature verifies with our key.
    if let Ok((bytes, sig_digest)) = repo.manifest(&tag, sigmanifest::MAX_SIGNATURE_MANIFEST).await {
        if let Ok(m) = sigmanifest::parse(&bytes) {
            let payload_digest = sigmanifest::payload_digest(&payload);
            let mine = m.layers.iter().any(|l| {
                l.digest == payload_digest
                    && sigmanifest::layer_signature(l).map(|s| key.public_key().verify(&payload, &s)).unwrap_or(false)
            });
            if mine {
                return Ok(SignatureInfo {
                    digest: digest.into(),
                    signature_reference: repo.describe(&tag),
                    signature_manifest: sig_digest,
                    key_fingerprint: key.public_key().fingerprint().into(),
                    docker_reference,
                    added: false,
                    layers: m.layers.len(),
                });
            }
        }
    }
    let signature = key.sign(&payload)?;
    let layer = sigmanifest::signature_layer(&payload, &signature);
    let (signature_manifest, added, layers) = append_signature_layers(repo, digest, vec![(layer, payload)])
        .await
        .with_context(|| format!("pushing signature {}", repo.describe(&tag)))?;
    Ok(SignatureInfo {
        digest: digest.into(),
        signature_reference: repo.describe(&tag),
        signature_manifest,
        key_fingerprint: key.public_key().fingerprint().into(),
        docker_reference,
        added: added > 0,
        layers,
    })
}

/// Opens the repository a reference string points into, with its tag or digest.
/// `writable` refuses `oci-archive:` (writes would land in a temporary extraction).
pub fn open_reference(
    reference: &str,
    client: &drover_proto::RegistryClient,
    writable: bool,
) -> anyhow::Result<(Repo, Option<String>, drover_proto::Reference)> {
    let parsed = drover_proto::Reference::parse(reference)?;
    if writable && matches!(parsed, drover_proto::Reference::Archive { .. }) {
        anyhow::bail!("{reference}: an oci-archive cannot be changed in place; extract it with `drover import` or use an oci: layout");
    }
    let (repo, lookup) = Repo::open(&parsed, client, false).with_context(|| format!("opening {reference}"))?;
    Ok((repo, lookup, parsed))
}

/// Resolves `lookup` (tag or digest) in `repo` to a manifest digest; a clear error
/// naming the reference when it does not exist.
pub async fn resolve_digest(repo: &Repo, lookup: Option<&str>, reference: &str) -> anyhow::Result<String> {
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{reference} names no tag or digest (add :TAG or @sha256:...)"))?;
    repo.resolve(lookup)
        .await
        .with_context(|| format!("looking up {reference}"))?
        .ok_or_else(|| anyhow::anyhow!("{reference} does not exist"))
}

/// True when two repos are the same repository (same registry repository or layout + prefix).
pub fn same_repository(a: &Repo, b: &Repo) -> bool {
    a.describe("x") == b.describe("x")
}
