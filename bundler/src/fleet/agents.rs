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
/// than `need` (an unreadable version counts as older), marked when the report does not
/// count.
pub fn older(report: &Report, standing: &Standing, t: &Target<'_>, need: &compat::Version) -> Option<String> {
    let follows = report.cluster_type == t.cluster_type && report.environment == t.environment && report.channel == t.channel;
    if !follows || compat::parse(&report.agent_version, "agentVersion").is_ok_and(|v| v >= *need) {
        return None;
    }
    let untrusted = standing.reason().map(|why| format!(", report not counted: {why}")).unwrap_or_default();
    let version = if report.agent_version.is_empty() { "unknown" } else { &report.agent_version };
    Some(format!("{} (agent {version}{untrusted})", report.tag()))
}

/// The older agents found for one target: how many, and the first [`read::NAMED`] named.
#[derive(Default)]
struct Found {
    count: usize,
    named: Vec<String>,
}

/// Reads the reports of `repository` and says, for each of `targets`, which agents on
/// it are older than it needs: one warning per target with such agents (the caller
/// prints them). Reports that cannot be read give no warning.
pub async fn warnings(repository: &str, client: &RegistryClient, policy: &TrustPolicy, targets: &[Target<'_>]) -> Vec<String> {
    if targets.is_empty() {
        return Vec::new();
    }
    // Each target's minimum is parsed once; each report is looked at as it arrives and
    // only the names of the first older agents are kept.
    let needs: Vec<Option<compat::Version>> = targets.iter().map(|t| compat::parse(t.min_agent_version, "minAgentVersion").ok()).collect();
    let mut old: Vec<Found> = targets.iter().map(|_| Found::default()).collect();
    let scanned = read::scan(&[repository.to_string()], client, &Judge::Roster(policy), |_, outcome| {
        let Ok((received, standing)) = outcome else { return };
        for ((t, need), found) in targets.iter().zip(&needs).zip(old.iter_mut()) {
            let Some(name) = need.as_ref().and_then(|need| older(&received.report, &standing, t, need)) else { continue };
            found.count += 1;
            if found.named.len() < read::NAMED {
                found.named.push(name);
            }
        }
    })
    .await;
    if let Err(e) = scanned {
        tracing::debug!("agent versions not checked, the reports of {repository} are unreadable: {e:#}");
        return Vec::new();
    }
    let mut out = Vec::new();
    for (t, mut found) in targets.iter().zip(old) {
        if found.count == 0 {
            continue;
        }
        // An archive may carry a cluster's report twice: named (and counted) once.
        found.named.sort();
        let listed = found.named.len();
        found.named.dedup();
        found.count -= listed - found.named.len();
        let more = found.count - found.named.len();
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        out.push(format!(
            "{}/{} needs drover-agent {} or newer, but {} cluster(s) following {} report an older agent; they refuse it (agent-too-old) until upgraded: {}{more}",
            t.cluster_type,
            t.environment,
            t.min_agent_version,
            found.count,
            t.channel,
            found.named.join(", ")
        ));
    }
    out
}
