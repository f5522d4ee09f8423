//! `fleet_sim`: the fleet simulation of `bench/fleet-sim.sh` (see `drover_agent::fleetsim`).
//! Prints one JSON document with the seeding time and, per phase, the HEAD latency
//! percentiles the simulated agents measured.
//!
//! ```sh
//! cargo run --release -p drover-agent --example fleet_sim -- \
//!   --source 127.0.0.1:5000/fleet/bench:prod --reports-to 127.0.0.1:5000/fleet/drover-reports
//! ```

use std::time::Duration;

use clap::Parser;
use drover_agent::fleetsim::{run, SimConfig};
use drover_proto::Reference;

/// Simulate a fleet of agents against one registry.
#[derive(Debug, Parser)]
struct Args {
    /// The channel every agent polls.
    #[arg(long)]
    source: String,
    /// Reports repository.
    #[arg(long)]
    reports_to: String,
    /// Agents per phase, comma-separated.
    #[arg(long, default_value = "1000,5000,10000", value_delimiter = ',')]
    phases: Vec<usize>,
    /// Measured window per phase.
    #[arg(long, default_value = "60s")]
    window: String,
    /// Poll interval.
    #[arg(long, default_value = "60s")]
    poll: String,
    /// Report heartbeat interval.
    #[arg(long, default_value = "5m")]
    report_interval: String,
    /// Registry clients (connection pools) the agents share.
    #[arg(long, default_value_t = 100)]
    clients: usize,
    /// Reports written at once while seeding.
    #[arg(long, default_value_t = 64)]
    seed_concurrency: usize,
    /// Cluster type named in the reports.
    #[arg(long, default_value = "bench")]
    cluster_type: String,
    /// Environment named in the reports.
    #[arg(long, default_value = "prod")]
    environment: String,
    /// Measure this process's CPU use per window (the registry's PID).
    #[arg(long)]
    watch_pid: Option<u32>,
}

fn duration(s: &str) -> anyhow::Result<Duration> {
    Ok(humantime::parse_duration(s)?)
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG").unwrap_or_else(|_| "warn".into())).with_writer(std::io::stderr).init();
    let a = Args::parse();
    let cfg = SimConfig {
        source: Reference::parse(&a.source)?,
        reports_to: Reference::parse(&a.reports_to)?,
        cluster_type: a.cluster_type,
        environment: a.environment,
        phases: a.phases,
        window: duration(&a.window)?,
        poll: duration(&a.poll)?,
        report_interval: duration(&a.report_interval)?,
        clients: a.clients,
        seed_concurrency: a.seed_concurrency,
        watch_pid: a.watch_pid,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let result = rt.block_on(run(cfg))?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    Ok(())
}
