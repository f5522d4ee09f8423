//! Which reporting agents are too old for a bundle (docs/bundle.md, "Compatibility"):
//! `drover publish` and `drover promote` warn, naming the clusters on the target channel
//! whose last report says an agent version below the bundle's `minAgentVersion`. Advisory
//! only: a report that does not count (no roster, another key) is still named, marked so.

use drover_proto::compat;
use drover_proto::trust::TrustPolicy;
use drover_proto::RegistryClient;

use drover_proto::report::roster::Standing;
use drover_proto::report::Report;

use super::read::{self, Judge};

/// The channel a bundle is being placed on, and the agent it needs.
pub struct Target<'a> {
    /// The bundle's cluster type.
    pub cluster_type: &'a str,
    /// Its environment.
    pub environment: &'a str,
    /// The channel tag.
    pub channel: &'a str,
    /// Its `minAgentVersion`.
    pub min_agent_version: &'a str,
}

/// `<type>.<cluster> (agent V)` when `report` follows `t`'s channel with an agent older
/// than the bundle needs (an unreadable version counts as older), marked when the report
/// does not count.
pub fn older(report: &Report, standing: &Standing, t: &Target<'_>) -> Option<String> {
    let need = compat::parse(t.min_agent_version, "minAgentVersion").ok()?;
    let follows = report.cluster_type == t.cluster_type && report.environment == t.environment && report.channel == t.channel;
    if !follows || compat::parse(&report.agent_version, "agentVersion").is_ok_and(|v| v >= need) {
        return None;
    }
    let untrusted = standing.reason().map(|why| format!(", report not counted: {why}")).unwrap_or_default();
    let version = if report.agent_version.is_empty() { "unknown" } else { &report.agent_version };
    Some(format!("{} (agent {version}{untrusted})", report.tag()))
}

/// Reads the reports of `repository` and says, for each of `targets`, which agents on
/// it are older than it needs: one warning per target with such agents (the caller
/// prints them). Reports that cannot be read give no warning.
pub async fn warnings(repository: &str, client: &RegistryClient, policy: &TrustPolicy, targets: &[Target<'_>]) -> Vec<String> {
    if targets.is_empty() {
        return Vec::new();
    }
    // Each report is looked at as it arrives; only the names of older agents are kept.
    let mut old: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
    let scanned = read::scan(&[repository.to_string()], client, &Judge::Roster(policy), |_, outcome| {
        let Ok((received, standing)) = outcome else { return };
        for (t, names) in targets.iter().zip(old.iter_mut()) {
            if names.len() < read::NAMED {
                names.extend(older(&received.report, &standing, t));
            }
        }
    })
    .await;
    if let Err(e) = scanned {
        tracing::debug!("agent versions not checked, the reports of {repository} are unreadable: {e:#}");
        return Vec::new();
    }
    let mut out = Vec::new();
    for (t, mut old) in targets.iter().zip(old) {
        old.sort();
        old.dedup();
        if !old.is_empty() {
            out.push(format!(
                "{}/{} needs drover-agent {} or newer, but {} cluster(s) following {} report an older agent; they refuse it (agent-too-old) until upgraded: {}",
                t.cluster_type,
                t.environment,
                t.min_agent_version,
                old.len(),
                t.channel,
                old.join(", ")
            ));
        }
    }
    out
}
