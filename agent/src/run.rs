//! `drover-agent run`: builds the pipeline from the settings, serves HTTP, and loops:
//! poll every interval (with jitter), back off exponentially (with jitter) while the
//! source is unreachable, and on SIGTERM finish or abandon the current stage, flush
//! the database and exit 0.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use drover_proto::registry::{RegistryClient, RegistryOptions};
use drover_proto::trust::TrustPolicy;
use rand::Rng;

use crate::config::{Settings, TargetSpec, DEFAULT_LISTEN};
use crate::metrics::Metrics;
use crate::pipeline::Pipeline;
use crate::shared::Shared;
use crate::plan::Policy;
use crate::statedir::StateDir;
use crate::record::{AttemptResult, Store};
use crate::report::{Observed, Reporter};
use crate::resolve::Source;
use crate::status::Status;
use crate::targets::Target;
use crate::verify::{Expectations, Trust};

/// Opens the configured target.
pub async fn open_target(settings: &Settings) -> anyhow::Result<Arc<dyn Target>> {
    match &settings.target {
        TargetSpec::Dir(p) => Ok(Arc::new(crate::targets::dir::DirTarget::open(p).with_context(|| format!("target dir:{}", p.display()))?)),
        TargetSpec::Kube => {
            use crate::targets::kube::{retry::RetryPolicy, KubeOptions, KubeTarget};
            let opts = KubeOptions {
                force: !settings.no_force,
                concurrency: settings.apply_concurrency,
                impersonate: settings.service_account.as_ref().map(|(ns, name)| format!("system:serviceaccount:{ns}:{name}")),
                state_namespace: settings.agent_namespace.clone(),
                retry: RetryPolicy { request_timeout: settings.api_timeout, ..RetryPolicy::default() },
                ..KubeOptions::default()
            };
            let target = KubeTarget::connect(opts).await.context("target kube")?;
            check_state_namespace(&target, &settings.agent_namespace).await?;
            Ok(Arc::new(target))
        }
    }
}

/// Refuses to start when the agent's namespace is the default `drover-system`
/// (POD_NAMESPACE unset) and does not exist: its anti-rollback floor could never be kept
/// in the cluster, and a new leader would replay an older signed bundle. With
/// `POD_NAMESPACE` set (in a pod, the downward API names the namespace the pod runs in) no
/// request is made; a namespace that is missing then shows as a failed write, a warning
/// as every transient write failure. A check that cannot tell (no `get` on namespaces,
/// the API server unreachable) is a warning too.
async fn check_state_namespace(target: &crate::targets::kube::KubeTarget, namespace: &str) -> anyhow::Result<()> {
    if std::env::var("POD_NAMESPACE").is_ok_and(|s| !s.is_empty()) {
        return Ok(());
    }
    match target.state_namespace_exists().await {
        Ok(true) => Ok(()),
        Ok(false) => anyhow::bail!(
            "the agent's state namespace {namespace} does not exist (POD_NAMESPACE is unset, so the agent uses {namespace}): \
             it keeps its anti-rollback floor and inventory there, and without them a new leader would replay an older \
             signed bundle. Create the namespace {namespace}, or set POD_NAMESPACE to the namespace the agent runs in"
        ),
        Err(e) => {
            tracing::warn!(namespace, "cannot tell whether the agent's state namespace exists: {e}");
            Ok(())
        }
    }
}

/// `value` scaled by a random factor in [1 - spread, 1 + spread].
pub fn jitter(value: Duration, spread: f64) -> Duration {
    let f = rand::rng().random_range((1.0 - spread)..=(1.0 + spread));
    value.mul_f64(f)
}

/// Delay after `failures` consecutive unreachable polls: exponential from
/// min(interval, 5s), capped at max(interval, min(10 x interval, 5 min)), jittered.
pub fn backoff(interval: Duration, failures: u32) -> Duration {
    let base = interval.min(Duration::from_secs(5));
    let cap = interval.max((interval * 10).min(Duration::from_secs(300)));
    let exp = base.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    jitter(exp.min(cap), 0.2)
}

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

/// Sets the agent's role (`single`, `leader`, `standby`) in `/status` and `/metrics`.
fn set_role(shared: &Shared, role: &str) {
    shared.status.lock().expect("status lock").role = role.into();
    shared.metrics.role(role);
}

/// The fleet reporter of the settings (`None`: reporting is off).
fn reporter(settings: &Settings, client: &RegistryClient) -> anyhow::Result<Option<Reporter>> {
    let Some(rs) = &settings.report else {
        tracing::info!("fleet reports off (no --cluster-name, or --no-report)");
        return Ok(None);
    };
    let repo = crate::report::open_repository(rs, client).with_context(|| format!("opening the reports repository {} (--report-to)", rs.to))?;
    let r = Reporter::new(repo, rs.clone());
    tracing::info!(to = %r.describe(), interval = ?rs.interval, "fleet reports on");
    Ok(Some(r))
}

/// The trust policy of the settings.
pub fn trust(settings: &Settings) -> anyhow::Result<Trust> {
    if settings.insecure_skip_verify {
        tracing::warn!("--insecure-skip-verify: bundles are applied WITHOUT signature verification");
        return Ok(Trust::SkipInsecure);
    }
    Ok(Trust::Policy(TrustPolicy::from_files(&settings.trust_keys, settings.threshold).context("loading --trust-key")?))
}

/// The registry client of the settings.
pub fn registry_client(settings: &Settings) -> anyhow::Result<RegistryClient> {
    RegistryClient::new(RegistryOptions { plain_http: settings.plain_http, ca_file: settings.ca_file.clone(), ..Default::default() }).context("registry client")
}

/// The plan policy of the settings.
pub fn policy(settings: &Settings) -> Policy {
    Policy {
        allowed_namespaces: settings.allowed_namespaces.clone(),
        allowed_cluster_kinds: settings.allowed_cluster_kinds.clone(),
        denied_kinds: settings.denied_kinds.clone(),
    }
}

/// Runs the agent until SIGTERM (or one cycle with `once`). Returns the exit code.
pub async fn run(settings: Settings, once: bool) -> anyhow::Result<i32> {
    let trust = trust(&settings)?;
    if settings.expect_cluster_type.is_none() || settings.expect_environment.is_none() {
        tracing::warn!("no --expect-cluster-type/--expect-environment: a signed bundle for any cluster type or environment is accepted");
    }
    let statedir = StateDir::claim(&settings.state_dir, settings.shared_state_parent).context("--state-dir")?;
    let store = Arc::new(Store::open(&settings.state_dir).context("opening --state-dir (is another agent running on it?)")?);
    let client = registry_client(&settings)?;
    let source = Source::open(&settings.source, &settings.reference, &client).with_context(|| format!("source {}", settings.source))?;
    let target = open_target(&settings).await?;
    let state_dir = std::fs::canonicalize(&settings.state_dir).unwrap_or_else(|_| settings.state_dir.clone());
    let mut status = Status {
        source: settings.source.clone(),
        state_dir: state_dir.display().to_string(),
        target: target.describe(),
        role: "single".into(),
        ..Default::default()
    };
    let state = store.source(&settings.source)?;
    status.set_state(&state);
    let observed = Mutex::new(Observed::default());
    crate::report::observe(&observed, &state, None);
    let shared =
        Arc::new(Shared { status: Mutex::new(status), ready: AtomicBool::new(false), metrics: Metrics::new(), store: store.clone(), observed });
    let mut reporter = reporter(&settings, &client)?;
    set_role(&shared, "single");
    let listen = serve_http(&settings, &statedir, once, shared.clone()).await?;
    let listen_text = listen.map(|a| a.to_string()).unwrap_or_else(|| "-".into());
    tracing::info!(source = %settings.source, target = %target.describe(), listen = %listen_text, "drover-agent started");
    let mut pipeline = Pipeline::new(
        source,
        target,
        trust,
        Expectations { cluster_type: settings.expect_cluster_type.clone(), environment: settings.expect_environment.clone() },
        policy(&settings),
        settings.field_manager.clone(),
        settings.max_prune_ratio,
        settings.resync,
        settings.health_timeout,
        shared.clone(),
    );
    pipeline.hold = crate::hold::Gate::new(&settings.state_dir).with_windows(settings.apply_windows.clone());
    pipeline.drift_mode = settings.drift_mode;
    shared.metrics.drifted(state.drifted.len());
    let critical = pipeline.critical.clone();
    let mut election = match &settings.leader_election {
        Some((namespace, name, duration)) => {
            let client = kube::Client::try_default().await.context("--leader-election needs a Kubernetes client (in-cluster or KUBECONFIG)")?;
            Some(crate::leader::Election::spawn(client, crate::leader::LeaseConfig::new(namespace, name, *duration)))
        }
        None => None,
    };
    let stop = terminated();
    tokio::pin!(stop);
    let mut failures = 0u32;
    let code = loop {
        if let Some(el) = election.as_mut() {
            if !el.is_leader() {
                set_role(&shared, "standby");
                shared.ready.store(true, Ordering::Relaxed);
                tracing::info!("standby: another agent holds the leader lease");
                tokio::select! {
                    _ = el.wait_leader() => {}
                    _ = &mut stop => break 0,
                }
            }
            set_role(&shared, "leader");
        }
        let outcome = {
            let cycle = pipeline.cycle();
            tokio::pin!(cycle);
            tokio::select! {
                out = &mut cycle => Some(out),
                _ = &mut stop => {
                    if critical.load(Ordering::SeqCst) {
                        tracing::info!("SIGTERM: finishing the apply in progress");
                        cycle.await;
                    } else {
                        tracing::info!("SIGTERM: abandoning the poll in progress (nothing was changed)");
                    }
                    None
                }
            }
        };
        let Some(out) = outcome else { break 0 };
        crate::memory::trim();
        if let Some(r) = reporter.as_mut() {
            // The key is asked for after a cycle: on the kube target the first apply may
            // be what creates the agent's namespace.
            if r.key_due() {
                match crate::identity::report_key(pipeline.target.as_ref(), &settings.state_dir).await {
                    Ok(k) => r.set_key(k),
                    Err(e) => r.key_failed(&e),
                }
            }
            let obs = shared.observed.lock().expect("observed lock").clone();
            if once {
                r.flush(&obs).await;
            } else {
                r.after_cycle(&obs);
            }
        }
        if once {
            break match out.result {
                AttemptResult::Applied | AttemptResult::Unchanged | AttemptResult::Held if !out.unreachable || shared.ready.load(Ordering::Relaxed) => 0,
                _ => 1,
            };
        }
        failures = if out.unreachable { failures + 1 } else { 0 };
        let delay = if failures > 0 { backoff(settings.interval, failures) } else { jitter(settings.interval, 0.1) };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = &mut stop => { tracing::info!("SIGTERM: stopping"); break 0; }
        }
    };
    if let Some(el) = election {
        el.resign().await;
    }
    // The Events of the last attempts (and pending series counts), bounded.
    pipeline.target.flush_events(Duration::from_secs(5)).await;
    crate::local::close(&statedir);
    if !pipeline.write_unsaved() {
        tracing::error!(
            "stopping with the last attempts not written to {}: the next start begins from the state written last and re-applies the channel's bundle",
            store.path().display()
        );
    }
    store.flush().context("flushing the state database")?;
    tracing::info!("drover-agent stopped");
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let i = Duration::from_secs(30);
        assert!(backoff(i, 1) <= Duration::from_secs(6));
        assert!(backoff(i, 3) >= Duration::from_secs(16));
        assert!(backoff(i, 40) <= Duration::from_secs(360));
    }
}
