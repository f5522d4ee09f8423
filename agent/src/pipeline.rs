//! One poll of the pipeline:
//! `resolve -> fetch -> verify -> unpack -> plan -> apply -> wait -> prune -> record`.
//! Each stage is a module with a typed input and output; this module wires them and
//! decides what is recorded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use drover_proto::object::ObjectRef;
use drover_proto::time::now_rfc3339;

use crate::metrics::Metrics;
use crate::plan::Policy;
use crate::record::{Attempt, AttemptResult, AttemptSummary, SourceState, Store};
use crate::resolve::Source;
use crate::status::Status;
use crate::targets::{Action, Health, ObjectOutcome, Target};
use crate::shared::Shared;
use crate::stage::StageError;
use crate::verify::{Expectations, Trust};
use crate::{apply, fetch, plan, prune, resolve, unpack, verify, wait};

/// What one cycle ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleOutcome {
    /// The attempt's result.
    pub result: AttemptResult,
    /// True when the source was unreachable (the run loop backs off).
    pub unreachable: bool,
}

/// Everything the pipeline needs, built once at start.
pub struct Pipeline {
    /// The source.
    pub source: Source,
    /// The target.
    pub target: Arc<dyn Target>,
    /// Signature policy.
    pub trust: Trust,
    /// Expected cluster type / environment.
    pub expect: Expectations,
    /// Plan policy.
    pub policy: Policy,
    /// SSA field manager.
    pub field_manager: String,
    /// Prune safety valve.
    pub max_prune_ratio: f64,
    /// Resync interval.
    pub resync: std::time::Duration,
    /// Wait bound.
    pub health_timeout: std::time::Duration,
    /// Shared with the server.
    pub shared: Arc<Shared>,
    /// Set while the target is being changed (SIGTERM then waits for the cycle).
    pub critical: Arc<AtomicBool>,
    last_apply: Option<Instant>,
    rejected: Option<(String, &'static str)>,
}

struct Attempted {
    digest: String,
    sequence: Option<u64>,
    stage: &'static str,
    resync: bool,
}

impl Pipeline {
    /// Assembles a pipeline.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: Source,
        target: Arc<dyn Target>,
        trust: Trust,
        expect: Expectations,
        policy: Policy,
        field_manager: String,
        max_prune_ratio: f64,
        resync: std::time::Duration,
        health_timeout: std::time::Duration,
        shared: Arc<Shared>,
    ) -> Self {
        Pipeline {
            source,
            target,
            trust,
            expect,
            policy,
            field_manager,
            max_prune_ratio,
            resync,
            health_timeout,
            shared,
            critical: Arc::new(AtomicBool::new(false)),
            last_apply: None,
            rejected: None,
        }
    }

    fn store(&self) -> &Store {
        &self.shared.store
    }

    fn publish(&self, state: &SourceState, f: impl FnOnce(&mut Status)) {
        let mut st = self.shared.status.lock().expect("status lock");
        st.set_state(state);
        st.last_poll_at = Some(now_rfc3339());
        f(&mut st);
    }

    /// Runs one poll.
    pub async fn cycle(&mut self) -> CycleOutcome {
        let name = self.source.name.clone();
        let state = match self.store().source(&name) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{e}");
                return CycleOutcome { result: AttemptResult::Failed, unreachable: false };
            }
        };
        let resync_due = self.last_apply.is_none_or(|t| t.elapsed() >= self.resync);
        let digest = match resolve::resolve(&mut self.source).await {
            Ok(d) => d,
            Err(e) => {
                // Offline start: put the applied bundle back from the cache and become ready.
                if let (None, Some(applied)) = (self.last_apply, state.applied_digest.clone()) {
                    if fetch::from_cache(self.store(), &name, &applied).ok().flatten().is_some() {
                        tracing::warn!("{}; re-applying the cached bundle {applied}", e.message());
                        let note = format!("source unreachable ({}); re-applied the cached bundle", e.message());
                        let mut out = self.process(applied, state, Some(note)).await;
                        out.unreachable = true;
                        return out;
                    }
                }
                // `finish` logs the error (once).
                self.finish(&state, Attempted { digest: String::new(), sequence: None, stage: "resolve", resync: false }, Err(e), Vec::new());
                return CycleOutcome { result: AttemptResult::Failed, unreachable: true };
            }
        };
        if state.applied_digest.as_deref() == Some(digest.as_str()) && !resync_due {
            tracing::debug!("{digest} unchanged");
            self.shared.metrics.poll("Unchanged");
            self.shared.ready.store(true, Ordering::Relaxed);
            self.publish(&state, |st| {
                st.consecutive_failures = 0;
                st.last_attempt = Some(AttemptSummary {
                    digest: Some(digest.clone()),
                    sequence: state.applied_sequence,
                    result: AttemptResult::Unchanged,
                    reason: String::new(),
                    at: now_rfc3339(),
                });
            });
            return CycleOutcome { result: AttemptResult::Unchanged, unreachable: false };
        }
        if let Some((d, reason)) = &self.rejected {
            // A refused digest is not fetched again until resync, unless signatures may still arrive.
            if d == &digest && !resync_due && !matches!(*reason, "unsigned" | "signature") {
                self.shared.metrics.poll("Rejected");
                self.publish(&state, |_| {});
                return CycleOutcome { result: AttemptResult::Rejected, unreachable: false };
            }
        }
        self.process(digest, state, None).await
    }

    /// Runs fetch..record for `digest`.
    async fn process(&mut self, digest: String, state: SourceState, note: Option<String>) -> CycleOutcome {
        let resync = state.applied_digest.as_deref() == Some(digest.as_str());
        let mut at = Attempted { digest: digest.clone(), sequence: None, stage: "fetch", resync };
        let fetched = match fetch::fetch(&self.source, self.store(), &digest).await {
            Ok(f) => f,
            Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
        };
        at.sequence = Some(fetched.bundle.config.sequence);
        at.stage = "verify";
        let from_cache = fetched.from_cache;
        let verified =
            match verify::verify(self.source.repo(), fetched.bundle, &self.trust, resync, &self.expect, &state).await {
                Ok(v) => v,
                Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
            };
        if !from_cache {
            if let Err(e) = fetch::cache(self.store(), &self.source.name, &verified.bundle) {
                tracing::warn!("caching {digest}: {}", e.message());
            }
        }
        let allow_mass_prune = verified.bundle.config.allow_mass_prune;
        at.stage = "unpack";
        let unpacked = match unpack::unpack(verified, self.target.needs_values()) {
            Ok(u) => u,
            Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
        };
        at.stage = "plan";
        let req = match plan::plan(unpacked, &self.policy, &self.source.name, &self.field_manager) {
            Ok(r) => r,
            Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
        };
        at.stage = "apply";
        self.critical.store(true, Ordering::SeqCst);
        let out = self.change(req, state, at, allow_mass_prune, note).await;
        self.critical.store(false, Ordering::SeqCst);
        out
    }

    /// apply -> wait -> prune -> record.
    async fn change(
        &mut self,
        req: crate::targets::ApplyRequest,
        state: SourceState,
        mut at: Attempted,
        allow_mass_prune: bool,
        note: Option<String>,
    ) -> CycleOutcome {
        let target = self.target.clone();
        let report = match apply::apply(target.as_ref(), &req).await {
            Ok(r) => r,
            Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
        };
        count_outcomes(&self.shared.metrics, &report.outcomes);
        if report.failed() {
            self.shared.metrics.apply("Failed");
            let first = report.first_failure().map(|o| format!("{}: {}", o.object, o.message)).unwrap_or_default();
            let mut state = state;
            // Objects the failed apply did create belong to us: keep them in the inventory.
            let mut inv = state.inventory.clone();
            for o in report.outcomes.iter().filter(|o| o.action == Action::Created) {
                push_unique(&mut inv, &o.object);
            }
            state.inventory = inv;
            let e = StageError::Failed(format!("apply of {} failed; nothing pruned: {first}", req.digest));
            return self.finish(&state, at, Err(e), report.outcomes);
        }
        at.stage = "wait";
        let health = wait::wait(target.as_ref(), &req, self.health_timeout).await;
        at.stage = "prune";
        let mut outcomes = report.outcomes.clone();
        let mut inventory: Vec<ObjectRef> = req.objects().map(|o| o.id.clone()).collect();
        let mut reasons: Vec<String> = note.into_iter().collect();
        let mut pruned = 0;
        let mut prune_refused = false;
        match prune::decide(&state.inventory, &req, self.max_prune_ratio, allow_mass_prune) {
            prune::Decision::Nothing => {}
            prune::Decision::Refused { candidates, message } => {
                tracing::warn!("{message}");
                self.shared.metrics.prune_refused();
                prune_refused = true;
                for c in candidates {
                    outcomes.push(ObjectOutcome::with(c.clone(), Action::Refused, "prune safety valve"));
                    push_unique(&mut inventory, &c);
                }
                reasons.push(message);
            }
            prune::Decision::Prune(preq) => match prune::prune(target.as_ref(), &preq).await {
                Ok(rep) => {
                    pruned = rep.deleted();
                    self.shared.metrics.pruned(pruned as u64);
                    count_outcomes(&self.shared.metrics, &rep.outcomes);
                    for o in rep.remaining() {
                        push_unique(&mut inventory, o);
                    }
                    outcomes.extend(rep.outcomes);
                }
                Err(e) => {
                    for c in &preq.delete {
                        push_unique(&mut inventory, c);
                    }
                    reasons.push(e.message().to_string());
                }
            },
        }
        at.stage = "record";
        let drift = if at.resync { report.changed() } else { 0 };
        if drift > 0 {
            tracing::warn!("resync corrected drift on {drift} object(s)");
            self.shared.metrics.drift(drift as u64);
        }
        self.shared.metrics.apply("Applied");
        self.shared.metrics.applied(&self.source.name, &req.digest, req.sequence);
        let mut state = state;
        state.applied_digest = Some(req.digest.clone());
        state.applied_sequence = Some(req.sequence);
        state.applied_at = Some(now_rfc3339());
        state.health = Some(health.health);
        self.shared.metrics.health(&health.health.to_string());
        state.inventory = inventory;
        if health.health != Health::Healthy {
            let detail: Vec<String> = health.objects.iter().take(5).map(|o| format!("{}: {}", o.object, o.message)).collect();
            reasons.push(format!("health {}: {}", health.health, detail.join("; ")));
        }
        tracing::info!(digest = %req.digest, sequence = req.sequence, changed = report.changed(), pruned, "applied");
        let extra = Extra { drift, pruned, prune_refused, health: Some(health.health), reason: reasons.join("; ") };
        let out = self.finish_ok(&state, at, outcomes, extra);
        if let Err(e) = self.store().cache_retain(&self.source.name, &[req.digest.as_str()]) {
            tracing::warn!("{e}");
        }
        self.last_apply = Some(Instant::now());
        self.shared.ready.store(true, Ordering::Relaxed);
        out
    }

    fn finish_ok(&mut self, state: &SourceState, at: Attempted, objects: Vec<ObjectOutcome>, extra: Extra) -> CycleOutcome {
        let summary = AttemptSummary {
            digest: Some(at.digest.clone()),
            sequence: at.sequence,
            result: AttemptResult::Applied,
            reason: extra.reason,
            at: now_rfc3339(),
        };
        let attempt = Attempt {
            id: 0,
            source: state.source.clone(),
            summary: summary.clone(),
            stage: at.stage.into(),
            resync: at.resync,
            drift: extra.drift,
            pruned: extra.pruned,
            prune_refused: extra.prune_refused,
            health: extra.health,
            objects,
        };
        self.rejected = None;
        self.save(state, summary, Some(attempt), AttemptResult::Applied, false)
    }

    /// Records a refused or failed attempt (state otherwise unchanged).
    fn finish(&mut self, state: &SourceState, at: Attempted, err: Result<(), StageError>, objects: Vec<ObjectOutcome>) -> CycleOutcome {
        let Err(e) = err else { unreachable!("finish is for errors") };
        let (result, unreachable) = match &e {
            StageError::Rejected { reason, message } => {
                tracing::error!(reason, "bundle refused: {message}");
                self.shared.metrics.verification_failure(reason);
                self.rejected = Some((at.digest.clone(), reason));
                (AttemptResult::Rejected, false)
            }
            StageError::Unreachable(m) => {
                tracing::warn!("{m}");
                (AttemptResult::Failed, true)
            }
            StageError::Failed(m) => {
                tracing::error!("{m}");
                (AttemptResult::Failed, false)
            }
        };
        let summary = AttemptSummary {
            digest: (!at.digest.is_empty()).then(|| at.digest.clone()),
            sequence: at.sequence,
            result,
            reason: e.message().to_string(),
            at: now_rfc3339(),
        };
        // Repeats of the same outcome (a registry outage, a refused tag) are not appended.
        let repeat = state.last_attempt.as_ref().is_some_and(|l| l.result == result && l.digest == summary.digest && l.reason == summary.reason);
        let attempt = (!repeat).then(|| Attempt {
            id: 0,
            source: state.source.clone(),
            summary: summary.clone(),
            stage: at.stage.into(),
            resync: at.resync,
            drift: 0,
            pruned: 0,
            prune_refused: false,
            health: None,
            objects,
        });
        self.save(state, summary, attempt, result, unreachable)
    }

    fn save(&mut self, state: &SourceState, summary: AttemptSummary, attempt: Option<Attempt>, result: AttemptResult, unreachable: bool) -> CycleOutcome {
        let mut state = state.clone();
        state.last_attempt = Some(summary);
        if let Err(e) = self.store().record(&state, attempt) {
            tracing::error!("recording the attempt: {e}");
        }
        self.shared.metrics.poll(&result.to_string());
        self.publish(&state, |st| {
            if unreachable {
                st.consecutive_failures += 1;
            } else {
                st.consecutive_failures = 0;
            }
        });
        CycleOutcome { result, unreachable }
    }
}

struct Extra {
    drift: usize,
    pruned: usize,
    prune_refused: bool,
    health: Option<Health>,
    reason: String,
}

fn push_unique(inv: &mut Vec<ObjectRef>, id: &ObjectRef) {
    if !inv.iter().any(|o| o.key() == id.key()) {
        inv.push(id.clone());
    }
}

fn count_outcomes(m: &Metrics, outcomes: &[ObjectOutcome]) {
    let mut counts = std::collections::BTreeMap::new();
    for o in outcomes {
        *counts.entry(o.action.to_string()).or_insert(0u64) += 1;
    }
    for (k, n) in counts {
        m.object(&k, n);
    }
}
