//! Flags shared by the fleet commands and `drover promote`: where the reports are, who
//! must be in the fleet (`--fleet FILE`, the reviewed Fleet file, or else the release
//! key(s) that sign the registry roster) ([`ReportsArgs`], [`read`]), and the health gate
//! ([`GateArgs`], with [`gate`], the one place promote and wait turn a channel and a bundle
//! into a verdict).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_proto::channel::history::Holding;
use drover_proto::config::BundleConfig;
use drover_proto::report::default_repository;
use drover_proto::trust::TrustPolicy;
use drover_proto::{Reference, RegistryClient};

use crate::fleet::classify::{Bar, Target};
use crate::fleet::gate::{self, Candidate, Rule, Verdict};
use crate::fleet::members::{Group, Member, Membership};
use crate::fleet::read::{load, Judge, Reading};
use crate::fleet::{parse_duration, FleetError};
use crate::output::{warn, UsageError};

/// A fleet error as the command line reports it (a usage error exits 2).
pub fn fleet_error(e: FleetError) -> anyhow::Error {
    match e {
        FleetError::Usage(m) => UsageError(m).into(),
        e => e.into(),
    }
}

/// The clusters the Fleet file `file` declares (`--fleet FILE`), checked.
pub fn membership(file: &Path) -> anyhow::Result<Membership> {
    let f = crate::platform::membership::load(file)?;
    let members = f
        .clusters
        .into_iter()
        .map(|c| Member {
            group: Group { environment: c.environment, cluster_type: c.cluster_type, channel: c.channel },
            tag: c.name,
            cluster_name: c.cluster_name,
            report_key: c.report_key,
        })
        .collect();
    Ok(Membership::new(&f.path, members))
}

/// What every reader without `--fleet` warns.
pub const ROSTER_WARNING: &str = "membership comes from the registry roster: a registry writer can roll it back (an old roster, an old archive) \
     or make a lagging cluster's report vanish from the vote. Pass --fleet fleet.yaml, the reviewed Fleet file that declares every cluster \
     (docs/fleet.md, \"Declared membership\")";

/// Reads the reports of `sources`, judged against the clusters `fleet` declares, or else
/// (with a warning) against each repository's roster verified with `policy`.
pub async fn read(sources: &[String], fleet: Option<&Membership>, policy: Option<&TrustPolicy>, client: &RegistryClient) -> anyhow::Result<Reading> {
    let judge = match (fleet, policy) {
        (Some(m), _) => Judge::Declared(m),
        (None, Some(p)) => {
            warn(ROSTER_WARNING);
            Judge::Roster(p)
        }
        (None, None) => anyhow::bail!("give the Fleet file that declares the clusters (--fleet FILE), or the release key the registry roster is signed with (--trust-key PUB)"),
    };
    let reading = load(sources, client, &judge).await.map_err(fleet_error)?;
    for (name, reason) in &reading.unreadable_named {
        warn(format_args!("skipped {name}: {reason}"));
    }
    if reading.unreadable > reading.unreadable_named.len() {
        warn(format_args!("skipped {} more unusable tags", reading.unreadable - reading.unreadable_named.len()));
    }
    Ok(reading)
}

/// What each channel of `groups` holds: `PREFIX/<cluster type>:<channel>` for each of
/// `prefixes` (the first that verifies with `policy` and is for that cluster type and
/// environment). A channel that cannot be read is left out (its clusters are then judged
/// against what their peers run), with a warning.
pub async fn channel_heads(prefixes: &[String], groups: &[Group], policy: &TrustPolicy, client: &RegistryClient) -> BTreeMap<Group, Target> {
    let mut out = BTreeMap::new();
    for g in groups {
        for p in prefixes {
            let Ok(r) = drover_proto::RegistryRef::parse(&format!("{}/{}", p.trim_end_matches('/'), g.cluster_type)) else { continue };
            let repo = drover_proto::Repo::Registry { client: client.clone(), repo: r };
            match drover_proto::channel::history::read(&repo, &g.channel, Some(policy)).await {
                Ok(Holding::Trusted(h)) if h.config.cluster_type == g.cluster_type && h.config.environment == g.environment => {
                    out.insert(g.clone(), Target { digest: h.digest.clone(), sequence: h.config.sequence });
                    break;
                }
                Ok(_) => {}
                Err(e) => warn(format_args!("reading what {} holds: {e}", repo.describe(&g.channel))),
            }
        }
    }
    out
}

/// `--registry PREFIX`, `--reports REF`, `--fleet FILE`, `--stale`, `--soak`, `--trust-key`:
/// the reports to read and who must be in the fleet.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportsArgs {
    /// The release key(s) the registry roster is signed with (without --fleet: a report counts only when its cluster is enrolled there).
    #[command(flatten)]
    pub trust: crate::trustargs::TrustArgs,
    /// Publish prefix, as for `drover publish --registry`: reads PREFIX/drover-reports. Repeatable.
    #[arg(long = "registry", value_name = "PREFIX")]
    pub prefixes: Vec<String>,
    /// A reports repository: HOST/REPO, oci:DIR or oci-archive:FILE (as `drover export` wrote it). Repeatable.
    #[arg(long = "reports", value_name = "REF")]
    pub reports: Vec<String>,
    /// The Fleet file (the platform's fleet.yaml) that declares every cluster: the clusters that must be ready, each with its report key.
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<PathBuf>,
    /// A cluster whose last report is older than this is stale.
    #[arg(long, value_name = "DURATION", default_value = "15m")]
    pub stale: String,
    /// How long a cluster must have been Healthy on its channel's newest sequence to be ready.
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    pub soak: String,
}

impl ReportsArgs {
    /// The reports repositories to read.
    pub fn sources(&self) -> anyhow::Result<Vec<String>> {
        crate::fleet::sources(&self.prefixes, &self.reports).map_err(fleet_error)
    }

    /// `--stale` in seconds.
    pub fn stale_secs(&self) -> anyhow::Result<i64> {
        Ok(parse_duration("--stale", &self.stale).map_err(fleet_error)?.as_secs() as i64)
    }

    /// `--soak` and `--stale`.
    pub fn bar(&self) -> anyhow::Result<Bar> {
        Ok(Bar { soak: parse_duration("--soak", &self.soak).map_err(fleet_error)?, stale: parse_duration("--stale", &self.stale).map_err(fleet_error)? })
    }

    /// The declared clusters (`--fleet`), when given.
    pub fn membership(&self) -> anyhow::Result<Option<Membership>> {
        self.fleet.as_deref().map(membership).transpose()
    }

    /// Reads the reports: against `--fleet` (no key needed), or else against the roster
    /// verified with `--trust-key`; and, with `--registry PREFIX` and `--trust-key`, what
    /// each channel holds.
    pub async fn read(&self, sources: &[String], fleet: Option<&Membership>, env: Option<&str>, client: &RegistryClient) -> anyhow::Result<(Reading, BTreeMap<Group, Target>)> {
        let policy = self.trust.optional_policy()?;
        let reading = read(sources, fleet, policy.as_ref(), client).await?;
        let heads = match &policy {
            Some(p) if !self.prefixes.is_empty() => {
                let groups: Vec<Group> = crate::fleet::groups::all(&reading, fleet, env).into_iter().map(|(g, _)| g).collect();
                channel_heads(&self.prefixes, &groups, p, client).await
            }
            _ => BTreeMap::new(),
        };
        Ok((reading, heads))
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
    /// The Fleet file (the platform's fleet.yaml): the clusters it declares for the channel must be ready, whatever the registry holds.
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<PathBuf>,
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
                    ("--fleet", self.fleet.is_some()),
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
            soak: parse_duration("--soak", self.soak.as_deref().unwrap_or("0s")).map_err(fleet_error)?,
            stale: parse_duration("--stale", self.stale.as_deref().unwrap_or("15m")).map_err(fleet_error)?,
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
/// reports against the clusters `--fleet` declares, or else its roster verified with
/// `policy`.
pub async fn gate(args: &GateArgs, rule: &Rule, what: Judged<'_>, policy: &TrustPolicy, client: &RegistryClient) -> anyhow::Result<Verdict> {
    let Judged { source, channel, digest, config } = what;
    let repo = args.reports_for(source)?;
    let membership = args.fleet.as_deref().map(membership).transpose()?;
    let reading = read(std::slice::from_ref(&repo), membership.as_ref(), Some(policy), client).await?;
    let cand = Candidate {
        channel: channel.to_string(),
        cluster_type: config.cluster_type.clone(),
        environment: config.environment.clone(),
        digest: digest.to_string(),
        sequence: config.sequence,
    };
    Ok(gate::evaluate(&reading, membership.as_ref(), &cand, rule, drover_proto::time::now_unix()))
}
