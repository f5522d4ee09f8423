//! `drover fleet status` as data: one row per cluster, classified by the one rule
//! ([`super::classify`]) for its channel, and a summary per (environment, cluster type,
//! channel). With a Fleet file the rows are the declared clusters (a declared cluster
//! without a report is `missing`); without one, the clusters whose reports count. What
//! does not count — reports of clusters that are not declared (a retired cluster's
//! leftover included), or whose signature does not count — is listed apart, counted and
//! the first [`super::read::NAMED`] named, never as a row.
//!
//! Each channel's clusters are classified against the bundle the channel holds, when the
//! command could read it (verified), else against the newest sequence one of them runs
//! (`behind` then means behind its peers), with the soak given (default none).

use std::collections::{BTreeMap, BTreeSet};

use drover_proto::report::store::Unreadable;
use drover_proto::report::{ReportHealth, ReportRollback};
use serde::Serialize;

use super::classify::{classify, is_stale, Bar, Class, Known, Target};
use super::groups::{self, peer_target};
use super::members::{Group, Membership};
use super::read::Reading;

/// One cluster (the JSON fields of `fleet status -o json` `clusters[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    /// Cluster name.
    pub cluster_name: String,
    /// Cluster type.
    pub cluster_type: String,
    /// Environment (declared, with a Fleet file).
    pub environment: String,
    /// Channel followed (declared, with a Fleet file).
    pub channel: String,
    /// Its classification for the channel.
    pub class: Class,
    /// Why.
    pub reason: String,
    /// Applied digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_digest: Option<String>,
    /// Applied sequence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_sequence: Option<u64>,
    /// Health of the applied state (`Unknown` without a report that counts).
    pub health: ReportHealth,
    /// Result of the last recorded attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_result: Option<String>,
    /// Its reason (empty on plain success).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
    /// A rollback in force on the cluster: the Degraded bundle it refuses and the one it
    /// put back (`digest`, `sequence`, `toDigest`, `at`), until an operator releases it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<ReportRollback>,
    /// When the report was written (absent without a report that counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported_at: Option<String>,
    /// True when the report is older than `--stale` (or dated in the future).
    pub stale: bool,
    /// Why its reports do not count (a declared cluster's), when they do not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<String>,
}

/// How many clusters of a channel are at one sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AtSequence {
    /// The applied sequence (`None`: nothing applied).
    pub sequence: Option<u64>,
    /// The applied digest.
    pub digest: Option<String>,
    /// Clusters there.
    pub clusters: usize,
}

/// One (environment, cluster type, channel) (the JSON of `summary[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryRow {
    /// Environment.
    pub environment: String,
    /// Cluster type.
    pub cluster_type: String,
    /// Channel.
    pub channel: String,
    /// Clusters (declared, or reporting).
    pub clusters: usize,
    /// Where the clusters with a report that counts are, newest sequence first.
    pub sequences: Vec<AtSequence>,
    /// Healthy (a fresh report that counts).
    pub healthy: usize,
    /// Progressing (fresh).
    pub progressing: usize,
    /// Degraded (fresh).
    pub degraded: usize,
    /// Nothing applied yet (fresh).
    pub unknown: usize,
    /// Reports older than `--stale` (that count).
    pub stale: usize,
    /// Clusters whose reports do not count.
    pub untrusted: usize,
    /// Declared clusters without any report.
    pub missing: usize,
    /// Ready clusters (the class `ready`).
    pub ready: usize,
    /// Clusters by class.
    pub classes: BTreeMap<&'static str, usize>,
    /// What its clusters are classified against: the bundle the channel holds, or else the
    /// newest its clusters run (absent: none runs anything).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetRow>,
    /// True when every cluster is ready: a 100% gate on this channel would pass.
    pub all_ready: bool,
}

/// The bundle a channel's clusters should run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetRow {
    /// Its digest.
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
    /// `channel` (the channel tag, verified) or `clusters` (the newest a cluster runs).
    pub from: &'static str,
}

/// A report that does not count and is in no row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotCountedRow {
    /// `TYPE.NAME`.
    pub cluster: String,
    /// The environment its report claims.
    pub environment: String,
    /// The channel its report claims.
    pub channel: String,
    /// Why it does not count.
    pub reason: String,
}

/// Reports that count nowhere: how many, and the first ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Apart {
    /// How many.
    pub reports: usize,
    /// The first [`super::read::NAMED`], by tag.
    pub named: Vec<NotCountedRow>,
}

/// Tags that hold something unusable: how many, and the first ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    /// How many.
    pub tags: usize,
    /// The first [`super::read::NAMED`]: where, and why.
    pub named: Vec<Unreadable>,
}

/// The whole `fleet status` document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The Fleet file the membership is declared in (absent: membership from the reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<String>,
    /// One row per cluster, by environment, cluster type, channel, name.
    pub clusters: Vec<ClusterRow>,
    /// One row per (environment, cluster type, channel).
    pub summary: Vec<SummaryRow>,
    /// Reports that are never counted: with a Fleet file, those of clusters it does not
    /// declare; without one, those whose signature does not count.
    pub untrusted: Apart,
    /// Tags skipped as unusable.
    pub unreadable: Skipped,
}

impl Status {
    /// True when every channel's clusters are all ready: every gate on them (at 100%,
    /// with this status's soak and staleness) would pass — the only state in which a
    /// surface may say that all is well.
    pub fn all_well(&self) -> bool {
        !self.summary.is_empty() && self.summary.iter().all(|s| s.all_ready)
    }
}

/// Builds the status of what was read (only environment `env` when given) at `now`; each
/// channel's clusters classified against `heads` (what the channels hold, when read), else
/// against the newest sequence one of them runs.
pub fn build(reading: &Reading, membership: Option<&Membership>, env: Option<&str>, bar: &Bar, heads: &BTreeMap<Group, Target>, now: i64) -> Status {
    let declared_in = membership.map(|m| m.file.as_str());
    let stale_secs = bar.stale.as_secs() as i64;
    let mut clusters = Vec::new();
    let mut summary = Vec::new();
    let all = groups::all(reading, membership, env);
    // Without a Fleet file, untrusted reports of a shown channel are its rows; with one,
    // no untrusted report of an undeclared cluster is ever a row.
    let shown: BTreeSet<Group> = match membership {
        Some(_) => BTreeSet::new(),
        None => all.iter().map(|(g, _)| g.clone()).collect(),
    };
    for (group, slots) in all {
        let (target, from) = match heads.get(&group) {
            Some(t) => (Some(t.clone()), "channel"),
            None => (peer_target(&group, &slots), "clusters"),
        };
        let mut s = SummaryRow {
            environment: group.environment.clone(),
            cluster_type: group.cluster_type.clone(),
            channel: group.channel.clone(),
            clusters: slots.len(),
            sequences: Vec::new(),
            healthy: 0,
            progressing: 0,
            degraded: 0,
            unknown: 0,
            stale: 0,
            untrusted: 0,
            missing: 0,
            ready: 0,
            classes: BTreeMap::new(),
            target: target.as_ref().map(|t| TargetRow { digest: t.digest.clone(), sequence: t.sequence, from }),
            all_ready: false,
        };
        let mut at: BTreeMap<(Option<u64>, Option<String>), usize> = BTreeMap::new();
        for slot in &slots {
            let c = classify(slot.known, &group, declared_in, target.as_ref(), bar, now);
            *s.classes.entry(c.class.as_str()).or_insert(0) += 1;
            s.ready += usize::from(c.ready());
            let report = match slot.known {
                Known::Report(r) => Some(r),
                Known::Untrusted(_) => {
                    s.untrusted += 1;
                    None
                }
                Known::Missing(_) => {
                    s.missing += 1;
                    None
                }
            };
            if let Some(r) = report {
                *at.entry((r.applied_sequence, r.applied_digest.clone())).or_insert(0) += 1;
                match (is_stale(r, now, stale_secs), r.health) {
                    (true, _) => s.stale += 1,
                    (false, ReportHealth::Healthy) => s.healthy += 1,
                    (false, ReportHealth::Progressing) => s.progressing += 1,
                    (false, ReportHealth::Degraded) => s.degraded += 1,
                    (false, ReportHealth::Unknown) => s.unknown += 1,
                }
            }
            // An untrusted cluster that is not named is counted, not shown.
            if matches!(slot.known, Known::Untrusted(None)) {
                continue;
            }
            clusters.push(ClusterRow {
                cluster_name: slot.cluster_name.to_string(),
                cluster_type: group.cluster_type.clone(),
                environment: group.environment.clone(),
                channel: group.channel.clone(),
                class: c.class,
                applied_digest: report.and_then(|r| r.applied_digest.clone()),
                applied_sequence: report.and_then(|r| r.applied_sequence),
                health: report.map(|r| r.health).unwrap_or_default(),
                last_result: c.last_result.clone(),
                last_reason: c.last_reason.clone(),
                rolled_back: report.and_then(|r| r.rolled_back.clone()),
                reported_at: report.map(|r| r.reported_at.clone()),
                stale: report.is_some_and(|r| is_stale(r, now, stale_secs)),
                untrusted: match slot.known {
                    Known::Untrusted(why) => Some(why.unwrap_or_default().to_string()),
                    _ => None,
                },
                reason: c.reason,
            });
        }
        s.sequences = at.into_iter().rev().map(|((sequence, digest), clusters)| AtSequence { sequence, digest, clusters }).collect();
        s.all_ready = s.clusters > 0 && s.ready == s.clusters;
        summary.push(s);
    }
    Status { fleet: declared_in.map(str::to_string), clusters, summary, untrusted: apart(reading, &shown, env), unreadable: skipped(reading) }
}

/// What is listed apart: every report that does not count and is in no row (those of a
/// group in `shown` are rows).
fn apart(reading: &Reading, shown: &BTreeSet<Group>, env: Option<&str>) -> Apart {
    let here = |tag: &str| reading.untrusted.get(tag).is_some_and(|g| env.is_none_or(|e| g.environment == e) && !shown.contains(g));
    let reports = reading.untrusted.keys().filter(|t| here(t)).count();
    let named = reading
        .why
        .iter()
        .filter(|(t, _)| here(t))
        .map(|(tag, why)| {
            let g = &reading.untrusted[tag];
            NotCountedRow { cluster: tag.clone(), environment: g.environment.clone(), channel: g.channel.clone(), reason: why.clone() }
        })
        .collect();
    Apart { reports, named }
}

fn skipped(reading: &Reading) -> Skipped {
    Skipped { tags: reading.unreadable, named: reading.unreadable_named.iter().map(|(k, v)| Unreadable { name: k.clone(), reason: v.clone() }).collect() }
}
