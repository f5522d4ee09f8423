//! Adding a signature to an existing bundle (`drover sign`, e.g. the second approver of a
//! two-party release). A tag is what the registry serves, so signing by tag requires the
//! bundle to verify first against a trust policy; a digest the caller names pins the
//! exact bytes they built or reviewed, and is signed as named.

use crate::digest::is_valid_digest;
use crate::keys::PrivateKey;
use crate::repo::Repo;
use crate::trust::sign::{sign, SignatureInfo};
use crate::trust::TrustPolicy;

use super::history::{self, Holding};
use super::ChannelError;

/// Signs the bundle `lookup` names in `repo` with `key`: a digest as named (verified
/// first when `policy` is given), a tag only after it verified against `policy`.
pub async fn countersign(repo: &Repo, lookup: &str, key: &PrivateKey, policy: Option<&TrustPolicy>) -> Result<SignatureInfo, ChannelError> {
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
    Ok(sign(repo, &digest, key).await?)
}
