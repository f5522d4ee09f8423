//! Publishing new content into a channel (`drover push`, `drover publish`): the bundle is
//! assembled here, from the caller's objects, with a sequence chosen from verified history,
//! so the signer only ever signs bytes it built. A channel that already holds a verified
//! bundle with the same content is left alone; a channel holding something that does not
//! verify is treated as empty (it is not ours) and overwritten by our own bundle.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::archive::Packed;
use crate::bundle::{assemble_packed, pack_content, BundleMeta};
use crate::digest::sha256_digest;
use crate::keys::PrivateKey;
use crate::media;
use crate::object::ObjectRef;
use crate::repo::Repo;
use crate::trust::sign::SignatureInfo;
use crate::trust::TrustPolicy;

use super::history::{self, Holding, Judged};
use super::{check_sequence, history_tag, never_lower, next_sequence, write, ChannelError, Position};

/// How the new bundle's sequence is chosen.
#[derive(Debug, Clone, Copy)]
pub enum Sequence {
    /// Exactly this one (`--sequence`); refused when it would lower the channel.
    Exact(u64),
    /// Above every verified sequence of the channel and its history, and at least this
    /// (e.g. now in Unix seconds).
    Next {
        /// The lowest acceptable value.
        at_least: u64,
    },
}

/// One publish into one channel.
pub struct Request<'a> {
    /// The repository.
    pub repo: &'a Repo,
    /// The channel tag to move.
    pub channel: &'a str,
    /// The objects (identity → YAML).
    pub objects: &'a BTreeMap<ObjectRef, Vec<u8>>,
    /// Everything about the bundle but its sequence (its `sequence` field is ignored).
    pub meta: BundleMeta,
    /// How to choose the sequence.
    pub sequence: Sequence,
    /// The signing key (`None`: an unsigned push, for trying drover out).
    pub key: Option<&'a PrivateKey>,
    /// What counts as ours in the channel and its history (`None`: any readable bundle).
    pub policy: Option<&'a TrustPolicy>,
    /// The content layer already packed from `objects` (`drover publish` packs every
    /// cluster type once to compare); `None`: packed here.
    pub packed: Option<&'a Packed>,
    /// Leave the channel alone when it holds a trusted bundle with the same content layer
    /// digest, cluster type and environment (`drover publish`); false always publishes.
    pub skip_unchanged: bool,
}

/// What a publish did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    /// The bundle the channel names now.
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
    /// Objects in it.
    pub objects: usize,
    /// False when the channel already held the same verified content.
    pub changed: bool,
    /// The history tag written (absent when unchanged or without an environment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_tag: Option<String>,
    /// What the channel held before, when it verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Position>,
    /// Why the previous content was not trusted, when it was replaced without counting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untrusted_previous: Option<String>,
    /// The signature made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureInfo>,
    /// The channel statement signed (with a key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement: Option<write::Placed>,
}

/// Publishes `req.objects` into `req.channel`.
pub async fn publish(req: Request<'_>) -> Result<Published, ChannelError> {
    let repo = req.repo;
    let packed = match req.packed {
        Some(p) => std::borrow::Cow::Borrowed(p),
        None => std::borrow::Cow::Owned(pack_content(req.objects)),
    };
    let layer_digest = sha256_digest(&packed.gz);
    let judged = history::judge(repo, req.channel, req.policy).await?;
    if req.skip_unchanged {
        if let Some(same) = unchanged(&judged, &req, &layer_digest) {
            return Ok(same);
        }
    }
    let holding = history::complete(repo, judged).await?;
    let untrusted_previous = match &holding {
        Holding::Untrusted { digest, reason } => Some(format!("{} held {digest}, which is not ours: {reason}", repo.describe(req.channel))),
        Holding::Foreign { digest, reason } => {
            return Err(ChannelError::Refused(format!(
                "{} holds {digest}, which is not a drover bundle ({reason}); refusing to overwrite it",
                repo.describe(req.channel)
            )))
        }
        _ => None,
    };
    if let (true, Some(head)) = (req.skip_unchanged, holding.trusted()) {
        if head.layer_digest() == layer_digest
            && head.config.cluster_type == req.meta.cluster_type
            && head.config.environment == req.meta.environment
            && head.config.health_checks == req.meta.health_checks
            && head.config.min_agent_version == req.meta.stamped_min_agent_version()
        {
            return Ok(left_alone(&head.digest, head.config.sequence, head.config.objects.len()));
        }
    }
    let env = req.meta.environment.clone();
    let channel_name = repo.describe(req.channel);
    let current = holding.trusted().map(|h| h.position());
    // `fresh`: the repository has no tag at all (seen in the history listing), so the
    // writes need not ask what is there first.
    let (sequence, fresh) = match req.sequence {
        Sequence::Exact(s) => (check_sequence(s, "--sequence")?, false),
        Sequence::Next { at_least } if env.is_empty() => (next_sequence(current.as_ref().map(|p| p.sequence), at_least)?, false),
        Sequence::Next { at_least } => {
            let floor = history::floor(repo, &holding, &env, req.policy).await?;
            let fresh = floor.repository_empty && matches!(holding, Holding::Empty);
            (next_sequence(floor.position.map(|p| p.sequence), at_least)?, fresh)
        }
    };
    let mut meta = req.meta;
    meta.sequence = sequence;
    let bundle = assemble_packed(req.objects, &meta, &packed);
    let history = if env.is_empty() { None } else { Some(history_tag(&env, sequence)?) };
    if let (Some(h), false) = (&history, fresh) {
        write::check_history_free(repo, h, &bundle.digest).await?;
    }
    never_lower(&channel_name, current.as_ref(), &Position { digest: bundle.digest.clone(), sequence })?;
    let channels: Vec<&str> = if history.as_deref() == Some(req.channel) { vec![] } else { vec![req.channel] };
    let (signature, placed) = write::write_bundle_checked(repo, &bundle, req.key, history.as_deref(), &channels, fresh).await?;
    Ok(Published {
        digest: bundle.digest.clone(),
        sequence,
        objects: req.objects.len(),
        changed: true,
        history_tag: history,
        replaced: current,
        untrusted_previous,
        signature,
        statement: placed.into_iter().next(),
    })
}

/// The channel already holds this content, judged from its verified manifest alone (no
/// config read): the same content layer, and the signed manifest's annotations name the
/// same cluster type and environment and a sequence, and neither bundle carries more than
/// its content (health rules, a `minAgentVersion`: their manifest says so in an
/// annotation). `None` when that cannot be told without the config (unsigned, another
/// layer, annotations missing, rules): the caller reads it.
fn unchanged(judged: &Judged, req: &Request<'_>, layer_digest: &str) -> Option<Published> {
    let Judged::Manifest { digest, manifest, verification: Some(_), .. } = judged else { return None };
    let ann = |k: &str| manifest.annotations.get(k).map(String::as_str);
    if ann(media::ANN_MIN_AGENT_VERSION).is_some() || !req.meta.health_checks.is_empty() || req.meta.stamped_min_agent_version().is_some() {
        return None;
    }
    let same = manifest.layers.first().is_some_and(|l| l.digest == layer_digest)
        && !req.meta.cluster_type.is_empty()
        && !req.meta.environment.is_empty()
        && ann(media::ANN_CLUSTER_TYPE) == Some(req.meta.cluster_type.as_str())
        && ann(media::ANN_ENVIRONMENT) == Some(req.meta.environment.as_str());
    let sequence = ann(media::ANN_SEQUENCE)?.parse().ok()?;
    same.then(|| left_alone(digest, sequence, req.objects.len()))
}

/// What a publish reports when the channel already held the same content.
fn left_alone(digest: &str, sequence: u64, objects: usize) -> Published {
    Published {
        digest: digest.to_string(),
        sequence,
        objects,
        changed: false,
        history_tag: None,
        replaced: None,
        untrusted_previous: None,
        signature: None,
        statement: None,
    }
}
