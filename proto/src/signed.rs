//! Small signed documents: a JSON document stored as an OCI artifact (an image manifest
//! with its own `artifactType`, the document as the config blob, no layers) and signed
//! exactly like a bundle — cosign signature layers in `sha256-<hex>.sig`, the trust policy
//! and its threshold over the manifest digest (docs/design.md §4). Channel statements
//! (`crate::channel::statement`) and the fleet roster (`crate::report::roster`) are such
//! documents; every OCI tool (`skopeo inspect --raw`, `oras`) sees them as artifacts.
//!
//! Written by [`write`] in the order that never lets a tag name an unsigned document: the
//! document blob, the signature, then the tag (which stores the manifest). The channel
//! statements (`crate::channel::write::place`) and the roster use this one writer.
//! Read in the order that trusts nothing unverified: the manifest (size-capped), its
//! signatures against the policy, only then the document. A small document is also
//! embedded in the config descriptor (`data`), so reading it costs no extra request.

use std::collections::BTreeMap;

use base64::Engine as _;

use crate::digest::{sha256_digest, verify_digest};
use crate::error::StoreError;
use crate::keys::PrivateKey;
use crate::manifest::{Descriptor, Manifest};
use crate::media;
use crate::repo::Repo;
use crate::trust::sign::{sign_stored, SignatureInfo};
use crate::trust::{self, TrustError, TrustPolicy, Verification};

/// Largest document manifest read.
pub const MAX_MANIFEST: u64 = 64 << 10;
/// Documents up to this size are embedded in their manifest.
pub const MAX_EMBEDDED: usize = 8 << 10;

/// One kind of signed document.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// What it is called in messages ("channel statement", "fleet roster").
    pub name: &'static str,
    /// The manifest's `artifactType`.
    pub artifact_type: &'static str,
    /// The config (document) media type.
    pub media_type: &'static str,
    /// Largest document read.
    pub max: u64,
}

/// What a tag holds, as far as a signed document is concerned.
#[derive(Debug)]
pub enum Found {
    /// The tag does not exist.
    Missing,
    /// A document of this kind whose signatures do not satisfy the policy.
    Untrusted {
        /// Its manifest digest.
        digest: String,
        /// Why it does not count.
        reason: String,
        /// Distinct trusted keys whose signature verified (fewer than the threshold).
        signers: usize,
    },
    /// Something else (another artifact, a malformed manifest).
    Foreign {
        /// Its manifest digest.
        digest: String,
        /// What it is.
        reason: String,
    },
    /// A document whose signatures satisfied the policy.
    Trusted(Box<Document>),
}

/// A verified document.
#[derive(Debug, Clone)]
pub struct Document {
    /// Its manifest digest.
    pub digest: String,
    /// The document bytes.
    pub bytes: Vec<u8>,
    /// Who signed it.
    pub verification: Verification,
}

/// The manifest for `doc` of `kind` (the document embedded when small; `created` as
/// `org.opencontainers.image.created`).
pub fn manifest_for(kind: &Kind, doc: &[u8], created: &str) -> Vec<u8> {
    let mut config = Descriptor::of(kind.media_type, doc);
    if doc.len() <= MAX_EMBEDDED {
        config.data = Some(base64::engine::general_purpose::STANDARD.encode(doc));
    }
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(media::OCI_MANIFEST.to_string()),
        artifact_type: Some(kind.artifact_type.to_string()),
        config,
        layers: Vec::new(),
        annotations: BTreeMap::from([(media::ANN_CREATED.to_string(), created.to_string())]),
    };
    manifest.to_bytes()
}

/// A signed document as written by [`write`].
#[derive(Debug, Clone)]
pub struct Written {
    /// The document manifest's digest.
    pub digest: String,
    /// The signature made over it.
    pub signature: SignatureInfo,
}

/// Writes `doc` as a document of `kind` under `tag` of `repo`, signed with `key`: the
/// document blob, the signature over the manifest digest, then the tag (storing the
/// manifest). An interrupted write leaves at most a blob and a signature for a manifest no
/// tag names. `created` is the manifest's creation time; `fresh`: the caller saw no tag in
/// the repository, so nothing is asked before writing (blob uploaded without a `HEAD`,
/// signature manifest written new).
pub async fn write(repo: &Repo, kind: &Kind, doc: Vec<u8>, created: &str, key: &PrivateKey, tag: &str, fresh: bool) -> Result<Written, StoreError> {
    let manifest = manifest_for(kind, &doc, created);
    let digest = sha256_digest(&manifest);
    let blob = sha256_digest(&doc);
    if fresh {
        repo.put_new_blob(&blob, doc).await?;
    } else {
        repo.put_blob(&blob, doc).await?;
    }
    let signature = sign_stored(repo, &digest, key, fresh).await?;
    repo.put_manifest(manifest, media::OCI_MANIFEST, Some(tag)).await?;
    Ok(Written { digest, signature })
}

/// The manifest of `tag` when it is a document of `kind` (`Ok(None)`: missing).
async fn manifest(repo: &Repo, kind: &Kind, tag: &str) -> Result<Option<(String, Result<Manifest, String>)>, StoreError> {
    let (bytes, digest) = match repo.manifest(tag, MAX_MANIFEST).await {
        Ok(x) => x,
        Err(StoreError::NotFound(_)) => return Ok(None),
        Err(e @ (StoreError::TooLarge { .. } | StoreError::OverLimit { .. })) => return Ok(Some((String::new(), Err(e.to_string())))),
        Err(e) => return Err(e),
    };
    let parsed = Manifest::from_slice(&bytes).and_then(|m| {
        if m.artifact_type.as_deref() != Some(kind.artifact_type) || m.config.media_type != kind.media_type {
            return Err(format!("it is not a {} (artifactType {:?})", kind.name, m.artifact_type.as_deref().unwrap_or("none")));
        }
        if m.config.size > kind.max {
            return Err(format!("the {} is {} bytes, over the limit of {}", kind.name, m.config.size, kind.max));
        }
        Ok(m)
    });
    Ok(Some((digest, parsed)))
}

/// Reads the document of `kind` under `tag`: the manifest, its signatures against
/// `policy`, then the document (embedded, digest-checked, or the blob).
pub async fn read(repo: &Repo, kind: &Kind, tag: &str, policy: &TrustPolicy) -> Result<Found, StoreError> {
    let Some((digest, parsed)) = manifest(repo, kind, tag).await? else { return Ok(Found::Missing) };
    let m = match parsed {
        Ok(m) => m,
        Err(reason) => return Ok(Found::Foreign { digest, reason }),
    };
    let verification = match trust::verify(repo, &digest, policy).await {
        Ok(v) => v,
        Err(TrustError::Store(e)) => return Err(e),
        Err(e) => {
            let signers = match &e {
                TrustError::NotSatisfied(v) => v.matched.len(),
                _ => 0,
            };
            return Ok(Found::Untrusted { digest, reason: e.to_string(), signers });
        }
    };
    let bytes = document(repo, kind, &m).await?;
    Ok(Found::Trusted(Box::new(Document { digest, bytes, verification })))
}

/// The document of `kind` under `tag` without checking who signed it: its manifest digest
/// and bytes (`Ok(None)`: missing or not this kind). For writers that add a signature to
/// a document whose content they check themselves, and for `drover verify` to say what an
/// unverified tag claims.
pub async fn read_unverified(repo: &Repo, kind: &Kind, tag: &str) -> Result<Option<(String, Vec<u8>)>, StoreError> {
    let Some((digest, Ok(m))) = manifest(repo, kind, tag).await? else { return Ok(None) };
    Ok(Some((digest, document(repo, kind, &m).await?)))
}

/// The document `m` names: embedded (when its digest checks), else its blob.
async fn document(repo: &Repo, kind: &Kind, m: &Manifest) -> Result<Vec<u8>, StoreError> {
    let embedded = m.config.data.as_deref().and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
    match embedded.filter(|d| verify_digest(d, &m.config.digest).is_ok()) {
        Some(d) => Ok(d),
        None => repo.blob(&m.config.digest, kind.max).await,
    }
}
