//! Adding a signature to an existing bundle (`drover sign`, e.g. the second approver of a
//! two-party release). A tag is what the registry serves, so signing by tag requires the
//! bundle to verify first against a trust policy; a digest the caller names pins the
//! exact bytes they built or reviewed, and is signed as named. Signing a channel tag also
//! countersigns the channel's statement when it places exactly that bundle there: with
//! `--threshold 2` agents need two keys on the placement too.

use crate::digest::is_valid_digest;
use crate::keys::PrivateKey;
use crate::repo::Repo;
use crate::signed;
use crate::trust::sign::{sign, SignatureInfo};
use crate::trust::TrustPolicy;

use super::history::{self, Head, Holding};
use super::statement::{self, Statement};
use super::ChannelError;

/// What `drover sign` signed: the bundle, and the channel statement that places it.
#[derive(Debug, Clone)]
pub struct Countersigned {
    /// The bundle's signature.
    pub bundle: SignatureInfo,
    /// The statement's, when the tag is a channel whose statement places this bundle.
    pub statement: Option<SignatureInfo>,
}

/// Signs the bundle `lookup` names in `repo` with `key`: a digest as named (verified
/// first when `policy` is given), a tag only after it verified against `policy` — and
/// then also the tag's channel statement when it places this very bundle.
pub async fn countersign(repo: &Repo, lookup: &str, key: &PrivateKey, policy: Option<&TrustPolicy>) -> Result<Countersigned, ChannelError> {
    let name = repo.describe(lookup);
    let digest = match (policy, is_valid_digest(lookup)) {
        (None, true) => repo
            .resolve(lookup)
            .await?
            .ok_or_else(|| ChannelError::Refused(format!("{name} does not exist; nothing signed")))?,
        (None, false) => {
            if repo.resolve(lookup).await?.is_none() {
                return Err(ChannelError::Refused(format!("{name} does not exist; nothing signed")));
            }
            return Err(ChannelError::Refused(format!(
                "{name} is a tag, and a tag names whatever the registry serves; sign the digest you built \
                 (REF@sha256:..., printed by drover build/push), or pass --trust-key PUB to verify the existing signatures first"
            )))
        }
        (Some(policy), _) => match history::read(repo, lookup, Some(policy)).await? {
            Holding::Trusted(h) if !is_valid_digest(lookup) => {
                let bundle = sign(repo, &h.digest, key).await?;
                let statement = countersign_placement(repo, lookup, &h, key).await?;
                return Ok(Countersigned { bundle, statement });
            }
            Holding::Trusted(h) => h.digest,
            Holding::Empty => return Err(ChannelError::Refused(format!("{name} does not exist; nothing signed"))),
            Holding::Untrusted { digest, reason } => {
                return Err(ChannelError::Refused(format!("{name} ({digest}) did not verify, so it is not signed: {reason}")))
            }
            Holding::Foreign { digest, reason } => {
                return Err(ChannelError::Refused(format!("{name} ({digest}) is not a drover bundle: {reason}")))
            }
        },
    };
    Ok(Countersigned { bundle: sign(repo, &digest, key).await?, statement: None })
}

/// Adds `key`'s signature to `channel`'s statement when it places `head` there (the
/// bundle verified; the statement's claim is checked here before it is signed).
async fn countersign_placement(repo: &Repo, channel: &str, head: &Head, key: &PrivateKey) -> Result<Option<SignatureInfo>, ChannelError> {
    let Ok(tag) = statement::tag(channel) else { return Ok(None) };
    let Some((digest, bytes)) = signed::read_unverified(repo, &statement::KIND, &tag).await? else { return Ok(None) };
    let places = Statement::from_slice(&bytes).is_ok_and(|s| s.places(&repo.repository_name(), channel, &head.digest, head.config.sequence));
    if !places {
        return Ok(None);
    }
    Ok(Some(sign(repo, &digest, key).await?))
}
