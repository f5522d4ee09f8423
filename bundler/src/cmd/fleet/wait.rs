//! `drover fleet wait REPO:CHANNEL [--require-healthy 100%] [--min-clusters N] [--soak 15m]
//! [--timeout 30m]`: polls the channel and the reports until the health gate passes for
//! the bundle the channel holds (exit 0), or the timeout ends (exit 1, naming the
//! clusters that hold it back). If the channel moves meanwhile, the new bundle is waited
//! for.

use std::time::{Duration, Instant};

use anyhow::Context;
use drover_proto::channel::promote::verified_source;
use drover_proto::trust::TrustPolicy;

use crate::fleet::gate::Verdict;
use crate::fleet::{human, parse_duration, short_digest};
use serde::Serialize;

use crate::output::{note, Report, Text};
use crate::regargs::RegistryArgs;
use crate::signing::open_reference;

use super::args::{channel_of, fleet_error, gate, GateArgs, Judged};

/// Arguments of `drover fleet wait`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel whose clusters to wait for: HOST/REPO:CHANNEL (e.g. …/edge:prod-ring0).
    pub channel: String,
    /// The gate (--require-healthy defaults to 100% here).
    #[command(flatten)]
    pub gate: GateArgs,
    /// The release key(s): the channel's bundle must verify with them, and the fleet roster
    /// the reports are judged by must be signed with them.
    #[command(flatten)]
    pub trust: crate::trustargs::TrustArgs,
    /// Give up after this long (exit 1).
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub timeout: String,
    /// Check this often.
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    pub interval: String,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// One look at the channel and its reports.
async fn round(args: &Args, rule: &crate::fleet::gate::Rule, policy: &TrustPolicy, client: &drover_proto::RegistryClient) -> anyhow::Result<Verdict> {
    let (repo, lookup, _) = open_reference(&args.channel, client, false)?;
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{} names no channel tag (add :CHANNEL)", args.channel))?;
    let channel = channel_of(&args.channel, &lookup)?;
    let head = verified_source(&repo, &lookup, policy).await.with_context(|| format!("reading {}", args.channel))?;
    let what = Judged { source: &args.channel, channel: &channel, digest: &head.digest, config: &head.config };
    gate(&args.gate, rule, what, policy, client).await
}

/// Waits for the gate; the last verdict, passed or not.
pub async fn wait(args: &Args) -> anyhow::Result<Verdict> {
    let rule = args.gate.rule(Some(100.0))?.expect("a default percentage");
    let policy = args.trust.policy()?;
    let timeout = parse_duration("--timeout", &args.timeout).map_err(fleet_error)?;
    let interval = parse_duration("--interval", &args.interval).map_err(fleet_error)?.max(Duration::from_millis(200));
    let client = args.registry.client_for(&[&args.channel])?;
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let v = round(args, &rule, &policy, &client).await?;
        if v.passed || started.elapsed() + interval > timeout {
            return Ok(v);
        }
        let now = format!("{} of {} ready ({} needed) on sequence {}", v.ready, v.clusters, v.required, v.candidate.sequence);
        if now != last {
            note(format_args!("waiting: {now}; {} elapsed", human(started.elapsed().as_secs() as i64)));
            last = now;
        }
        tokio::time::sleep(interval).await;
    }
}

/// Writes a verdict as a table: one row per cluster (its class and why), then the
/// reports not counted.
pub fn write_verdict(v: &Verdict, out: &mut Text) {
    let rows: Vec<Vec<String>> = v
        .details
        .iter()
        .map(|d| {
            let last = match (&d.classification.last_result, d.classification.last_reason.as_deref().filter(|r| !r.is_empty())) {
                (Some(r), Some(why)) => format!("{r}: {why}"),
                (Some(r), None) => r.clone(),
                (None, _) => "-".into(),
            };
            vec![format!("{}.{}", v.candidate.cluster_type, d.cluster_name), d.classification.class.as_str().to_string(), d.classification.reason.clone(), last]
        })
        .collect();
    out.table(&["CLUSTER", "CLASS", "WHY", "LAST ATTEMPT"], &rows);
    if !v.not_counted.is_empty() {
        out.line("");
        out.line("Not counted:");
        let rows: Vec<Vec<String>> = v.not_counted.iter().map(|n| vec![n.cluster.clone(), n.reason.clone()]).collect();
        out.table(&["CLUSTER", "WHY"], &rows);
    }
}

/// What `fleet wait` saw last: the verdict (the JSON document), and why it gave up.
#[derive(Debug, Serialize)]
pub struct WaitReport {
    /// The last verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Why the wait failed (timed out), when it did.
    #[serde(skip)]
    pub timed_out: Option<String>,
}

impl Report for WaitReport {
    fn write_text(&self, out: &mut Text) {
        write_verdict(&self.verdict, out);
    }

    fn failure(&self) -> Option<String> {
        self.timed_out.clone()
    }
}

/// Runs `drover fleet wait`: the last verdict; exit 1 when the timeout ended the wait.
pub async fn run(args: Args) -> anyhow::Result<WaitReport> {
    let v = wait(&args).await?;
    let timed_out = if v.passed {
        note(format_args!("ready: {}", v.describe()));
        None
    } else {
        Some(format!("timed out after {} waiting for {} ({}): {}", args.timeout, args.channel, short_digest(&v.candidate.digest), v.describe()))
    };
    Ok(WaitReport { verdict: v, timed_out })
}
