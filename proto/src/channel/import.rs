//! Importing an archive into a registry repository (`drover import`), in two phases so a
//! refusal changes nothing: [`check`] screens every signature layer the archive carries
//! (only layers that are well-formed simple-signing layers over the digest they claim and,
//! with a policy, signed by a trusted key are kept), verifies every bundle against the
//! policy, and checks every destination tag (history tags are immutable; a channel tag
//! never moves to a lower sequence unless `allow_downgrade`); [`write`] then writes in the
//! channel order: blobs, signature layers, history tags and signed documents (channel
//! statements, the fleet roster), channel tags (the first tag written stores the manifest;
//! see [`super::write`]). Signed documents are verified like bundles; fleet reports are
//! carried as they are (readers judge them against the roster).
//!
//! Never lower, everywhere: a channel statement or the roster is never replaced by one of
//! a lower sequence than the destination holds (refused, named, nothing imported; for a
//! statement `allow_downgrade` restores it with its channel), and a report never by an
//! older one (kept, said so): a truncated old archive cannot put an old placement, a
//! revoked cluster or an old health back ([`document_action`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::config::BundleConfig;
use crate::manifest::{Descriptor, Manifest};
use crate::repo::{FetchLimits, Repo};
use crate::trust::{self, sigmanifest, TrustPolicy};

use crate::report::{self, roster::{self, Roster}};
use crate::signed::{self, Found};

use super::history::{self, Holding};
use super::statement::{self, Statement};
use super::{never_lower, parse_history_tag, write as order, ChannelError, Position};

/// One manifest of the archive, as named in its index (`<repository>:<tag>`).
#[derive(Debug, Clone)]
pub struct Item {
    /// The tag.
    pub tag: String,
    /// Manifest digest.
    pub digest: String,
    /// Manifest media type.
    pub media_type: String,
    /// Manifest bytes.
    pub bytes: Vec<u8>,
    /// Parsed manifest.
    pub manifest: Manifest,
    /// For `sha256-<hex>.sig` tags: the digest the signatures are for.
    pub signs: Option<String>,
}

/// What happens to a destination tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// The destination already names this manifest.
    Unchanged,
    /// Written.
    Pushed,
    /// Signature layers merged into the destination's signature manifest.
    Merged,
    /// Moved to a lower sequence because `allow_downgrade` was given.
    Downgraded,
    /// Nothing written: every signature layer was dropped.
    Dropped,
    /// Nothing written: the destination holds a newer report of that cluster.
    Older,
}

/// The decision for one item.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// The tag.
    pub tag: String,
    /// Manifest digest.
    pub digest: String,
    /// What was (or will be) done.
    pub action: Action,
    /// True when the bundle verified against the policy.
    pub verified: bool,
    /// Signature layers left out, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_layers: Vec<String>,
}

/// One repository checked and ready to write.
pub struct Checked {
    items: Vec<Item>,
    decisions: Vec<Decision>,
    /// Kept signature layers per signed digest.
    signatures: BTreeMap<String, Vec<(Descriptor, Vec<u8>)>>,
    /// Indexes of the items whose tag is a history tag (written before channel tags).
    history: BTreeSet<usize>,
    /// The destination held no tag at all when it was checked: blobs are uploaded without
    /// asking first and signature manifests are written new.
    fresh: bool,
}

impl Checked {
    /// The decisions, in item order.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }
}

/// Phase 1 for the items of one repository, read from `src` (the archive) and headed for
/// `dst`: screens signatures, verifies bundles against `policy`, checks destination tags.
/// Nothing is written.
pub async fn check(src: &Repo, dst: &Repo, items: Vec<Item>, policy: Option<&TrustPolicy>, allow_downgrade: bool) -> Result<Checked, ChannelError> {
    let mut signatures = BTreeMap::new();
    let mut dropped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in items.iter() {
        let Some(signed) = &item.signs else { continue };
        let mut kept = Vec::new();
        for (i, layer) in item.manifest.layers.iter().enumerate() {
            let judged = match src.blob(&layer.digest, sigmanifest::MAX_PAYLOAD.min(layer.size.max(1))).await {
                Ok(payload) => trust::screen_layer(signed, layer, &payload, policy).map(|()| payload),
                Err(e) => Err(e.to_string()),
            };
            match judged {
                Ok(payload) => kept.push((layer.clone(), payload)),
                Err(why) => dropped.entry(item.tag.clone()).or_default().push(format!("layer {i} ({}): {why}", layer.digest)),
            }
        }
        signatures.insert(signed.clone(), kept);
    }
    let mut decisions = Vec::with_capacity(items.len());
    let mut verified = BTreeSet::new();
    for item in &items {
        if item.signs.is_some() || is_report(&item.manifest) {
            continue;
        }
        if let Some(policy) = policy {
            let kept = signatures.get(&item.digest).map(Vec::as_slice).unwrap_or_default();
            let (descs, payloads): (Vec<Descriptor>, Vec<Vec<u8>>) = kept.iter().cloned().unzip();
            let reference = src.describe(&crate::digest::signature_tag(&item.digest));
            if descs.is_empty() {
                return Err(ChannelError::Refused(format!(
                    "{} ({}) is not signed: the archive carries no valid signature layer for it",
                    src.describe(&item.tag),
                    item.digest
                )));
            }
            trust::evaluate(&item.digest, &reference, &descs, &payloads, policy)
                .map_err(|e| ChannelError::Unverified { what: format!("{} ({})", src.describe(&item.tag), item.digest), source: e })?;
            verified.insert(item.digest.clone());
        }
    }
    // One tag list instead of a HEAD per tag: a tag it does not name is free to write.
    let existing: BTreeSet<String> = dst.tags().await?.into_iter().collect();
    let mut history = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let action = match &item.signs {
            Some(signed) if signatures.get(signed).is_none_or(Vec::is_empty) => Action::Dropped,
            Some(_) => Action::Pushed,
            // A signed document (a channel statement, the roster) is written before the
            // channel tags, like a history tag; it is replaced by a newer one as it is
            // where it came from. A report is carried as it is.
            None if is_document(&item.manifest) || is_report(&item.manifest) => {
                if is_document(&item.manifest) {
                    history.insert(i);
                }
                match existing.contains(&item.tag) {
                    true => document_action(src, dst, item, policy, allow_downgrade).await?,
                    false => Action::Pushed,
                }
            }
            None => {
                let config = read_config(src, item).await?;
                let is_history = parse_history_tag(&item.tag, &config.environment).is_some();
                if is_history {
                    history.insert(i);
                }
                if existing.contains(&item.tag) {
                    tag_action(dst, item, &config, is_history, policy, allow_downgrade).await?
                } else {
                    Action::Pushed
                }
            }
        };
        decisions.push(Decision {
            tag: item.tag.clone(),
            digest: item.digest.clone(),
            action,
            verified: verified.contains(&item.digest),
            dropped_layers: dropped.remove(&item.tag).unwrap_or_default(),
        });
    }
    Ok(Checked { items, decisions, signatures, history, fresh: existing.is_empty() })
}

/// True for a fleet report (never signed: judged by its reader against the roster).
fn is_report(m: &Manifest) -> bool {
    m.artifact_type.as_deref() == Some(crate::media::REPORT_ARTIFACT_TYPE)
}

/// True for a signed document: a channel statement or the fleet roster.
fn is_document(m: &Manifest) -> bool {
    matches!(m.artifact_type.as_deref(), Some(crate::media::STATEMENT_ARTIFACT_TYPE | crate::media::ROSTER_ARTIFACT_TYPE))
}

/// What a signed document or a report does to the destination tag it is headed for: never
/// lower. A channel statement or the roster of a lower sequence than the destination's
/// (trusted, with a policy; as written, without) is refused, naming both; one of the same
/// sequence must say the same (a statement: the same bundle; the roster: the same
/// document). A report older than the destination's is not written ([`Action::Older`]).
async fn document_action(src: &Repo, dst: &Repo, item: &Item, policy: Option<&TrustPolicy>, allow_downgrade: bool) -> Result<Action, ChannelError> {
    let name = dst.describe(&item.tag);
    let Some(current) = dst.resolve(&item.tag).await? else { return Ok(Action::Pushed) };
    if current == item.digest {
        return Ok(Action::Unchanged);
    }
    if is_report(&item.manifest) {
        let time = |r: Option<report::store::Received>| r.and_then(|r| crate::time::parse_rfc3339(&r.report.reported_at).ok());
        let held = time(report::store::read(dst, &item.tag).await.unwrap_or(None));
        let carried = time(report::store::read(src, &item.tag).await.unwrap_or(None));
        return Ok(match (held, carried) {
            (Some(h), Some(c)) if c < h => Action::Older,
            _ => Action::Pushed,
        });
    }
    let (kind, what) = match item.manifest.artifact_type.as_deref() {
        Some(crate::media::ROSTER_ARTIFACT_TYPE) => (&roster::KIND, "roster"),
        _ => (&statement::KIND, "statement"),
    };
    let held = match policy {
        Some(p) => match signed::read(dst, kind, &item.tag, p).await? {
            Found::Trusted(doc) => Some(doc.bytes),
            // What does not verify sets no floor: it is replaced.
            _ => None,
        },
        None => signed::read_unverified(dst, kind, &item.tag).await?.map(|(_, b)| b),
    };
    let Some(held) = held else { return Ok(Action::Pushed) };
    let (_, carried) = signed::read_unverified(src, kind, &item.tag)
        .await?
        .ok_or_else(|| ChannelError::Refused(format!("{}: not a readable {}", src.describe(&item.tag), kind.name)))?;
    // (sequence, what must be equal at the same sequence)
    let claim = |bytes: &[u8]| -> Result<(u64, String), String> {
        match what {
            "roster" => Roster::from_slice(bytes).map(|r| (r.sequence, crate::digest::sha256_digest(bytes))),
            _ => Statement::from_slice(bytes).map(|s| (s.sequence, s.digest)),
        }
    };
    let (held_seq, held_claim) = claim(&held).map_err(|e| ChannelError::Refused(format!("{name}: {e}")))?;
    let (seq, carried_claim) = claim(&carried).map_err(|e| ChannelError::Refused(format!("{}: {e}", src.describe(&item.tag))))?;
    if seq > held_seq || (seq == held_seq && carried_claim == held_claim) {
        return Ok(Action::Pushed);
    }
    if seq < held_seq && what == "statement" && allow_downgrade {
        return Ok(Action::Downgraded);
    }
    let how = if seq < held_seq { "a lower" } else { "the same" };
    let restore = if what == "statement" && seq < held_seq {
        " If this archive is a deliberate restore of older content, import it with --allow-downgrade"
    } else {
        ""
    };
    Err(ChannelError::Refused(format!(
        "refusing to replace {name} (sequence {held_seq}) with the {} of {} ({}, sequence {seq}, {how} sequence{}): a signed document never goes back. Nothing was imported.{restore}",
        kind.name,
        src.describe(&item.tag),
        item.digest,
        if seq == held_seq { " with other content" } else { "" }
    )))
}

/// The bundle config of an archive item.
async fn read_config(src: &Repo, item: &Item) -> Result<BundleConfig, ChannelError> {
    let config_bytes = src.blob(&item.manifest.config.digest, FetchLimits::default().config).await?;
    BundleConfig::from_slice(&config_bytes).map_err(|e| ChannelError::Refused(format!("{}: {e}", src.describe(&item.tag))))
}

/// The channel rules for one bundle tag in the destination.
async fn tag_action(
    dst: &Repo,
    item: &Item,
    config: &BundleConfig,
    is_history: bool,
    policy: Option<&TrustPolicy>,
    allow_downgrade: bool,
) -> Result<Action, ChannelError> {
    let name = dst.describe(&item.tag);
    let current = match dst.resolve(&item.tag).await? {
        None => return Ok(Action::Pushed),
        Some(d) if d == item.digest => return Ok(Action::Unchanged),
        Some(d) => d,
    };
    if is_history {
        return Err(ChannelError::HistoryTaken { tag: name, existing: current, wanted: item.digest.clone() });
    }
    let candidate = Position { digest: item.digest.clone(), sequence: config.sequence };
    match history::read(dst, &item.tag, policy).await? {
        Holding::Trusted(head) => match never_lower(&name, Some(&head.position()), &candidate) {
            Ok(_) => Ok(Action::Pushed),
            Err(ChannelError::Lower { .. }) if allow_downgrade => Ok(Action::Downgraded),
            Err(e @ ChannelError::Lower { .. }) => Err(ChannelError::Refused(format!(
                "{e}. Nothing was imported. If this archive is a deliberate restore of older content, import it with --allow-downgrade"
            ))),
            Err(e) => Err(e),
        },
        Holding::Foreign { digest, reason } => {
            Err(ChannelError::Refused(format!("{name} holds {digest}, which is not a drover bundle ({reason}); refusing to overwrite it")))
        }
        Holding::Untrusted { .. } | Holding::Empty => Ok(Action::Pushed),
    }
}

/// What writing one repository uploaded.
#[derive(Debug, Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Uploads {
    /// Blobs uploaded.
    pub uploaded: usize,
    /// Blobs the destination already had.
    pub present: usize,
}

/// Phase 2: writes a checked repository in the channel order. `big_blob` serialises the
/// reading of blobs over `big` bytes (memory stays bounded when repositories run at once).
pub async fn write(src: &Repo, dst: &Repo, checked: &mut Checked, big_blob: &tokio::sync::Semaphore, big: u64) -> Result<Uploads, ChannelError> {
    let mut up = Uploads::default();
    let mut seen = BTreeSet::new();
    for item in checked.items.iter().filter(|i| i.signs.is_none()) {
        for d in std::iter::once(&item.manifest.config).chain(&item.manifest.layers) {
            if !seen.insert(d.digest.clone()) {
                continue;
            }
            if !checked.fresh && dst.has_blob(&d.digest).await? {
                up.present += 1;
                continue;
            }
            let _permit = if d.size > big { Some(big_blob.acquire().await.map_err(|e| ChannelError::Refused(e.to_string()))?) } else { None };
            let data = src.blob(&d.digest, d.size).await?;
            dst.put_new_blob(&d.digest, data).await?;
            up.uploaded += 1;
        }
    }
    // Every bundle written here is tagged below (Pushed and Downgraded move a tag): the tag
    // stores the manifest, after its signature.
    for (item, decision) in checked.items.iter().zip(checked.decisions.iter_mut()) {
        let Some(signed) = &item.signs else { continue };
        let Some(layers) = checked.signatures.remove(signed).filter(|l| !l.is_empty()) else { continue };
        let existing = if checked.fresh { trust::ExistingSignatures::default() } else { trust::existing_signatures(dst, signed).await? };
        let existed = existing.digest.is_some();
        let (_, added, _) = trust::append_to(dst, signed, existing, layers).await?;
        decision.action = match (added, existed) {
            (0, _) => Action::Unchanged,
            (_, true) => Action::Merged,
            (_, false) => Action::Pushed,
        };
    }
    // History tags before channel tags.
    let mut moves: Vec<(bool, &Item)> = checked
        .items
        .iter()
        .zip(&checked.decisions)
        .enumerate()
        .filter(|(_, (i, d))| i.signs.is_none() && matches!(d.action, Action::Pushed | Action::Downgraded))
        .map(|(n, (i, _))| (!checked.history.contains(&n), i))
        .collect();
    moves.sort_by_key(|(channel, _)| *channel);
    for (_, item) in moves {
        order::tag_as(dst, &item.bytes, &item.media_type, &[&item.tag]).await?;
    }
    Ok(up)
}
