//! `drover fleet status --registry PREFIX [--fleet FILE] [--env E] [--stale 15m] [-o json]`:
//! one row per cluster (every declared cluster, with `--fleet`) classified for its
//! channel, a summary per (environment, cluster type, channel), and the reports that count
//! nowhere, listed apart.

use crate::fleet::classify::Class;
use crate::fleet::status::{build, Status};
use crate::fleet::{age, human, short_digest};
use crate::output::{Report, Text};
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
    let bar = args.reports.bar()?;
    let membership = args.reports.membership()?;
    let client = args.registry.client_for(&sources)?;
    let (reading, heads) = args.reports.read(&sources, membership.as_ref(), args.env.as_deref(), &client).await?;
    Ok(build(&reading, membership.as_ref(), args.env.as_deref(), &bar, &heads, drover_proto::time::now_unix()))
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
            let class = match c.class {
                Class::Missing => "MISSING".to_string(),
                Class::Untrusted => "UNTRUSTED".to_string(),
                Class::Stale => "STALE".to_string(),
                other => other.as_str().to_string(),
            };
            vec![
                format!("{}.{}", c.cluster_type, c.cluster_name),
                c.environment.clone(),
                c.channel.clone(),
                opt(c.applied_sequence.map(|s| s.to_string())),
                opt(c.applied_digest.as_deref().map(short_digest)),
                c.health.to_string(),
                class,
                {
                    let last = match (&c.last_result, c.last_reason.as_deref().filter(|r| !r.is_empty())) {
                        (Some(r), Some(why)) => format!("{r}: {why}"),
                        (Some(r), None) => r.clone(),
                        (None, _) => "-".into(),
                    };
                    match &c.rolled_back {
                        Some(rb) => format!("{last} (rolled back from {} {} to {})", rb.sequence, short_digest(&rb.digest), short_digest(&rb.to_digest)),
                        None => last,
                    }
                },
                match c.reported_at.as_deref().map(|at| (at, age(at, now))) {
                    Some((at, Some(a))) if a < 0 => format!("{at} (in the future)"),
                    Some((_, Some(a))) => format!("{} ago", human(a)),
                    Some((at, None)) => at.to_string(),
                    None => "never".into(),
                },
            ]
        })
        .collect();
    out.table(&["CLUSTER", "ENV", "CHANNEL", "SEQUENCE", "DIGEST", "HEALTH", "CLASS", "LAST", "REPORTED"], &rows);
    out.line("");
    let rows: Vec<Vec<String>> = st
        .summary
        .iter()
        .map(|s| {
            let seqs: Vec<String> = s.sequences.iter().map(|a| format!("{}×{}", opt(a.sequence.map(|x| x.to_string())), a.clusters)).collect();
            let waiting: Vec<String> = s.classes.iter().filter(|(c, _)| **c != "ready").map(|(c, n)| format!("{n} {c}")).collect();
            vec![
                s.environment.clone(),
                s.cluster_type.clone(),
                s.channel.clone(),
                s.clusters.to_string(),
                seqs.join(" "),
                s.ready.to_string(),
                if waiting.is_empty() { "-".into() } else { waiting.join(", ") },
            ]
        })
        .collect();
    out.table(&["ENV", "TYPE", "CHANNEL", "CLUSTERS", "SEQUENCE×CLUSTERS", "READY", "NOT READY"], &rows);
    let why: Vec<Vec<String>> = st
        .clusters
        .iter()
        .filter(|c| c.class != Class::Ready)
        .map(|c| vec![format!("{}.{}", c.cluster_type, c.cluster_name), c.reason.clone()])
        .collect();
    if !why.is_empty() {
        out.line("");
        out.line("Not ready:");
        out.table(&["CLUSTER", "WHY"], &why);
    }
    if st.untrusted.reports > 0 {
        let named: Vec<Vec<String>> = st.untrusted.named.iter().map(|n| vec![n.cluster.clone(), n.channel.clone(), n.reason.clone()]).collect();
        out.line("");
        let more = st.untrusted.reports - named.len();
        let more = if more > 0 { format!("; {more} more not named") } else { String::new() };
        out.line(format!("Not counted ({} report(s){more}; never counted in any gate):", st.untrusted.reports));
        out.table(&["CLUSTER", "CHANNEL", "WHY"], &named);
    }
}
