//! Flags shared by the fleet commands and `drover promote`: where the reports are and the
//! release key(s) that sign the fleet roster they are judged by ([`ReportsArgs`]), and the
//! health gate ([`GateArgs`], with [`gate`], the one place promote and wait turn a channel
//! and a bundle into a verdict).

use drover_proto::config::BundleConfig;
use drover_proto::report::default_repository;
use drover_proto::trust::TrustPolicy;
use drover_proto::{Reference, RegistryClient};

use crate::fleet::gate::{self, Candidate, Rule, Verdict};
use crate::fleet::{load, parse_duration};
use crate::output::UsageError;

/// `--registry PREFIX`, `--reports REF`, `--stale`, `--trust-key`: the reports to read and
/// the keys their roster must be signed with.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportsArgs {
    /// The release key(s) the fleet roster is signed with (a report counts only when its cluster is enrolled there).
    #[command(flatten)]
    pub trust: crate::trustargs::TrustArgs,
    /// Publish prefix, as for `drover publish --registry`: reads PREFIX/drover-reports. Repeatable.
    #[arg(long = "registry", value_name = "PREFIX")]
    pub prefixes: Vec<String>,
    /// A reports repository: HOST/REPO, oci:DIR or oci-archive:FILE (as `drover export` wrote it). Repeatable.
    #[arg(long = "reports", value_name = "REF")]
    pub reports: Vec<String>,
    /// A cluster whose last report is older than this is stale.
    #[arg(long, value_name = "DURATION", default_value = "15m")]
    pub stale: String,
}

impl ReportsArgs {
    /// The reports repositories to read.
    pub fn sources(&self) -> anyhow::Result<Vec<String>> {
        crate::fleet::sources(&self.prefixes, &self.reports)
    }

    /// `--stale` in seconds.
    pub fn stale_secs(&self) -> anyhow::Result<i64> {
        Ok(parse_duration("--stale", &self.stale)?.as_secs() as i64)
    }
}

/// The health gate's flags (`drover promote --require-healthy`, `drover fleet wait`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GateArgs {
    /// Share of the clusters following the source channel that must run the bundle, Healthy, for --soak (e.g. 100%).
    #[arg(long, value_name = "PERCENT")]
    pub require_healthy: Option<String>,
    /// Ready clusters needed at least (default 1).
    #[arg(long, value_name = "N")]
    pub min_clusters: Option<usize>,
    /// How long each cluster must have been Healthy on the bundle, e.g. 15m (default 0s).
    #[arg(long, value_name = "DURATION")]
    pub soak: Option<String>,
    /// The reports repository (default: <parent of the source repository>/drover-reports).
    #[arg(long = "reports", value_name = "HOST/REPO")]
    pub reports: Option<String>,
    /// A report older than this holds the gate back (default 15m).
    #[arg(long, value_name = "DURATION")]
    pub stale: Option<String>,
}

impl GateArgs {
    /// The rule, when the gate is on (`--require-healthy`, or `default_percent`).
    pub fn rule(&self, default_percent: Option<f64>) -> anyhow::Result<Option<Rule>> {
        let percent = match (&self.require_healthy, default_percent) {
            (Some(t), _) => gate::parse_percent(t).map_err(UsageError)?,
            (None, Some(p)) => p,
            (None, None) => {
                let stray = [
                    ("--min-clusters", self.min_clusters.is_some()),
                    ("--soak", self.soak.is_some()),
                    ("--reports", self.reports.is_some()),
                    ("--stale", self.stale.is_some()),
                ];
                if let Some((flag, _)) = stray.iter().find(|(_, set)| *set) {
                    return Err(UsageError(format!("{flag} belongs to the health gate: add --require-healthy PERCENT (e.g. 100%)")).into());
                }
                return Ok(None);
            }
        };
        Ok(Some(Rule {
            percent,
            min_clusters: self.min_clusters.unwrap_or(1),
            soak: parse_duration("--soak", self.soak.as_deref().unwrap_or("0s"))?,
            stale: parse_duration("--stale", self.stale.as_deref().unwrap_or("15m"))?,
        }))
    }

    /// The reports repository for a source reference.
    pub fn reports_for(&self, source: &str) -> anyhow::Result<String> {
        if let Some(r) = &self.reports {
            return Ok(r.clone());
        }
        match Reference::parse(source)? {
            Reference::Registry(r) => Ok(default_repository(&r).to_string()),
            _ => anyhow::bail!("{source} is not in a registry, so there is no default reports repository: give --reports HOST/REPO or oci:DIR"),
        }
    }
}

/// The channel a source names: its tag. A digest or a history tag names no channel the
/// agents follow, so the gate refuses them.
pub fn channel_of(source: &str, lookup: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        !drover_proto::digest::is_valid_digest(lookup),
        "{source}: the health gate needs the channel tag the agents follow (e.g. REPO:prod-ring0), not a digest"
    );
    Ok(lookup.rsplit(':').next().unwrap_or(lookup).to_string())
}

/// What the gate judges: the bundle `digest` (with `config`) that channel `channel` of
/// `source` holds.
pub struct Judged<'a> {
    /// The source reference as given.
    pub source: &'a str,
    /// Its channel tag.
    pub channel: &'a str,
    /// The bundle's digest.
    pub digest: &'a str,
    /// The bundle's signed config.
    pub config: &'a BundleConfig,
}

/// Evaluates the gate for `what`, reading the reports repository of `args` and judging its
/// reports against its roster, verified with `policy`.
pub async fn gate(args: &GateArgs, rule: &Rule, what: Judged<'_>, policy: &TrustPolicy, client: &RegistryClient) -> anyhow::Result<Verdict> {
    let Judged { source, channel, digest, config } = what;
    let repo = args.reports_for(source)?;
    let (reports, unreadable) = load(std::slice::from_ref(&repo), client, policy).await?;
    for u in unreadable {
        crate::output::warn(format_args!("skipped {}: {}", u.name, u.reason));
    }
    let cand = Candidate {
        channel: channel.to_string(),
        cluster_type: config.cluster_type.clone(),
        environment: config.environment.clone(),
        digest: digest.to_string(),
        sequence: config.sequence,
    };
    Ok(gate::evaluate(&reports, &cand, rule, drover_proto::time::now_unix()))
}
