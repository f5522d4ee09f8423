//! Rolling a channel back (`drover rollback`): the content of an older bundle is
//! re-published as a NEW bundle whose sequence is above every verified one, so agents
//! accept it (never lower) and an old signed bundle still cannot be replayed. The older
//! bundle must first verify against the trust policy: a history tag an attacker repointed
//! is refused, never signed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::archive::UnpackLimits;
use crate::bundle::{assemble, open_content, BundleMeta};
use crate::digest::is_valid_digest;
use crate::keys::PrivateKey;
use crate::repo::{FetchLimits, Repo};
use crate::trust::sign::SignatureInfo;
use crate::trust::TrustPolicy;

use super::history::{self, Holding};
use super::{history_tag, never_lower, next_sequence, write, ChannelError, Position};

/// What a rollback did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    /// The new bundle's digest (the channel names it now).
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
    /// Its history tag.
    pub history_tag: String,
    /// The digest whose content was restored.
    pub restored_from: String,
    /// The restored bundle's sequence.
    pub restored_sequence: u64,
    /// What the channel held before, when it verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Position>,
    /// Objects in the new bundle.
    pub objects: usize,
    /// The signature made.
    pub signature: SignatureInfo,
    /// The channel statement signed.
    pub statement: Option<write::Placed>,
}

/// Re-publishes the content of `to` (a digest or tag in `repo`) into `channel`, signed with
/// `key`, after `to` verified against `policy`.
pub async fn rollback(
    repo: &Repo,
    channel: &str,
    to: &str,
    key: &PrivateKey,
    policy: &TrustPolicy,
    allow_mass_prune: bool,
) -> Result<RolledBack, ChannelError> {
    if is_valid_digest(channel) {
        return Err(ChannelError::Refused(format!("{} must name the channel tag to roll back, not a digest", repo.describe(channel))));
    }
    let to_name = repo.describe(to);
    let old = match history::read(repo, to, Some(policy)).await? {
        Holding::Trusted(h) => *h,
        Holding::Empty => return Err(ChannelError::Refused(format!("{to_name} does not exist; name a history tag (e.g. prod-41) or a digest"))),
        Holding::Untrusted { digest, reason } => {
            return Err(ChannelError::Refused(format!(
                "{to_name} ({digest}) is not signed by a trusted key, so its content is not restored or signed: {reason}. \
                 Someone may have repointed the tag; restore a digest you know (drover verify, history in your CI logs)"
            )))
        }
        Holding::Foreign { digest, reason } => return Err(ChannelError::Refused(format!("{to_name} ({digest}) is not a drover bundle: {reason}"))),
    };
    let holding = history::read(repo, channel, Some(policy)).await?;
    let current = holding.trusted().map(|h| h.position());
    if let Some(h) = holding.trusted() {
        if h.digest == old.digest {
            return Err(ChannelError::Refused(format!("{} already names {} ({to_name}); nothing to roll back", repo.describe(channel), old.digest)));
        }
        if h.config.cluster_type != old.config.cluster_type || h.config.environment != old.config.environment {
            return Err(ChannelError::Refused(format!(
                "{to_name} was rendered for cluster type {:?} / environment {:?}, but {} holds {:?} / {:?}; refusing to relabel content",
                old.config.cluster_type,
                old.config.environment,
                repo.describe(channel),
                h.config.cluster_type,
                h.config.environment
            )));
        }
    }
    let env = if old.config.environment.is_empty() { channel.to_string() } else { old.config.environment.clone() };
    let floor = history::floor(repo, &holding, &env, Some(policy)).await?;
    let sequence = next_sequence(floor.position.iter().map(|p| p.sequence).chain([old.config.sequence]), 0)?;

    let limits = FetchLimits::default();
    let layer_desc = old.manifest.bundle_layer().map_err(ChannelError::Refused)?.clone();
    let layer = repo.blob(&layer_desc.digest, limits.layer).await?;
    let objects = open_content(&old.config, &layer, &UnpackLimits::default())
        .map_err(|e| ChannelError::Refused(format!("reading the content of {to_name}: {e}")))?;
    let objects: BTreeMap<_, _> = objects.into_iter().map(|o| (o.id, o.yaml)).collect();
    let meta = BundleMeta {
        cluster_type: old.config.cluster_type.clone(),
        environment: old.config.environment.clone(),
        sequence,
        source_repository: old.config.source.repository.clone(),
        revision: old.config.source.revision.clone(),
        created: None,
        allow_mass_prune: allow_mass_prune || old.config.allow_mass_prune,
        workloads: old.config.workloads.clone(),
        // The old bundle's health rules and the agent it needed travel with its content.
        health_checks: old.config.health_checks.clone(),
        min_agent_version: old.config.min_agent_version.as_deref().and_then(|v| crate::compat::parse(v, "minAgentVersion").ok()),
    };
    let bundle = assemble(&objects, &meta);
    never_lower(&repo.describe(channel), current.as_ref(), &Position { digest: bundle.digest.clone(), sequence })?;
    let history = history_tag(&env, sequence)?;
    let (signature, placed) = write::write_bundle(repo, &bundle, Some(key), Some(&history), &[channel]).await?;
    let signature = signature.expect("a key was given");
    Ok(RolledBack {
        digest: bundle.digest.clone(),
        sequence,
        history_tag: repo.describe(&history),
        restored_from: old.digest.clone(),
        restored_sequence: old.config.sequence,
        replaced: current,
        objects: objects.len(),
        signature,
        statement: placed.into_iter().next(),
    })
}
