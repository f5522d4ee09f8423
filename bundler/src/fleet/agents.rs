//! Which reporting agents are too old for a bundle (docs/bundle.md, "Compatibility"):
//! `drover publish` and `drover promote` warn, naming the clusters on the target channel
//! whose last report says an agent version below the bundle's `minAgentVersion`. Advisory
//! only: a report that does not count (no roster, another key) is still named, marked so.

use drover_proto::compat;
use drover_proto::trust::TrustPolicy;
use drover_proto::RegistryClient;

use super::Seen;

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

/// `<type>.<cluster> (agent V)` for every report following `t`'s channel whose agent is
/// older than the bundle needs (an unreadable version counts as older), sorted.
pub fn older(reports: &[Seen], t: &Target<'_>) -> Vec<String> {
    let Ok(need) = compat::parse(t.min_agent_version, "minAgentVersion") else { return Vec::new() };
    let mut out: Vec<String> = reports
        .iter()
        .filter(|s| s.report.cluster_type == t.cluster_type && s.report.environment == t.environment && s.report.channel == t.channel)
        .filter(|s| compat::parse(&s.report.agent_version, "agentVersion").map_or(true, |v| v < need))
        .map(|s| {
            let untrusted = s.untrusted().map(|why| format!(", report not counted: {why}")).unwrap_or_default();
            let version = if s.report.agent_version.is_empty() { "unknown" } else { &s.report.agent_version };
            format!("{} (agent {version}{untrusted})", s.report.tag())
        })
        .collect();
    out.sort();
    out
}

/// Reads the reports of `repository` and says, for each of `targets`, which agents on
/// it are older than it needs: one warning per target with such agents (the caller
/// prints them). Reports that cannot be read give no warning.
pub async fn warnings(repository: &str, client: &RegistryClient, policy: &TrustPolicy, targets: &[Target<'_>]) -> Vec<String> {
    if targets.is_empty() {
        return Vec::new();
    }
    let reports = match super::load(&[repository.to_string()], client, policy).await {
        Ok((reports, _)) => reports,
        Err(e) => {
            tracing::debug!("agent versions not checked, the reports of {repository} are unreadable: {e:#}");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for t in targets {
        let old = older(&reports, t);
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
