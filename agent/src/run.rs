//! `drover-agent run`: one process for every source. It builds what the sources share
//! once — the state database, the registry and Kubernetes clients ([`crate::assemble`]),
//! one HTTP server, one leader election, the metrics registry, the readiness board of
//! `dependsOn` — and one pipeline per source, each driven by its own loop
//! ([`crate::runner`]). On SIGTERM every source finishes or abandons its current stage,
//! the database is flushed and the agent exits 0.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use drover_proto::registry::RegistryClient;

use crate::assemble::Clients;
use crate::config::{Settings, SourceSettings, TargetSpec, DEFAULT_LISTEN};
use crate::depends::Board;
use crate::metrics::Metrics;
use crate::pipeline::Pipeline;
use crate::record::Store;
use crate::report::{Observed, Reporter};
use crate::resolve::Source;
use crate::runner::{Control, ReportKey, Runner};
use crate::shared::{Shared, SourceShared};
use crate::statedir::StateDir;
use crate::status::SourceStatus;
use crate::verify::Expectations;

pub use crate::runner::{backoff, jitter};

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called (not
/// when first awaited): a signal that arrives in between is not lost to the default action.
pub(crate) fn terminated() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Serves the local channel (the socket in the state directory, [`crate::local`]: how
/// `drover-agent status --state-dir DIR` reaches this agent), and HTTP on `--listen`
/// (default [`DEFAULT_LISTEN`]; a one-shot run only when `--listen` is given). Returns
/// the bound address.
async fn serve_http(settings: &Settings, state: &StateDir, once: bool, shared: Arc<Shared>) -> anyhow::Result<Option<SocketAddr>> {
    let (app, probes) = (crate::serve::router(shared.clone()), crate::serve::probes(shared.clone()));
    let local = crate::local::listen(state).with_context(|| format!("cannot listen on {}", state.path().join(crate::local::SOCKET).display()))?;
    tokio::spawn(crate::serve::serve(local, crate::serve::local_router(shared), probes.clone(), crate::serve::Limits::default()));
    let wanted = match settings.listen {
        Some(a) => a,
        None if once => return Ok(None),
        None => DEFAULT_LISTEN.parse().expect("the default listen address parses"),
    };
    let listener = tokio::net::TcpListener::bind(wanted).await.with_context(|| format!("cannot listen on {wanted} (--listen)"))?;
    let bound = listener.local_addr().context("the bound listen address")?;
    tokio::spawn(crate::serve::serve(listener, app, probes, crate::serve::Limits::default()));
    Ok(Some(bound))
}

/// The fleet reporter of source `s` (`None`: reporting is off).
fn reporter(s: &SourceSettings, client: &RegistryClient) -> anyhow::Result<Option<Reporter>> {
    let Some(rs) = &s.report else {
        tracing::info!(source = %s.name, "fleet reports off (no --cluster-name, or --no-report)");
        return Ok(None);
    };
    let repo = crate::report::open_repository(rs, client).with_context(|| format!("opening the reports repository {} (--report-to)", rs.to))?;
    let r = Reporter::new(repo, rs.clone());
    tracing::info!(source = %s.name, to = %r.describe(), interval = ?rs.interval, "fleet reports on");
    Ok(Some(r))
}

/// One source's loop and what the server shows of it.
fn source(settings: &Settings, s: &SourceSettings, clients: &mut Clients, store: &Arc<Store>, metrics: &Arc<Metrics>, board: &Board) -> anyhow::Result<(Runner, Arc<SourceShared>)> {
    let trust = crate::assemble::trust(s)?;
    if s.expect_cluster_type.is_none() || s.expect_environment.is_none() {
        tracing::warn!(source = %s.name, "no --expect-cluster-type/--expect-environment: a signed bundle for any cluster type or environment is accepted");
    }
    let client = clients.registry(s)?;
    let polled = Source::open(&s.source, &s.reference, &client).with_context(|| format!("source {}", s.source))?;
    let target = clients.target(settings, s, false)?;
    let state = store.source(&s.source)?;
    let mut status = SourceStatus { name: s.name.clone(), depends_on: s.depends_on.clone(), ..Default::default() };
    status.set_state(&state);
    let observed = Mutex::new(Observed::default());
    crate::report::observe(&observed, &state, None);
    let sm = metrics.source(&s.name);
    sm.drifted(state.drifted.len());
    let shared = Arc::new(SourceShared {
        name: s.name.clone(),
        source: s.source.clone(),
        status: Mutex::new(status),
        ready: AtomicBool::new(false),
        metrics: sm,
        store: store.clone(),
        observed,
        reconcile: Default::default(),
        report: Default::default(),
    });
    let reporter = reporter(s, &client)?;
    if let Some(r) = &reporter {
        let _ = shared.report.set(r.state());
    }
    let mut pipeline = Pipeline::new(
        polled,
        target,
        trust,
        Expectations { cluster_type: s.expect_cluster_type.clone(), environment: s.expect_environment.clone() },
        crate::assemble::policy(s),
        s.field_manager.clone(),
        s.max_prune_ratio,
        s.resync,
        s.health_timeout,
        shared.clone(),
    );
    pipeline.hold = crate::hold::Gate::new(&settings.state_dir, &s.name).with_windows(s.apply_windows.clone());
    pipeline.drift_mode = s.drift_mode;
    pipeline.health_checks = s.health_checks.clone();
    pipeline.on_degraded = s.on_degraded;
    if let Some(rb) = state.rolled_back.as_ref().filter(|r| !r.released) {
        shared.metrics.show_rolled_back(rb);
    }
    pipeline.named = s.named;
    pipeline.depends = board.gate(&s.depends_on);
    pipeline.readiness = board.sender(&s.name);
    Ok((Runner { pipeline, reporter, interval: s.interval }, shared))
}

/// Keeps the agent's role (and, on standby, readiness: a standby is ready to take over)
/// in step with the election. Never returns.
async fn follow_role(mut leader: tokio::sync::watch::Receiver<bool>, shared: Arc<Shared>) {
    loop {
        if *leader.borrow_and_update() {
            shared.set_role("leader");
        } else {
            shared.set_role("standby");
            for s in &shared.sources {
                s.ready.store(true, Ordering::Relaxed);
            }
            tracing::info!("standby: another agent holds the leader lease");
        }
        if leader.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// How long a starting agent waits for the state database's lock.
const STORE_LOCK_WAIT: Duration = Duration::from_secs(10);

/// Runs the agent until SIGTERM (or one cycle of every source with `once`). Returns the
/// exit code.
pub async fn run(settings: Settings, once: bool) -> anyhow::Result<i32> {
    let statedir = StateDir::claim(&settings.state_dir, settings.shared_state_parent).context("--state-dir")?;
    // A reader (`drover-agent status --state-dir`) holds the lock for a moment; another agent
    // on the same directory holds it for good and is named after the wait.
    let store = Arc::new(Store::open_waiting(&settings.state_dir, STORE_LOCK_WAIT).context("opening --state-dir (is another agent running on it?)")?);
    let mut clients = Clients::new(&settings, true).await?;
    let metrics = Arc::new(Metrics::new());
    let board = Board::new(settings.sources.iter().map(|s| s.name.as_str()));
    let mut runners = Vec::with_capacity(settings.sources.len());
    let mut sources = Vec::with_capacity(settings.sources.len());
    for s in &settings.sources {
        let (runner, shared) = source(&settings, s, &mut clients, &store, &metrics, &board).with_context(|| s.describe())?;
        runners.push(runner);
        sources.push(shared);
    }
    crate::configured::write(&statedir, &settings.sources);
    let state_dir = std::fs::canonicalize(&settings.state_dir).unwrap_or_else(|_| settings.state_dir.clone());
    let target = match (&settings.target, runners.as_slice()) {
        (_, [one]) => one.pipeline.target.describe(),
        (TargetSpec::Dir(root), _) => format!("dir:{} (a directory per source)", root.display()),
        (TargetSpec::Kube, _) => clients.kube().map(|k| k.describe()).unwrap_or_else(|| "kube".into()),
    };
    let shared = Arc::new(Shared { state_dir: state_dir.display().to_string(), target: target.clone(), role: Mutex::new(String::new()), metrics, store: store.clone(), sources });
    shared.set_role("single");
    let listen = serve_http(&settings, &statedir, once, shared.clone()).await?;
    let listen_text = listen.map(|a| a.to_string()).unwrap_or_else(|| "-".into());
    let names: Vec<&str> = settings.sources.iter().map(|s| s.name.as_str()).collect();
    match settings.sources.as_slice() {
        [one] if !one.named => tracing::info!(source = %one.source, target = %target, listen = %listen_text, "drover-agent started"),
        _ => {
            tracing::info!(sources = %names.join(","), target = %target, listen = %listen_text, "drover-agent started");
            for (s, r) in settings.sources.iter().zip(&runners) {
                tracing::info!(source = %s.name, reference = %s.source, target = %r.pipeline.target.describe(), depends_on = %s.depends_on.join(","), "source");
            }
        }
    }
    let election = match &settings.leader_election {
        Some((namespace, name, duration)) => {
            let client = match clients.kube() {
                Some(k) => k.client(),
                None => kube::Client::try_default().await.context("--leader-election needs a Kubernetes client (in-cluster or KUBECONFIG)")?,
            };
            Some(crate::leader::Election::spawn(client, crate::leader::LeaseConfig::new(namespace, name, *duration)))
        }
        None => None,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let key = Arc::new(ReportKey::new(runners[0].pipeline.target.clone(), settings.state_dir.clone()));
    let control = Control { stop: stop_rx, leader: election.as_ref().map(|e| e.subscribe()), key, once };
    // A named source's log lines carry its name (the span `source{name=...}`).
    let named = settings.named();
    let loops = futures::future::join_all(runners.into_iter().map(|r| {
        let span = if named { tracing::info_span!("source", name = %r.pipeline.shared.name) } else { tracing::Span::none() };
        tracing::Instrument::instrument(r.run(control.clone()), span)
    }));
    let leader = election.as_ref().map(|e| e.subscribe());
    let roles = async {
        match leader {
            Some(rx) => follow_role(rx, shared.clone()).await,
            None => std::future::pending().await,
        }
    };
    let signal = terminated();
    tokio::pin!(loops, roles, signal);
    let mut stopping = false;
    let ended = loop {
        tokio::select! {
            ended = &mut loops => break ended,
            _ = &mut signal, if !stopping => {
                stopping = true;
                let _ = stop_tx.send(true);
            }
            _ = &mut roles => {}
        }
    };
    if let Some(el) = election {
        el.resign().await;
    }
    // The Events of the last attempts (and pending series counts), bounded; the kube
    // targets of every source share one recorder.
    if let Some(first) = ended.first() {
        first.pipeline.target.flush_events(Duration::from_secs(5)).await;
    }
    crate::local::close(&statedir);
    let code = if once && !ended.iter().all(|e| e.ok()) { 1 } else { 0 };
    for mut e in ended {
        if !e.pipeline.write_unsaved() {
            tracing::error!(
                source = %e.pipeline.shared.name,
                "stopping with the last attempts not written to {}: the next start begins from the state written last and re-applies the channel's bundle",
                store.path().display()
            );
        }
    }
    store.flush().context("flushing the state database")?;
    tracing::info!("drover-agent stopped");
    Ok(code)
}
