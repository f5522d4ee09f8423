//! A fleet in one process, for `bench/fleet-sim.sh` (docs/fleet.md, "Numbers"): N light
//! agents, each running the agent's real poll ([`resolve::resolve`]: one `HEAD`) and its
//! real [`Reporter`] (report built, heartbeat decided and pushed as by `drover-agent
//! run`), without a target or a database. Phases add agents (e.g. 1,000 → 5,000 →
//! 10,000) and measure the registry's `HEAD` latency as the agents see it for a window
//! each. Everything is bounded: it stops after the last window.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_proto::{Reference, RegistryClient, RegistryOptions};
use futures::StreamExt;
use rand::Rng;

use crate::config::ReportSettings;
use crate::record::{AttemptResult, AttemptSummary};
use crate::report::{open_repository, Observed, Reporter};
use crate::resolve::{self, Source};
use crate::targets::Health;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The channel every agent polls (a registry reference with a tag).
    pub source: Reference,
    /// Reports repository (no tag).
    pub reports_to: Reference,
    /// Cluster type and environment the reports name.
    pub cluster_type: String,
    /// Environment the reports name.
    pub environment: String,
    /// Agents active in each phase (increasing), e.g. `[1000, 5000, 10000]`.
    pub phases: Vec<usize>,
    /// Measured window per phase.
    pub window: Duration,
    /// Poll interval of each agent.
    pub poll: Duration,
    /// Heartbeat interval of each agent's reporter.
    pub report_interval: Duration,
    /// Registry clients (connection pools) the agents are spread over.
    pub clients: usize,
    /// Reports written at once while seeding.
    pub seed_concurrency: usize,
    /// A process (the registry) whose CPU use is measured in each window (Linux `/proc`).
    pub watch_pid: Option<u32>,
}

/// One phase's numbers.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    /// Agents active.
    pub agents: usize,
    /// `HEAD` requests measured in the window.
    pub heads: usize,
    /// Failed `HEAD`s.
    pub head_errors: usize,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
    /// Worst latency (ms).
    pub max_ms: f64,
    /// Reports written in the window (heartbeats).
    pub reports: usize,
    /// CPU the watched process (the registry) used in the window, in cores.
    pub registry_cpu_cores: Option<f64>,
    /// CPU this process (the simulated agents) used in the window, in cores.
    pub sim_cpu_cores: Option<f64>,
}

/// CPU time (user + system) of a process so far, in seconds, from `/proc/PID/stat`.
fn cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0) // USER_HZ is 100 on Linux
}

/// The whole run.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimResult {
    /// Reports seeded (one per agent) before the phases.
    pub seeded: usize,
    /// Time the seeding took.
    pub seed_secs: f64,
    /// Per phase.
    pub phases: Vec<Phase>,
}

struct Window {
    open: AtomicBool,
    samples: Mutex<Vec<u32>>,
    errors: AtomicUsize,
    reports: AtomicUsize,
}

struct SimAgent {
    source: Source,
    reporter: Reporter,
    observed: Observed,
}

fn observed(digest: &str) -> Observed {
    Observed {
        applied_digest: Some(digest.to_string()),
        applied_sequence: Some(1),
        health: Some(Health::Healthy),
        last_attempt: Some(AttemptSummary {
            digest: Some(digest.to_string()),
            sequence: Some(1),
            result: AttemptResult::Applied,
            reason: String::new(),
            at: drover_proto::time::now_rfc3339(),
            writes: None,
        }),
        ..Default::default()
    }
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// Builds the agents and writes each one's first report (bounded concurrency).
async fn seed(cfg: &SimConfig, digest: &str) -> anyhow::Result<Vec<SimAgent>> {
    let channel = cfg.source.as_registry().and_then(|r| r.tag.clone()).unwrap_or_default();
    let clients: Vec<RegistryClient> =
        (0..cfg.clients.max(1)).map(|_| RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() })).collect::<Result<_, _>>()?;
    let total = *cfg.phases.iter().max().unwrap_or(&0);
    let mut agents = Vec::with_capacity(total);
    for i in 0..total {
        let client = &clients[i % clients.len()];
        let settings = ReportSettings {
            cluster_name: format!("sim-{i:05}"),
            cluster_type: cfg.cluster_type.clone(),
            environment: cfg.environment.clone(),
            channel: channel.clone(),
            to: cfg.reports_to.clone(),
            interval: cfg.report_interval,
            docker_config: None,
        };
        let source = Source::open(&cfg.source.to_string(), &cfg.source, client)?;
        let mut reporter = Reporter::new(open_repository(&settings, client)?, settings);
        // Each simulated cluster has its own report key, as every agent does.
        reporter.set_key(drover_proto::keys::PrivateKey::generate().map_err(|e| anyhow::anyhow!("report key: {e}"))?);
        agents.push(SimAgent { source, reporter, observed: observed(digest) });
    }
    let agents: Vec<SimAgent> = futures::stream::iter(agents.into_iter().map(|mut a| async move {
        a.reporter.flush(&a.observed).await;
        a
    }))
    .buffer_unordered(cfg.seed_concurrency.max(1))
    .collect()
    .await;
    Ok(agents)
}

/// One agent's loop: poll at a random phase of the interval, then every interval ±10 %.
async fn agent_loop(mut a: SimAgent, poll: Duration, report_interval: Duration, window: Arc<Mutex<Arc<Window>>>, stop: Arc<AtomicBool>) {
    // Steady state: its last report was written at a random time within the interval.
    let (age, first) = {
        let mut rng = rand::rng();
        (report_interval.mul_f64(rng.random_range(0.0..1.0)), poll.mul_f64(rng.random_range(0.0..1.0)))
    };
    a.reporter.pretend_last_write(age);
    tokio::time::sleep(first).await;
    while !stop.load(Ordering::Relaxed) {
        let w = window.lock().expect("window").clone();
        let started = Instant::now();
        let ok = resolve::resolve(&mut a.source).await.is_ok();
        let took = started.elapsed();
        if w.open.load(Ordering::Relaxed) {
            if ok {
                w.samples.lock().expect("samples").push(took.as_micros().min(u32::MAX as u128) as u32);
            } else {
                w.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        if a.reporter.after_cycle(&a.observed) && w.open.load(Ordering::Relaxed) {
            w.reports.fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(crate::run::jitter(poll, 0.1)).await;
    }
}

/// Opens a fresh window for the agents, waits `length`, closes it and returns its numbers.
async fn measure(window: &Mutex<Arc<Window>>, length: Duration, agents: usize, watch_pid: Option<u32>) -> Phase {
    let watched = watch_pid.map(|p| p.to_string());
    let cpu_before = (watched.as_deref().and_then(cpu_secs), cpu_secs("self"));
    let opened = Instant::now();
    let w = Arc::new(Window { open: AtomicBool::new(true), samples: Mutex::new(Vec::new()), errors: AtomicUsize::new(0), reports: AtomicUsize::new(0) });
    *window.lock().expect("window") = w.clone();
    tokio::time::sleep(length).await;
    w.open.store(false, Ordering::Relaxed);
    let secs = opened.elapsed().as_secs_f64();
    let cores = |before: Option<f64>, pid: Option<&str>| Some((cpu_secs(pid?)? - before?) / secs);
    let mut samples = std::mem::take(&mut *w.samples.lock().expect("samples"));
    samples.sort_unstable();
    Phase {
        agents,
        heads: samples.len(),
        head_errors: w.errors.load(Ordering::Relaxed),
        p50_ms: percentile(&samples, 0.50),
        p99_ms: percentile(&samples, 0.99),
        max_ms: percentile(&samples, 1.0),
        reports: w.reports.load(Ordering::Relaxed),
        registry_cpu_cores: cores(cpu_before.0, watched.as_deref()),
        sim_cpu_cores: cores(cpu_before.1, Some("self")),
    }
}

/// Runs the simulation: seeds every agent's report, then for each phase starts the
/// phase's new agents, lets them settle for one poll interval, measures for the window.
pub async fn run(cfg: SimConfig) -> anyhow::Result<SimResult> {
    let Some(source) = cfg.source.as_registry() else { anyhow::bail!("the simulation polls a registry reference") };
    let probe = RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() })?;
    let digest = probe.head(source).await?.ok_or_else(|| anyhow::anyhow!("{source} does not exist: push a bundle first"))?;
    let started = Instant::now();
    let agents = seed(&cfg, &digest).await?;
    let seeded = agents.len();
    let seed_secs = started.elapsed().as_secs_f64();
    let stop = Arc::new(AtomicBool::new(false));
    let closed = Window { open: AtomicBool::new(false), samples: Mutex::new(Vec::new()), errors: AtomicUsize::new(0), reports: AtomicUsize::new(0) };
    let window = Arc::new(Mutex::new(Arc::new(closed)));
    let mut pending = agents.into_iter();
    let mut active = 0;
    let mut phases = Vec::new();
    let mut handles = Vec::new();
    for &n in &cfg.phases {
        for a in pending.by_ref().take(n.saturating_sub(active)) {
            handles.push(tokio::spawn(agent_loop(a, cfg.poll, cfg.report_interval, window.clone(), stop.clone())));
        }
        active = n.max(active);
        tokio::time::sleep(cfg.poll).await; // every new agent has polled once
        phases.push(measure(&window, cfg.window, active, cfg.watch_pid).await);
        tracing::info!(?phases, "phase done");
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.abort();
    }
    Ok(SimResult { seeded, seed_secs, phases })
}
