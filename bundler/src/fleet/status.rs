//! `drover fleet status` as data: one row per cluster and a summary per (environment,
//! cluster type, channel). A report that does not count (untrusted: unsigned, not
//! enrolled, badly signed, dated in the future, over the format's limits) is shown as
//! such and counts in no health bucket; nor does a cluster whose report is older than
//! `--stale` (or dated in the future): nobody knows how it is.

use std::collections::BTreeMap;

use drover_proto::report::roster::MAX_SKEW_SECS;
use drover_proto::report::{Report, ReportHealth};
use serde::Serialize;

use super::{age, environment_rank, Seen};

/// One cluster (the JSON fields of `fleet status -o json` `clusters[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    /// Cluster name.
    pub cluster_name: String,
    /// Cluster type.
    pub cluster_type: String,
    /// Environment.
    pub environment: String,
    /// Channel followed.
    pub channel: String,
    /// Applied digest.
    pub applied_digest: Option<String>,
    /// Applied sequence.
    pub applied_sequence: Option<u64>,
    /// Health of the applied state.
    pub health: ReportHealth,
    /// Result of the last recorded attempt.
    pub last_result: Option<String>,
    /// When the report was written.
    pub reported_at: String,
    /// True when the report is older than `--stale` (or dated in the future).
    pub stale: bool,
    /// Why the report does not count (absent when it does): it is shown, never counted.
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
    /// Clusters reporting.
    pub clusters: usize,
    /// Where they are, newest sequence first.
    pub sequences: Vec<AtSequence>,
    /// Healthy (and not stale).
    pub healthy: usize,
    /// Progressing (and not stale).
    pub progressing: usize,
    /// Degraded (and not stale).
    pub degraded: usize,
    /// Nothing applied yet (and not stale).
    pub unknown: usize,
    /// Reports older than `--stale` (trusted ones).
    pub stale: usize,
    /// Reports that do not count.
    pub untrusted: usize,
}

/// The whole `fleet status` document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// One row per cluster, by environment, cluster type, channel, name.
    pub clusters: Vec<ClusterRow>,
    /// One row per (environment, cluster type, channel).
    pub summary: Vec<SummaryRow>,
}

/// Sort key: environment (promotion order), cluster type, channel, name.
pub fn order_key(r: &Report) -> ((usize, String), String, String, String) {
    (environment_rank(&r.environment), r.cluster_type.clone(), r.channel.clone(), r.cluster_name.clone())
}

/// True when `r` was written more than `stale_secs` before `now`, or is dated more than
/// the allowed clock skew after it, or its time is unreadable: every row, every gate.
pub fn is_stale(r: &Report, now: i64, stale_secs: i64) -> bool {
    age(&r.reported_at, now).is_none_or(|a| a > stale_secs || a < -MAX_SKEW_SECS)
}

/// Builds the status of `reports` (only `env` when given) at `now`.
pub fn build(reports: &[Seen], env: Option<&str>, now: i64, stale_secs: i64) -> Status {
    let mut selected: Vec<&Seen> = reports.iter().filter(|s| env.is_none_or(|e| s.report.environment == e)).collect();
    selected.sort_by_key(|s| order_key(&s.report));
    let clusters: Vec<ClusterRow> = selected
        .iter()
        .map(|s| (&s.report, s.untrusted()))
        .map(|(r, untrusted)| ClusterRow {
            cluster_name: r.cluster_name.clone(),
            cluster_type: r.cluster_type.clone(),
            environment: r.environment.clone(),
            channel: r.channel.clone(),
            applied_digest: r.applied_digest.clone(),
            applied_sequence: r.applied_sequence,
            health: r.health,
            last_result: r.last_attempt.as_ref().map(|a| a.result.clone()),
            reported_at: r.reported_at.clone(),
            stale: is_stale(r, now, stale_secs),
            untrusted: untrusted.map(str::to_string),
        })
        .collect();
    let mut groups: Vec<SummaryRow> = Vec::new();
    for row in &clusters {
        let fresh = groups.last().is_none_or(|g| (&g.environment, &g.cluster_type, &g.channel) != (&row.environment, &row.cluster_type, &row.channel));
        if fresh {
            groups.push(SummaryRow {
                environment: row.environment.clone(),
                cluster_type: row.cluster_type.clone(),
                channel: row.channel.clone(),
                clusters: 0,
                sequences: Vec::new(),
                healthy: 0,
                progressing: 0,
                degraded: 0,
                unknown: 0,
                stale: 0,
                untrusted: 0,
            });
        }
        let g = groups.last_mut().expect("a group");
        g.clusters += 1;
        match (row.untrusted.is_some() || row.stale, row.health) {
            _ if row.untrusted.is_some() => g.untrusted += 1,
            (true, _) => g.stale += 1,
            (false, ReportHealth::Healthy) => g.healthy += 1,
            (false, ReportHealth::Progressing) => g.progressing += 1,
            (false, ReportHealth::Degraded) => g.degraded += 1,
            (false, ReportHealth::Unknown) => g.unknown += 1,
        }
    }
    for g in &mut groups {
        let mut at: BTreeMap<(Option<u64>, Option<String>), usize> = BTreeMap::new();
        for row in clusters.iter().filter(|r| (&r.environment, &r.cluster_type, &r.channel) == (&g.environment, &g.cluster_type, &g.channel)) {
            *at.entry((row.applied_sequence, row.applied_digest.clone())).or_insert(0) += 1;
        }
        g.sequences = at.into_iter().rev().map(|((sequence, digest), clusters)| AtSequence { sequence, digest, clusters }).collect();
    }
    Status { clusters, summary: groups }
}
