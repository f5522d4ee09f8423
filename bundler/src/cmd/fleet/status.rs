//! `drover fleet status --registry PREFIX [--env E] [--stale 15m] [-o json]`: every
//! report, one row per cluster, and a summary per (environment, cluster type, channel).

use crate::fleet::status::{build, Status};
use crate::fleet::{age, human, load, short_digest};
use crate::output::{warn, Report, Text};
use crate::regargs::RegistryArgs;

use super::args::ReportsArgs;

/// Arguments of `drover fleet status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the reports are.
    #[command(flatten)]
    pub reports: ReportsArgs,
    /// Only this environment.
    #[arg(long, visible_alias = "environment", value_name = "ENV")]
    pub env: Option<String>,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Reads the reports and builds the status.
pub async fn status(args: &Args) -> anyhow::Result<Status> {
    let sources = args.reports.sources()?;
    let stale = args.reports.stale_secs()?;
    let client = args.registry.client_for(&sources)?;
    let policy = args.reports.trust.policy()?;
    let (reports, unreadable) = load(&sources, &client, &policy).await?;
    for u in unreadable {
        warn(format_args!("skipped {}: {}", u.name, u.reason));
    }
    Ok(build(&reports, args.env.as_deref(), drover_proto::time::now_unix(), stale))
}

/// Runs `drover fleet status`.
pub async fn run(args: Args) -> anyhow::Result<Status> {
    status(&args).await
}

impl Report for Status {
    fn write_text(&self, out: &mut Text) {
        write_text(self, out);
    }
}

fn write_text(st: &Status, out: &mut Text) {
    let now = drover_proto::time::now_unix();
    let opt = |s: Option<String>| s.unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = st
        .clusters
        .iter()
        .map(|c| {
            vec![
                format!("{}.{}", c.cluster_type, c.cluster_name),
                c.environment.clone(),
                c.channel.clone(),
                opt(c.applied_sequence.map(|s| s.to_string())),
                opt(c.applied_digest.as_deref().map(short_digest)),
                match (&c.untrusted, c.stale) {
                    (Some(_), _) => format!("{} (UNTRUSTED)", c.health),
                    (None, true) => format!("{} (STALE)", c.health),
                    (None, false) => c.health.to_string(),
                },
                opt(c.last_result.clone()),
                match age(&c.reported_at, now) {
                    Some(a) if a < 0 => format!("{} (in the future)", c.reported_at),
                    Some(a) => format!("{} ago", human(a)),
                    None => c.reported_at.clone(),
                },
            ]
        })
        .collect();
    out.table(&["CLUSTER", "ENV", "CHANNEL", "SEQUENCE", "DIGEST", "HEALTH", "LAST", "REPORTED"], &rows);
    out.line("");
    let rows: Vec<Vec<String>> = st
        .summary
        .iter()
        .map(|s| {
            let seqs: Vec<String> = s.sequences.iter().map(|a| format!("{}×{}", opt(a.sequence.map(|x| x.to_string())), a.clusters)).collect();
            vec![
                s.environment.clone(),
                s.cluster_type.clone(),
                s.channel.clone(),
                s.clusters.to_string(),
                seqs.join(" "),
                s.healthy.to_string(),
                s.progressing.to_string(),
                s.degraded.to_string(),
                s.stale.to_string(),
                s.untrusted.to_string(),
            ]
        })
        .collect();
    out.table(&["ENV", "TYPE", "CHANNEL", "CLUSTERS", "SEQUENCE×CLUSTERS", "HEALTHY", "PROGRESSING", "DEGRADED", "STALE", "UNTRUSTED"], &rows);
    let untrusted: Vec<Vec<String>> = st
        .clusters
        .iter()
        .filter_map(|c| c.untrusted.as_ref().map(|why| vec![format!("{}.{}", c.cluster_type, c.cluster_name), why.clone()]))
        .collect();
    if !untrusted.is_empty() {
        out.line("");
        out.line("Untrusted reports (shown, never counted):");
        out.table(&["CLUSTER", "WHY"], &untrusted);
    }
}
