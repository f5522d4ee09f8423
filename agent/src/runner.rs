//! One source's loop in `drover-agent run`: it polls on its own interval (jittered, so
//! sources with the same interval do not drift into lockstep) and backs off exponentially
//! (with jitter) while its source is unreachable, independently of every other source: a
//! registry that stalls one source's request never delays another's poll. While the
//! agent stands by (leader election) it waits; while its new bundle waits for a
//! dependency it also wakes as soon as a dependency's readiness changes. After each poll
//! it hands its report to its reporter. On the stop signal it finishes the apply in
//! progress (or abandons a poll that changed nothing yet).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use drover_proto::keys::PrivateKey;
use rand::Rng;
use tokio::sync::{watch, OnceCell};

use crate::pipeline::{CycleOutcome, Pipeline};
use crate::record::AttemptResult;
use crate::report::Reporter;
use crate::targets::Target;

/// What the attempt that just ended did, for the reconcile requests it answers.
fn reconciled(shared: &crate::shared::SourceShared, result: AttemptResult) -> crate::reconcile::Reconciled {
    let st = shared.status.lock().expect("status lock");
    crate::reconcile::Reconciled {
        source: shared.source.clone(),
        result,
        last_attempt: st.last_attempt.clone(),
        applied_digest: st.applied_digest.clone(),
        applied_sequence: st.applied_sequence,
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

/// The cluster's report key, got once for every source's reporter (the first that needs
/// it asks the target; a failed try is tried again by the next).
pub struct ReportKey {
    cell: OnceCell<Arc<PrivateKey>>,
    target: Arc<dyn Target>,
    state_dir: PathBuf,
}

impl ReportKey {
    /// The key kept by `target` (else in `state_dir`).
    pub fn new(target: Arc<dyn Target>, state_dir: PathBuf) -> Self {
        ReportKey { cell: OnceCell::new(), target, state_dir }
    }

    async fn get(&self) -> Result<Arc<PrivateKey>, String> {
        self.cell.get_or_try_init(|| async { crate::identity::report_key(self.target.as_ref(), &self.state_dir).await.map(Arc::new) }).await.cloned()
    }
}

/// What every source's loop shares.
#[derive(Clone)]
pub struct Control {
    /// Becomes true on SIGTERM/SIGINT.
    pub stop: watch::Receiver<bool>,
    /// With leader election: true while this agent leads.
    pub leader: Option<watch::Receiver<bool>>,
    /// The cluster's report key.
    pub key: Arc<ReportKey>,
    /// One cycle and out (`run --once`).
    pub once: bool,
}

/// One source: its pipeline, its reporter, its interval.
pub struct Runner {
    /// The pipeline.
    pub pipeline: Pipeline,
    /// Its fleet reporter, when reporting is on.
    pub reporter: Option<Reporter>,
    /// Its poll interval.
    pub interval: Duration,
}

/// How a source's loop ended: its pipeline (to write what is unsaved) and, with `--once`,
/// its one cycle's outcome.
pub struct Ended {
    /// The pipeline.
    pub pipeline: Pipeline,
    /// The outcome of the `--once` cycle (None: stopped before it ended).
    pub outcome: Option<CycleOutcome>,
}

impl Ended {
    /// True when a `--once` run of this source succeeded: applied, unchanged, held or
    /// rolled back, and not unreachable unless the cached bundle was put back.
    pub fn ok(&self) -> bool {
        match self.outcome {
            Some(out) => {
                matches!(out.result, AttemptResult::Applied | AttemptResult::Unchanged | AttemptResult::Held | AttemptResult::RolledBack)
                    && (!out.unreachable || self.pipeline.shared.ready.load(Ordering::Relaxed))
            }
            None => false,
        }
    }
}

async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

impl Runner {
    /// Runs the source until the stop signal (or one cycle with `once`).
    pub async fn run(mut self, mut ctl: Control) -> Ended {
        let name = self.pipeline.shared.name.clone();
        let critical = self.pipeline.critical.clone();
        let mut failures = 0u32;
        loop {
            if let Some(leader) = ctl.leader.as_mut() {
                if !*leader.borrow() {
                    tokio::select! {
                        r = leader.wait_for(|l| *l) => if r.is_err() { break; },
                        _ = stopped(&mut ctl.stop) => break,
                    }
                }
            }
            let shared = self.pipeline.shared.clone();
            shared.reconcile.started();
            let outcome = {
                let cycle = self.pipeline.cycle();
                tokio::pin!(cycle);
                tokio::select! {
                    out = &mut cycle => Some(out),
                    _ = stopped(&mut ctl.stop) => {
                        if critical.load(Ordering::SeqCst) {
                            tracing::info!(source = %name, "SIGTERM: finishing the apply in progress");
                            cycle.await;
                        } else {
                            tracing::info!(source = %name, "SIGTERM: abandoning the poll in progress (nothing was changed)");
                        }
                        None
                    }
                }
            };
            let Some(out) = outcome else { break };
            shared.reconcile.finished(reconciled(&shared, out.result));
            crate::memory::trim();
            self.report(&ctl).await;
            if ctl.once {
                return Ended { pipeline: self.pipeline, outcome: Some(out) };
            }
            failures = if out.unreachable { failures + 1 } else { 0 };
            let delay = if failures > 0 { backoff(self.interval, failures) } else { jitter(self.interval, 0.1) };
            let waiting = out.result == AttemptResult::Waiting;
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shared.reconcile.requested() => tracing::info!(source = %name, "reconcile requested: polling now"),
                _ = self.pipeline.depends.changed(), if waiting => {
                    tracing::debug!(source = %name, "a dependency changed: polling again");
                }
                _ = stopped(&mut ctl.stop) => { tracing::info!(source = %name, "SIGTERM: stopping"); break; }
            }
        }
        Ended { pipeline: self.pipeline, outcome: None }
    }

    /// After a cycle: the report key when still needed, then the report (written in the
    /// background; with `--once` before returning).
    async fn report(&mut self, ctl: &Control) {
        let Some(r) = self.reporter.as_mut() else { return };
        // The key is asked for after a cycle: on the kube target the first apply may be
        // what creates the agent's namespace.
        if r.key_due() {
            match ctl.key.get().await {
                Ok(k) => r.set_shared_key(k),
                Err(e) => r.key_failed(&e),
            }
        }
        let obs = self.pipeline.shared.observed.lock().expect("observed lock").clone();
        if ctl.once {
            r.flush(&obs).await;
        } else {
            r.after_cycle(&obs);
        }
    }
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
