//! The write order every command uses: blobs, signature, history tag, then per channel
//! its signed statement ([`place`], docs/design.md §4) and the channel tag. The
//! manifest itself is stored by the first tag written (a `PUT` by digest before it would
//! store the same bytes twice; it is written by digest only when no tag follows). A tag
//! is only ever written after the signature, so no tag names an unsigned bundle when a
//! key is given, and an interrupted write leaves at most blobs and a signature for a
//! manifest no tag names (or a statement for a bundle its channel does not name yet,
//! which no agent follows: the tag decides where an agent looks).

use serde::Serialize;

use crate::bundle::Bundle;
use crate::digest::sha256_digest;
use crate::keys::PrivateKey;
use crate::media;
use crate::repo::Repo;
use crate::signed;
use crate::trust::sign::{sign_stored, SignatureInfo};

use super::statement::{self, Statement};
use super::ChannelError;

/// A channel statement written (or countersigned) by [`place`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Placed {
    /// The statement's reference (`REPO:<channel>.statement`).
    pub statement: String,
    /// The statement manifest's digest.
    pub digest: String,
    /// False when an existing statement with the same claim got this key's signature.
    pub new: bool,
    /// The signature made over it.
    pub signature: SignatureInfo,
}

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
    Ok(write_checked(repo, manifest, blobs, key, history, channels, false, None).await?.0)
}

/// [`write_signed`] once the caller has run [`check_history_free`] for `history` (publish
/// checks it before the never-lower rule, so its refusal names the history tag). `fresh`:
/// the caller saw no tag at all in the repository, so nothing is asked before writing —
/// blobs are uploaded without a `HEAD` (uploading a blob again is harmless) and the
/// signature manifest is written new without reading it first. `sequence`: the bundle's,
/// when `channels` are placed with signed statements (with a key).
#[allow(clippy::too_many_arguments)]
async fn write_checked(
    repo: &Repo,
    manifest: &[u8],
    blobs: Vec<Vec<u8>>,
    key: Option<&PrivateKey>,
    history: Option<&str>,
    channels: &[&str],
    fresh: bool,
    sequence: Option<u64>,
) -> Result<(Option<SignatureInfo>, Vec<Placed>), ChannelError> {
    let digest = sha256_digest(manifest);
    for blob in blobs {
        let d = sha256_digest(&blob);
        if fresh {
            repo.put_new_blob(&d, blob).await?;
        } else {
            repo.put_blob(&d, blob).await?;
        }
    }
    if history.is_none() && channels.is_empty() {
        repo.put_manifest(manifest.to_vec(), media::OCI_MANIFEST, None).await?;
    }
    let signature = match key {
        Some(k) => Some(sign_stored(repo, &digest, k, fresh).await?),
        None => None,
    };
    if let Some(h) = history {
        tag(repo, manifest, &[h]).await?;
    }
    let mut placed = Vec::new();
    for channel in channels {
        if let (Some(k), Some(seq)) = (key, sequence) {
            placed.push(place_checked(repo, channel, &digest, seq, k, fresh).await?);
        }
        tag(repo, manifest, &[channel]).await?;
    }
    Ok((signature, placed))
}

/// Signs the statement that `digest` (with `sequence`) is placed on `channel` of `repo`
/// ([`statement`]), before the channel tag moves. A statement already there with the same
/// claim gets `key`'s signature added (a second signer of a two-party release; idempotent
/// for the same key); otherwise a new statement replaces it: blob, signature, tag.
pub async fn place(repo: &Repo, channel: &str, digest: &str, sequence: u64, key: &PrivateKey) -> Result<Placed, ChannelError> {
    place_checked(repo, channel, digest, sequence, key, false).await
}

async fn place_checked(repo: &Repo, channel: &str, digest: &str, sequence: u64, key: &PrivateKey, fresh: bool) -> Result<Placed, ChannelError> {
    let tag = statement::tag(channel)?;
    let repository = repo.repository_name();
    let reference = repo.describe(&tag);
    if !fresh {
        if let Some((existing, bytes)) = signed::read_unverified(repo, &statement::KIND, &tag).await? {
            let same = Statement::from_slice(&bytes).is_ok_and(|s| s.repository == repository && s.places(&repository, channel, digest, sequence));
            if same {
                let signature = sign_stored(repo, &existing, key, false).await?;
                return Ok(Placed { statement: reference, digest: existing, new: false, signature });
            }
        }
    }
    let s = Statement {
        schema_version: statement::SCHEMA_VERSION,
        repository,
        channel: channel.to_string(),
        digest: digest.to_string(),
        sequence,
        time: crate::time::now_rfc3339(),
    };
    let written = signed::write(repo, &statement::KIND, s.to_bytes(), &s.time, key, &tag, fresh).await?;
    Ok(Placed { statement: reference, digest: written.digest, new: true, signature: written.signature })
}

/// [`write_signed`] for a bundle: its config and layer, then its manifest; each channel
/// gets its signed statement when a key is given.
pub async fn write_bundle(
    repo: &Repo,
    bundle: &Bundle,
    key: Option<&PrivateKey>,
    history: Option<&str>,
    channels: &[&str],
) -> Result<(Option<SignatureInfo>, Vec<Placed>), ChannelError> {
    if let Some(h) = history {
        check_history_free(repo, h, &bundle.digest).await?;
    }
    write_bundle_checked(repo, bundle, key, history, channels, false).await
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
) -> Result<(Option<SignatureInfo>, Vec<Placed>), ChannelError> {
    let blobs = vec![bundle.config.clone(), bundle.layer.clone()];
    write_checked(repo, &bundle.manifest, blobs, key, history, channels, fresh, Some(bundle.config_doc.sequence)).await
}
