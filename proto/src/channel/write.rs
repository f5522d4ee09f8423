//! The write order every command uses: blobs, signature, history tag, channel tag(s). The
//! manifest itself is stored by the first tag written (a `PUT` by digest before it would
//! store the same bytes twice; it is written by digest only when no tag follows). A tag
//! is only ever written after the signature, so no tag names an unsigned bundle when a
//! key is given, and an interrupted write leaves at most blobs and a signature for a
//! manifest no tag names.

use crate::bundle::Bundle;
use crate::digest::sha256_digest;
use crate::keys::PrivateKey;
use crate::media;
use crate::repo::Repo;
use crate::trust::sign::{sign_stored, SignatureInfo};

use super::ChannelError;

/// Refuses when `tag` already names a bundle other than `digest` (history tags are immutable).
pub async fn check_history_free(repo: &Repo, tag: &str, digest: &str) -> Result<(), ChannelError> {
    match repo.resolve(tag).await? {
        Some(existing) if existing != digest => {
            Err(ChannelError::HistoryTaken { tag: repo.describe(tag), existing, wanted: digest.to_string() })
        }
        _ => Ok(()),
    }
}

/// Points `tags` (in order) at the manifest `bytes` (an OCI image manifest), storing it
/// with the first.
pub async fn tag(repo: &Repo, bytes: &[u8], tags: &[&str]) -> Result<(), ChannelError> {
    tag_as(repo, bytes, media::OCI_MANIFEST, tags).await
}

/// [`tag`] for a manifest of `media_type` (an imported Docker manifest keeps its type).
pub async fn tag_as(repo: &Repo, bytes: &[u8], media_type: &str, tags: &[&str]) -> Result<(), ChannelError> {
    for t in tags {
        repo.put_manifest(bytes.to_vec(), media_type, Some(t)).await?;
    }
    Ok(())
}

/// Writes an artifact this process assembled: `blobs`, the signature (with `key`), the
/// history tag (immutable: checked before anything is
/// written), then the channel tags. Returns the signature made, if any.
pub async fn write_signed(
    repo: &Repo,
    manifest: &[u8],
    blobs: Vec<Vec<u8>>,
    key: Option<&PrivateKey>,
    history: Option<&str>,
    channels: &[&str],
) -> Result<Option<SignatureInfo>, ChannelError> {
    if let Some(h) = history {
        check_history_free(repo, h, &sha256_digest(manifest)).await?;
    }
    write_checked(repo, manifest, blobs, key, history, channels, false).await
}

/// [`write_signed`] once the caller has run [`check_history_free`] for `history` (publish
/// checks it before the never-lower rule, so its refusal names the history tag). `fresh`:
/// the caller saw no tag at all in the repository, so nothing is asked before writing —
/// blobs are uploaded without a `HEAD` (uploading a blob again is harmless) and the
/// signature manifest is written new without reading it first.
async fn write_checked(
    repo: &Repo,
    manifest: &[u8],
    blobs: Vec<Vec<u8>>,
    key: Option<&PrivateKey>,
    history: Option<&str>,
    channels: &[&str],
    fresh: bool,
) -> Result<Option<SignatureInfo>, ChannelError> {
    let digest = sha256_digest(manifest);
    for blob in blobs {
        let d = sha256_digest(&blob);
        if fresh {
            repo.put_new_blob(&d, blob).await?;
        } else {
            repo.put_blob(&d, blob).await?;
        }
    }
    let tags: Vec<&str> = history.into_iter().chain(channels.iter().copied()).collect();
    if tags.is_empty() {
        repo.put_manifest(manifest.to_vec(), media::OCI_MANIFEST, None).await?;
    }
    let signature = match key {
        Some(k) => Some(sign_stored(repo, &digest, k, fresh).await?),
        None => None,
    };
    tag(repo, manifest, &tags).await?;
    Ok(signature)
}

/// [`write_signed`] for a bundle: its config and layer, then its manifest.
pub async fn write_bundle(
    repo: &Repo,
    bundle: &Bundle,
    key: Option<&PrivateKey>,
    history: Option<&str>,
    channels: &[&str],
) -> Result<Option<SignatureInfo>, ChannelError> {
    write_signed(repo, &bundle.manifest, vec![bundle.config.clone(), bundle.layer.clone()], key, history, channels).await
}

/// [`write_bundle`] once the caller has run [`check_history_free`] for `history` (or seen
/// the repository without any tag: `fresh`, see [`write_checked`]).
pub(super) async fn write_bundle_checked(
    repo: &Repo,
    bundle: &Bundle,
    key: Option<&PrivateKey>,
    history: Option<&str>,
    channels: &[&str],
    fresh: bool,
) -> Result<Option<SignatureInfo>, ChannelError> {
    write_checked(repo, &bundle.manifest, vec![bundle.config.clone(), bundle.layer.clone()], key, history, channels, fresh).await
}
