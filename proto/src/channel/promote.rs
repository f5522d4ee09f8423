//! Promoting (`drover promote`): a channel tag moves to a bundle that already verified,
//! identical bytes from ring to ring. Across repositories the bundle and the signature
//! layers that verified are copied first and verified again in the destination before the
//! tag moves. Never lower: a destination holding a verified bundle with a higher (or equal,
//! different) sequence is refused, as is one holding another cluster type or environment.
//! The placement is signed: the destination channel's statement ([`super::statement`]) is
//! written with the promoter's key before the tag moves (also when the tag already names
//! the bundle: that is how a channel without a statement is migrated). A source channel
//! whose signed statement names another bundle was moved by someone else: refused; so is
//! one without a statement that counts (deleted, or never written: a channel moved before
//! statements existed), unless the caller migrates it deliberately ([`Unplaced::Migrate`]).

use serde::Serialize;

use crate::digest::{is_valid_digest, signature_tag};
use crate::keys::PrivateKey;
use crate::media;
use crate::repo::{FetchLimits, Repo};
use crate::trust::{self, sigmanifest, TrustPolicy, Verification};

use super::history::{self, Head, Holding};
use super::statement::{self, Placement, MIGRATE_FLAG};
use super::{never_lower, write, ChannelError, Move, Position};

/// What a promote did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Promoted {
    /// The promoted digest.
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
    /// The agent version it needs (its config's `minAgentVersion`), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_agent_version: Option<String>,
    /// Its cluster type (from its signed config).
    #[serde(skip)]
    pub cluster_type: String,
    /// Its environment (from its signed config).
    #[serde(skip)]
    pub environment: String,
    /// What the destination held before, when it verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<Position>,
    /// Why what the destination held before did not count (it did not verify).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untrusted_previous: Option<String>,
    /// True when the bundle was copied into another repository.
    pub copied: bool,
    /// Signature layers added in the destination.
    pub signatures_copied: usize,
    /// Fingerprints of the keys that signed.
    pub matched_keys: Vec<String>,
    /// False when the destination already named this digest.
    pub changed: bool,
    /// The destination channel's statement, signed with the promoter's key.
    pub statement: write::Placed,
    /// Why the source channel's placement was not checked (it has no statement that
    /// counts, and the promote was asked to migrate it: [`Unplaced::Migrate`]), when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_unplaced: Option<String>,
}

/// What to do with a source channel that has no statement that counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unplaced {
    /// Refuse (the default): a deleted statement must not turn a bundle that only ever
    /// sat on that channel into one that may move on.
    Refuse,
    /// Promote anyway, saying so: migrating a channel last moved before channel
    /// statements existed (`drover promote --migrate-unplaced-source`).
    Migrate,
}

/// Verifies `lookup` in `src` against `policy` and returns it (refused when it does not verify).
pub async fn verified_source(src: &Repo, lookup: &str, policy: &TrustPolicy) -> Result<Head, ChannelError> {
    match history::read(src, lookup, Some(policy)).await? {
        Holding::Trusted(h) => Ok(*h),
        Holding::Empty => Err(ChannelError::Refused(format!("{} does not exist", src.describe(lookup)))),
        Holding::Untrusted { digest, reason } => {
            Err(ChannelError::Refused(format!("refusing to promote {} ({digest}): {reason}", src.describe(lookup))))
        }
        Holding::Foreign { digest, reason } => {
            Err(ChannelError::Refused(format!("{} ({digest}) is not a usable drover bundle: {reason}", src.describe(lookup))))
        }
    }
}

/// Checks that the source channel `lookup` of `src` places `head` there with a statement
/// that counts. `Ok(None)`: it does; refused when a signed statement places another bundle
/// there (the tag was moved by someone else), and when there is no statement that counts
/// (missing, deleted, unsigned) unless `unplaced` is [`Unplaced::Migrate`]: then
/// `Ok(Some(why))` and the promote goes ahead, said so. A digest or a history tag of the
/// bundle needs no statement.
pub async fn source_placement(src: &Repo, lookup: &str, head: &Head, policy: &TrustPolicy, unplaced: Unplaced) -> Result<Option<String>, ChannelError> {
    if is_valid_digest(lookup) || statement::self_certifying(lookup, &head.config.environment, head.config.sequence) {
        return Ok(None);
    }
    let placement = statement::read(src, lookup, policy).await?;
    match (&placement, statement::check(&placement, src, lookup, &head.digest, head.config.sequence)) {
        (_, Ok(_)) => Ok(None),
        (Placement::Trusted { .. }, Err(why)) => Err(ChannelError::Refused(format!("refusing to promote from a channel moved without a statement: {why}"))),
        (_, Err(why)) if unplaced == Unplaced::Migrate => Ok(Some(why)),
        (Placement::Missing { reference } | Placement::Untrusted { reference, .. }, Err(why)) => Err(ChannelError::Refused(format!(
            "refusing to promote {}: its channel has no statement that counts ({reference}): {why}. \
             Nothing is promoted from a channel whose placement nobody signed (a deleted statement must not let a bundle move on). \
             If this channel last moved before channel statements existed, check what its tag names, then migrate it once with {MIGRATE_FLAG}",
            src.describe(lookup)
        ))),
    }
}

/// Points `dst_tag` in `dst` at the bundle `src_lookup` names in `src`, after it verified,
/// with the destination channel's statement signed by `key`.
pub async fn promote(
    src: &Repo,
    src_lookup: &str,
    dst: &Repo,
    dst_tag: &str,
    policy: &TrustPolicy,
    key: &PrivateKey,
    unplaced: Unplaced,
) -> Result<Promoted, ChannelError> {
    if dst_tag.ends_with(".sig") {
        return Err(ChannelError::InvalidTag(format!("destination tag {dst_tag} is reserved for signatures")));
    }
    statement::tag(dst_tag)?;
    let head = verified_source(src, src_lookup, policy).await?;
    let source_unplaced = source_placement(src, src_lookup, &head, policy, unplaced).await?;
    let dst_name = dst.describe(dst_tag);
    let holding = history::read(dst, dst_tag, Some(policy)).await?;
    let untrusted_previous = match &holding {
        Holding::Foreign { digest, reason } => {
            return Err(ChannelError::Refused(format!(
                "{dst_name} currently holds {digest}, which is not a drover bundle ({reason}); refusing to overwrite it"
            )))
        }
        Holding::Untrusted { digest, reason } => Some(format!("{dst_name} held {digest}, which does not verify: {reason}")),
        _ => None,
    };
    if let Some(cur) = holding.trusted() {
        if cur.config.cluster_type != head.config.cluster_type || cur.config.environment != head.config.environment {
            return Err(ChannelError::Refused(format!(
                "{dst_name} holds a bundle for cluster type {:?} / environment {:?}, {} is for {:?} / {:?}; promote within one cluster type and environment",
                cur.config.cluster_type,
                cur.config.environment,
                src.describe(src_lookup),
                head.config.cluster_type,
                head.config.environment
            )));
        }
    }
    let previous = holding.trusted().map(Head::position);
    let step = never_lower(&dst_name, previous.as_ref(), &head.position())?;
    let copied = src.describe("x") != dst.describe("x");
    let mut signatures_copied = 0;
    if copied {
        signatures_copied = copy_verified(src, dst, &head, head.verification.as_ref().expect("verified with a policy")).await?;
        if let Err(e) = trust::verify(dst, &head.digest, policy).await {
            return Err(ChannelError::Unverified { what: format!("the copy in {dst_name}"), source: e });
        }
    }
    let placed = write::place(dst, dst_tag, &head.digest, head.config.sequence, key).await?;
    if step == Move::Forward {
        write::tag(dst, &head.manifest_bytes, &[dst_tag]).await?;
    }
    Ok(Promoted {
        digest: head.digest.clone(),
        sequence: head.config.sequence,
        min_agent_version: head.config.min_agent_version.clone(),
        cluster_type: head.config.cluster_type.clone(),
        environment: head.config.environment.clone(),
        previous,
        untrusted_previous,
        copied,
        signatures_copied,
        matched_keys: head.verification.iter().flat_map(|v| v.matched.iter().map(|m| m.fingerprint.clone())).collect(),
        changed: step == Move::Forward,
        statement: placed,
        source_unplaced,
    })
}

/// Copies a verified bundle (config, layer, manifest by digest) and the signature layers
/// that counted in `verification` into `dst`. Returns the signature layers added.
async fn copy_verified(src: &Repo, dst: &Repo, head: &Head, verification: &Verification) -> Result<usize, ChannelError> {
    let limits = FetchLimits::default();
    let layer = head.manifest.bundle_layer().map_err(ChannelError::Refused)?;
    dst.put_blob(&head.manifest.config.digest, head.config_bytes.clone()).await?;
    if !dst.has_blob(&layer.digest).await? {
        let data = src.blob(&layer.digest, limits.layer).await?;
        dst.put_new_blob(&layer.digest, data).await?;
    }
    dst.put_manifest(head.manifest_bytes.clone(), media::OCI_MANIFEST, None).await?;
    // Only the layers that verified travel: re-read them (digest-checked) by position.
    let (bytes, _) = src.manifest(&signature_tag(&head.digest), sigmanifest::MAX_SIGNATURE_MANIFEST).await?;
    let manifest = sigmanifest::parse(&bytes).map_err(ChannelError::Refused)?;
    let mut layers = Vec::new();
    for report in verification.layers.iter().filter(|l| l.problem.is_none() && !l.signed_by.is_empty()) {
        let Some(desc) = manifest.layers.get(report.index).filter(|d| d.digest == report.digest) else { continue };
        let payload = src.blob(&desc.digest, sigmanifest::MAX_PAYLOAD).await?;
        layers.push((desc.clone(), payload));
    }
    let (_, added, _) = trust::append_signature_layers(dst, &head.digest, layers).await?;
    Ok(added)
}
