//! One poll of the pipeline:
//! `resolve -> fetch -> verify -> unpack -> plan -> apply -> wait -> prune -> record`.
//! Each stage is a module with a typed input and output; this module wires them and
//! decides what is recorded. Before fetch the floor and inventory are raised by the
//! target's own record of them ([`recall`]); after record they are written back to it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use drover_proto::object::ObjectRef;
use drover_proto::time::now_rfc3339;

use crate::config::{DriftMode, OnDegraded};
use crate::depends::{Readiness, Waiting};
use crate::events::Event;
use crate::hold::{Gate, Held, Hold, HoldOrigin};
use crate::metrics::SourceMetrics;
use crate::plan::Policy;
use crate::backlog::Backlog;
use crate::record::{Attempt, AttemptResult, AttemptSummary, SourceState, Store};
use crate::resolve::Source;
use crate::status::SourceStatus;
use crate::targets::{Action, ApplyRequest, Health, ObjectOutcome, Target};
use crate::shared::SourceShared;
use crate::stage::StageError;
use crate::admit::Admission;
use crate::verify::{Expectations, Trust};
use crate::{apply, drift, fetch, plan, prune, recall, resolve, unpack, wait};

mod finish;
mod undo;

/// What one cycle ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleOutcome {
    /// The attempt's result.
    pub result: AttemptResult,
    /// True when the source was unreachable (the run loop backs off).
    pub unreachable: bool,
}

/// Everything one source's pipeline needs, built once at start.
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
    /// Shared with the server (this source's status, metrics, report).
    pub shared: Arc<SourceShared>,
    /// True when the source is named in a `sources:` list (its Events say its name).
    pub named: bool,
    /// The sources this one waits for before it applies a new bundle ([`crate::depends`]).
    pub depends: crate::depends::Gate,
    /// Where this source tells its dependents whether it is ready.
    pub readiness: Option<tokio::sync::watch::Sender<Readiness>>,
    /// Set while the target is being changed (SIGTERM then waits for the cycle).
    pub critical: Arc<AtomicBool>,
    /// The hold gate, read on every poll ([`crate::hold`]); the run loop points it at the
    /// state directory.
    pub hold: Gate,
    /// What a resync does about drift (`--drift`).
    pub drift_mode: DriftMode,
    /// The agent's own health rules (`healthChecks`); a bundle's own win for its kinds.
    pub health_checks: Arc<drover_proto::health::Rules>,
    /// What a Degraded new bundle leads to (`--on-degraded`).
    pub on_degraded: OnDegraded,
    /// The newest verified bundle not applied because of a hold: (digest, sequence).
    waiting: Option<(String, u64)>,
    /// The digest the channel named at this cycle's resolve (None: unreachable).
    resolved: Option<String>,
    /// The new bundle waiting for dependencies in this cycle.
    waiting_on: Option<Waiting>,
    /// The target's write count when the current attempt started.
    writes_start: Option<crate::targets::Writes>,
    fingerprint: String,
    last_apply: Option<Instant>,
    rejected: Option<crate::refused::Refused>,
    /// What the state database could not take yet (a full disk): written first thing
    /// once it can.
    unsaved: Option<Backlog>,
    /// A new bundle that ended its health wait Degraded in this cycle, and why (what
    /// `--on-degraded rollback` acts on).
    degraded: Option<(drover_proto::channel::Position, String)>,
}

struct Attempted {
    digest: String,
    sequence: Option<u64>,
    stage: &'static str,
    resync: bool,
    /// Set when this attempt rolls back a Degraded bundle (`digest`) to the one it names.
    rollback: Option<crate::rollback::RolledBack>,
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
        shared: Arc<SourceShared>,
    ) -> Self {
        Pipeline {
            fingerprint: trust.fingerprint(),
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
            named: false,
            depends: crate::depends::Gate::default(),
            readiness: None,
            critical: Arc::new(AtomicBool::new(false)),
            hold: Gate::default(),
            drift_mode: DriftMode::Correct,
            health_checks: Arc::default(),
            on_degraded: OnDegraded::Report,
            waiting: None,
            resolved: None,
            waiting_on: None,
            writes_start: None,
            last_apply: None,
            rejected: None,
            unsaved: None,
            degraded: None,
        }
    }

    fn store(&self) -> &Store {
        &self.shared.store
    }

    fn publish(&self, state: &SourceState, f: impl FnOnce(&mut SourceStatus)) {
        {
            let mut st = self.shared.status.lock().expect("status lock");
            st.set_state(state);
            st.last_poll_at = Some(now_rfc3339());
            st.waiting.clone_from(&self.waiting_on);
            f(&mut st);
        }
        self.shared.metrics.waiting(self.waiting_on.is_some());
        if let Some(tx) = &self.readiness {
            let now = self.readiness_of(state);
            tx.send_if_modified(|r| {
                let changed = *r != now;
                *r = now;
                changed
            });
        }
    }

    /// Whether the bundle the channel names now is applied by this agent and Healthy
    /// ([`crate::depends`]), from the state just recorded.
    fn readiness_of(&self, state: &SourceState) -> Readiness {
        let short = |t: &str| drover_proto::text::clean::bounded(t, 200);
        let last = state.last_attempt.as_ref();
        let Some(current) = &self.resolved else {
            let why = last.map(|a| short(&a.reason)).unwrap_or_default();
            return Readiness::NotReady(format!("its source is unreachable ({why})"));
        };
        let verified = state.policy_fingerprint.as_deref() == Some(self.fingerprint.as_str());
        if state.applied_digest.as_deref() != Some(current.as_str()) || !verified {
            let why = match last.filter(|a| a.digest.as_deref() == Some(current.as_str())) {
                _ if state.refuses(current) => format!("its bundle {current} was rolled back (Degraded here)"),
                Some(a) if a.result == AttemptResult::Rejected => format!("its bundle {current} was refused ({})", short(&a.reason)),
                Some(a) if a.result == AttemptResult::Failed => format!("its apply of {current} failed ({})", short(&a.reason)),
                Some(a) if a.result == AttemptResult::Held => format!("its bundle {current} is held ({})", short(&a.reason)),
                Some(a) if a.result == AttemptResult::Waiting => format!("its bundle {current} is waiting ({})", short(&a.reason)),
                _ => format!("its bundle {current} is not applied yet"),
            };
            return Readiness::NotReady(why);
        }
        match state.health {
            Some(Health::Healthy) => Readiness::Ready,
            Some(h) => Readiness::NotReady(format!("its applied bundle {current} is {h}")),
            None => Readiness::NotReady(format!("the health of its applied bundle {current} is not known yet")),
        }
    }

    /// Runs one poll.
    pub async fn cycle(&mut self) -> CycleOutcome {
        let name = self.source.name.clone();
        let mut state = match self.state(&name) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{e}");
                return CycleOutcome { result: AttemptResult::Failed, unreachable: false };
            }
        };
        if let Some(asked) = self.hold.take_rollback_release() {
            self.release_rollback(&mut state, &asked);
        }
        let resync_due = self.last_apply.is_none_or(|t| t.elapsed() >= self.resync);
        self.resolved = None;
        self.waiting_on = None;
        let hold = self.hold.check(self.target.as_ref(), &name).await;
        if hold.is_none() {
            self.waiting = None;
        }
        self.show_hold(hold.as_ref());
        let digest = match resolve::resolve(&mut self.source).await {
            Ok(d) => d,
            Err(e) => {
                // Offline start: put the applied bundle back from the cache and become ready.
                if let (None, Some(applied)) = (self.last_apply, state.applied_digest.clone()) {
                    if fetch::from_cache(self.store(), &name, &applied).ok().flatten().is_some() {
                        tracing::warn!("{}; re-applying the cached bundle {applied}", e.message());
                        let note = format!("source unreachable ({}); re-applied the cached bundle", e.message());
                        let mut out = self.process(applied, state, Some(note), hold).await;
                        out.unreachable = true;
                        return out;
                    }
                }
                // `finish` logs the error (once).
                self.finish(&state, Attempted { digest: String::new(), sequence: None, stage: "resolve", resync: false, rollback: None }, Err(e), Vec::new());
                return CycleOutcome { result: AttemptResult::Failed, unreachable: true };
            }
        };
        self.resolved = Some(digest.clone());
        if state.refuses(&digest) {
            // The channel still names the bundle rolled back from: the applied one is
            // resynced when due, the refused one never applied on its own.
            if let (true, Some(applied)) = (resync_due && !hold.as_ref().is_some_and(Hold::blocks_resync), state.applied_digest.clone()) {
                return self.process(applied, state, None, hold).await;
            }
            return self.refused_poll(&state);
        }
        // The applied digest verified under another trust policy is re-verified now.
        let verified_now = state.policy_fingerprint.as_deref() == Some(self.fingerprint.as_str());
        // While held, a due resync waits too (drift is left as it is); not for a closed
        // apply window (drift correction is not restricted by windows).
        let resync_held = hold.as_ref().is_some_and(Hold::blocks_resync);
        if state.applied_digest.as_deref() == Some(digest.as_str()) && (!resync_due || resync_held) && verified_now {
            tracing::debug!("{digest} unchanged");
            self.shared.metrics.poll("Unchanged");
            self.shared.ready.store(true, Ordering::Relaxed);
            // While the state cannot be written, the attempt that could not be recorded stays
            // the last one shown.
            let unwritten = self.unsaved.is_some();
            self.publish(&state, |st| {
                st.consecutive_failures = 0;
                if unwritten {
                    return;
                }
                st.last_attempt = Some(AttemptSummary {
                    digest: Some(digest.clone()),
                    sequence: state.applied_sequence,
                    result: AttemptResult::Unchanged,
                    reason: String::new(),
                    at: now_rfc3339(),
                    writes: None,
                });
            });
            return CycleOutcome { result: AttemptResult::Unchanged, unreachable: false };
        }
        if hold.is_some() && self.waiting.as_ref().is_some_and(|w| w.0 == digest) {
            // Outside the apply windows the applied bundle is still resynced while the new
            // one waits.
            if let (true, Some(applied)) = (resync_due && !resync_held, state.applied_digest.clone()) {
                return self.process(applied, state, None, hold).await;
            }
            // Verified already and still held: nothing new to check, nothing to apply.
            self.shared.metrics.poll("Held");
            self.publish(&state, |_| {});
            return CycleOutcome { result: AttemptResult::Held, unreachable: false };
        }
        if let Some(r) = self.rejected.as_ref().filter(|r| r.holds(&digest)) {
            // A refused digest is not fetched or judged again until its backoff passed
            // ([`crate::refused`]); the refusal stands (and its Event repeats).
            tracing::debug!("{digest} was refused ({}); judged again after {:?}", r.reason, r.backoff());
            self.event(&Event::rejected(&digest, r.reason, &r.message, r.stage));
            self.shared.metrics.poll("Rejected");
            self.publish(&state, |_| {});
            return CycleOutcome { result: AttemptResult::Rejected, unreachable: false };
        }
        self.process(digest, state, None, hold).await
    }

    /// Shows `hold` (with the waiting bundle) in status, metrics and the next report.
    fn show_hold(&self, hold: Option<&Hold>) {
        let held = hold.map(|h| Held::new(h.clone(), self.waiting.as_ref()));
        self.shared.metrics.held(held.is_some());
        crate::report::observe_hold(&self.shared.observed, held.as_ref());
        self.shared.status.lock().expect("status lock").held = held;
    }

    /// The hook where a verified bundle (or a resync) would be applied while the agent is
    /// held: nothing is applied; the bundle is remembered as waiting and the attempt
    /// recorded (once per digest and reason).
    fn held(&mut self, state: &SourceState, at: Attempted, hold: Hold, req: &ApplyRequest) -> CycleOutcome {
        let what = if at.resync {
            "the resync of the applied bundle is skipped (drift is not corrected)".to_string()
        } else {
            self.waiting = Some((req.digest.clone(), req.sequence));
            let until = if hold.by == HoldOrigin::Window { "the next apply window" } else { "the release" };
            format!("{} (sequence {}) is verified and waits for {until}", req.digest, req.sequence)
        };
        self.show_hold(Some(&hold));
        tracing::info!(by = %hold.by, reason = %hold.reason, "held: {what}");
        let summary = AttemptSummary {
            digest: Some(at.digest.clone()),
            sequence: at.sequence,
            result: AttemptResult::Held,
            reason: format!("held by {}: {}; {what}", hold.by, hold.reason),
            at: now_rfc3339(),
            writes: None,
        };
        self.event(&Event::held(&summary.reason));
        let attempt = unless_repeat(state, &summary, at.stage, at.resync);
        self.save(state, summary, attempt, AttemptResult::Held, false)
    }

    /// Tells the target's operators ([`crate::events`]); never blocks. A named source's
    /// Events say its name.
    fn event(&self, e: &Event) {
        if self.named {
            self.target.record_event(&self.source.name, &e.clone().of_source(&self.shared.name));
        } else {
            self.target.record_event(&self.source.name, e);
        }
    }

    /// The hook where a verified new bundle would be applied while a source it depends on
    /// is not ready ([`crate::depends`]): nothing is applied; the attempt is `Waiting`,
    /// naming the dependencies and why (recorded once per digest and reason).
    fn wait_for_dependencies(&mut self, state: &SourceState, at: Attempted, not_ready: Vec<(String, String)>, req: &ApplyRequest) -> CycleOutcome {
        let w = crate::depends::waiting(not_ready, &req.digest, req.sequence);
        let what = format!(
            "waiting for {}; {} (sequence {}) is verified and is applied once {} {} applied and Healthy",
            w.reason,
            req.digest,
            req.sequence,
            w.on.join(" and "),
            if w.on.len() == 1 { "is" } else { "are" }
        );
        tracing::info!(on = %w.on.join(","), "{what}");
        self.waiting_on = Some(w);
        let summary = AttemptSummary { digest: Some(at.digest.clone()), sequence: at.sequence, result: AttemptResult::Waiting, reason: what, at: now_rfc3339(), writes: None };
        self.event(&Event::waiting(&summary.reason));
        let attempt = unless_repeat(state, &summary, at.stage, at.resync);
        self.save(state, summary, attempt, AttemptResult::Waiting, false)
    }

    /// Runs fetch..record for `digest`, with the floor and inventory raised by the
    /// target's record ([`recall`]).
    async fn process(&mut self, digest: String, state: SourceState, note: Option<String>, hold: Option<Hold>) -> CycleOutcome {
        crate::memory::mark("process");
        self.writes_start = self.target.writes();
        let (state, recall_note) = recall::recall(self.target.as_ref(), state).await;
        if state.refuses(&digest) {
            // A new leader learnt the refusal from the target's record: kept, and obeyed.
            if let Err(e) = self.store().record(&state, &[]) {
                tracing::warn!("{e}");
            }
            return self.refused_poll(&state);
        }
        let notes: Vec<String> = note.into_iter().chain(recall_note).collect();
        let resync = state.applied_digest.as_deref() == Some(digest.as_str());
        let mut at = Attempted { digest: digest.clone(), sequence: None, stage: "fetch", resync, rollback: None };
        let admission = Admission {
            source: &self.source,
            store: &self.shared.store,
            trust: &self.trust,
            fingerprint: &self.fingerprint,
            expect: &self.expect,
            state: &state,
        };
        let admitted = match admission.admit(&digest).await {
            Ok(a) => a,
            Err(stop) => {
                (at.stage, at.sequence) = (stop.stage, stop.sequence);
                return self.finish(&state, at, Err(stop.error), Vec::new());
            }
        };
        let verified = admitted.verified;
        at.sequence = Some(verified.bundle.config.sequence);
        if !admitted.from_cache {
            if let Err(e) = fetch::cache(self.store(), &self.source.name, &verified.bundle) {
                tracing::warn!("caching {digest}: {}", e.message());
            }
        }
        let allow_mass_prune = verified.bundle.config.allow_mass_prune;
        let health = match wait::rules(&digest, &verified.bundle.config, &self.health_checks) {
            Ok(h) => h,
            Err(e) => {
                at.stage = "verify";
                return self.finish(&state, at, Err(e), Vec::new());
            }
        };
        at.stage = "unpack";
        crate::memory::mark(at.stage);
        // Off the thread that serves `/healthz`: a large bundle takes a while to parse.
        let unpacked = match crate::offload::off_thread(move || unpack::unpack(verified)).await {
            Ok(u) => u,
            Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
        };
        at.stage = "plan";
        crate::memory::mark(at.stage);
        let known = match plan::cluster_kinds(self.target.as_ref(), &unpacked, &self.policy).await {
            Ok(k) => k,
            Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
        };
        let (mut req, refused) = match plan::plan(unpacked, &self.policy, &known, &self.source.name, &self.field_manager) {
            Ok(r) => r,
            Err(e) => return self.finish(&state, at, Err(e), Vec::new()),
        };
        req.health = health;
        if let Some(h) = hold.filter(|h| h.blocks_resync() || !at.resync) {
            at.stage = "hold";
            return self.held(&state, at, h, &req);
        }
        if !at.resync && !self.depends.is_empty() {
            let not_ready = self.depends.check().await;
            if !not_ready.is_empty() {
                at.stage = "depends";
                return self.wait_for_dependencies(&state, at, not_ready, &req);
            }
        }
        if at.resync && self.drift_mode == DriftMode::Report {
            at.stage = "drift";
            return self.report_drift(req, state, at).await;
        }
        at.stage = "apply";
        crate::memory::mark(at.stage);
        self.critical.store(true, Ordering::SeqCst);
        let mut out = self.change(req, refused, state, at, allow_mass_prune, notes).await;
        if let (Some((bad, why)), OnDegraded::Rollback) = (self.degraded.take(), self.on_degraded) {
            out = self.roll_back(bad, why, out).await;
        }
        self.critical.store(false, Ordering::SeqCst);
        out
    }

    /// apply -> wait -> prune -> record. `refused`: the objects the policy left out.
    async fn change(&mut self, req: ApplyRequest, refused: Vec<ObjectOutcome>, state: SourceState, mut at: Attempted, allow_mass_prune: bool, notes: Vec<String>) -> CycleOutcome {
        let target = self.target.clone();
        let mut report = match apply::apply(target.as_ref(), &req).await {
            Ok(r) => r,
            Err(e) => return self.finish(&state, at, Err(e), refused),
        };
        count_outcomes(&self.shared.metrics, &refused);
        count_outcomes(&self.shared.metrics, &report.outcomes);
        // A target that stopped (objects skipped) or applied nothing (every object failed:
        // the dir target's tree is swapped whole or not at all) changed nothing to build on.
        let stopped = report.outcomes.iter().any(|o| o.action == Action::Skipped);
        let nothing = report.failed() && (stopped || report.outcomes.iter().all(|o| o.action == Action::Failed));
        let mut reasons = notes;
        if !refused.is_empty() {
            let first: Vec<String> = refused.iter().take(3).map(|o| o.message.strip_prefix("refused by policy: ").unwrap_or(&o.message).to_string()).collect();
            let more = refused.len().saturating_sub(3);
            let message = format!(
                "{} object(s) refused by this source's policy and not applied: {}{}",
                refused.len(),
                first.join("; "),
                if more > 0 { format!("; and {more} more") } else { String::new() }
            );
            tracing::warn!("{message}");
            self.shared.metrics.verification_failure("policy");
            self.event(&Event::objects_refused(&message));
            reasons.push(message);
        }
        // Refused objects this source applied before stay as they are: not applied, not
        // pruned, still in its inventory.
        let refused_keys: BTreeSet<Key> = refused.iter().map(|o| o.object.key()).collect();
        let (kept_refused, previous): (Vec<ObjectRef>, Vec<ObjectRef>) = state.inventory.iter().cloned().partition(|o| refused_keys.contains(&o.key()));
        report.outcomes.splice(0..0, refused);
        if nothing {
            return self.apply_failed(&req, state, at, report).await;
        }
        // An object that failed is that object's failure: it is named, its health is
        // Degraded, and everything else goes on (wait, prune, record).
        let failed: BTreeSet<Key> = report.outcomes.iter().filter(|o| o.action == Action::Failed).map(|o| o.object.key()).collect();
        if !failed.is_empty() {
            let first: Vec<String> = report.outcomes.iter().filter(|o| o.action == Action::Failed).take(3).map(|o| format!("{}: {}", o.object, o.message)).collect();
            reasons.push(format!("{} object(s) failed, the rest was applied: {}", failed.len(), first.join("; ")));
        }
        reasons.extend(report.notes.iter().cloned());
        let conflicts: BTreeSet<Key> = report.conflicts().map(|o| o.object.key()).collect();
        if !conflicts.is_empty() {
            let first: Vec<String> = report.conflicts().take(3).map(|o| format!("{}: {}", o.object, o.message)).collect();
            reasons.push(format!("{} object(s) not applied, owned by another drover source: {}", conflicts.len(), first.join("; ")));
        }
        // A copy of the request only when objects are left out (10,000 objects: MiBs).
        let without_conflicts = (!conflicts.is_empty()).then(|| without(&req, &conflicts));
        let applied = without_conflicts.as_ref().unwrap_or(&req);
        at.stage = "wait";
        crate::memory::mark(at.stage);
        // What failed is not waited for (it was not applied).
        let without_failed = (!failed.is_empty()).then(|| without(applied, &failed));
        let mut health = wait::wait(target.as_ref(), without_failed.as_ref().unwrap_or(applied), self.health_timeout).await;
        drop(without_failed);
        terminating_health(&mut health, &report.outcomes);
        failed_health(&mut health, &report.outcomes);
        at.stage = "prune";
        crate::memory::mark(at.stage);
        let changed = report.changed();
        let objects = applied.objects().count();
        let corrected: Vec<String> = if at.resync { report.outcomes.iter().filter(|o| o.action.changed()).map(|o| o.object.to_string()).collect() } else { Vec::new() };
        let mut outcomes = report.outcomes;
        let mut pruned = self.prune_stage(&previous, &req, applied, allow_mass_prune).await;
        for o in &kept_refused {
            push_unique(&mut pruned.inventory, o);
        }
        outcomes.extend(pruned.outcomes);
        reasons.extend(pruned.reasons);
        // The objects are not needed any more: their memory is free before the record.
        drop(without_conflicts);
        let ApplyRequest { digest, sequence, groups, .. } = req;
        drop(groups);
        at.stage = "record";
        crate::memory::mark(at.stage);
        let drift = if at.resync { changed } else { 0 };
        if drift > 0 {
            tracing::warn!("resync corrected drift on {drift} object(s)");
            self.shared.metrics.drift(drift as u64);
        }
        let result = if failed.is_empty() { AttemptResult::Applied } else { AttemptResult::Failed };
        self.shared.metrics.apply(&result.to_string());
        self.shared.metrics.applied(&self.source.name, &digest, sequence);
        let mut state = state;
        state.applied_digest = Some(digest.clone());
        state.applied_sequence = Some(sequence);
        state.policy_fingerprint = Some(self.fingerprint.clone());
        state.applied_at = Some(now_rfc3339());
        state.health = Some(health.health);
        self.shared.metrics.health(&health.health.to_string());
        state.inventory = pruned.inventory;
        self.roll_back_state(&mut state, &at, &digest, sequence, health.health);
        // The apply put every object back: nothing differs from the bundle any more.
        state.drifted = Vec::new();
        self.shared.metrics.drifted(0);
        if health.health != Health::Healthy {
            let detail: Vec<String> = health.objects.iter().take(5).map(|o| format!("{}: {}", o.object, o.message)).collect();
            reasons.push(format!("health {}: {}", health.health, detail.join("; ")));
            if health.health == Health::Degraded && !at.resync && at.rollback.is_none() {
                let bad = drover_proto::channel::Position { digest: digest.clone(), sequence };
                self.degraded = Some((bad, format!("Degraded: {}", detail.join("; "))));
            }
        }
        if let Some(rb) = &at.rollback {
            reasons.insert(0, rb.describe());
        }
        reasons.extend(recall::keep(target.as_ref(), &state).await);
        tracing::info!(digest = %digest, sequence, changed, pruned = pruned.deleted, "applied");
        if let Some(rb) = &at.rollback {
            self.event(&Event::rolled_back(&rb.from, &rb.to, &rb.reason));
        } else if !at.resync {
            self.event(&Event::applied(&digest, sequence, objects, changed, pruned.deleted));
        } else if drift > 0 {
            self.event(&Event::drift_corrected(&digest, sequence, &corrected));
        }
        let unhealthy = health.objects.into_iter().take(drover_proto::report::MAX_FAILING).collect();
        let extra = Extra { drift, pruned: pruned.deleted, prune_refused: pruned.refused, health: Some(health.health), unhealthy, reason: reasons.join("; ") };
        if !failed.is_empty() {
            self.event(&Event::failed(at.stage, &extra.reason));
        }
        let out = self.finish_ok(&state, at, outcomes, extra, result);
        crate::memory::mark("recorded");
        // The cache keeps the applied bundle and the last one Healthy here (a rollback's).
        let healthy = state.last_healthy.as_ref().map(|h| h.position.digest.as_str()).unwrap_or(digest.as_str());
        if let Err(e) = self.store().cache_retain(&self.source.name, &[digest.as_str(), healthy]) {
            tracing::warn!("{e}");
        }
        // A failed object is tried again on the next poll (a resync of the applied bundle).
        self.last_apply = failed.is_empty().then(Instant::now);
        self.shared.ready.store(true, Ordering::Relaxed);
        out
    }

    /// The resync of `--drift report`: asks the target what re-applying the applied bundle
    /// would change and records the drifted objects, changing nothing ([`crate::drift`]).
    async fn report_drift(&mut self, req: ApplyRequest, state: SourceState, at: Attempted) -> CycleOutcome {
        let plans = match self.target.check_drift(&req).await {
            Ok(p) => p,
            Err(e) => return self.finish(&state, at, Err(StageError::Failed(format!("drift check of {}: {e}", req.digest))), Vec::new()),
        };
        let mut state = state;
        state.drifted = drift::drifted(&plans, &state.drifted, &now_rfc3339());
        state.policy_fingerprint = Some(self.fingerprint.clone());
        let n = state.drifted.len();
        self.shared.metrics.drifted(n);
        let reason = drift::describe(&state.drifted);
        if n > 0 {
            tracing::warn!("{reason}");
            self.event(&Event::drift_reported(&reason));
        }
        let summary = AttemptSummary { digest: Some(req.digest.clone()), sequence: Some(req.sequence), result: AttemptResult::Unchanged, reason, at: now_rfc3339(), writes: None };
        // Recorded when what drifted changes, not on every resync.
        let attempt = unless_repeat(&state, &summary, at.stage, true).map(|a| Attempt { drift: n, ..a });
        self.last_apply = Some(Instant::now());
        self.shared.ready.store(true, Ordering::Relaxed);
        self.save(&state, summary, attempt, AttemptResult::Unchanged, false)
    }

    /// Records an apply that changed nothing to build on (the target stopped, or every
    /// object failed): nothing is pruned; objects it created join the inventory.
    async fn apply_failed(&mut self, req: &ApplyRequest, mut state: SourceState, at: Attempted, report: crate::targets::ApplyReport) -> CycleOutcome {
        self.shared.metrics.apply("Failed");
        let first = report.first_failure().map(|o| format!("{}: {}", o.object, o.message)).unwrap_or_default();
        let before = state.inventory.len();
        for o in report.outcomes.iter().filter(|o| matches!(o.action, Action::Created | Action::Adopted)) {
            push_unique(&mut state.inventory, &o.object);
        }
        if state.inventory.len() > before {
            recall::keep(self.target.as_ref(), &state).await;
        }
        let e = StageError::Failed(format!("apply of {} failed; nothing pruned: {first}", req.digest));
        self.finish(&state, at, Err(e), report.outcomes)
    }

    /// prune: candidates, Namespaces held back, the safety valve, the target's delete.
    /// `applied` is `req` without the objects of other sources (the new inventory).
    async fn prune_stage(&self, previous: &[ObjectRef], req: &ApplyRequest, applied: &ApplyRequest, allow_mass_prune: bool) -> Pruned {
        let target = self.target.as_ref();
        let mut out = Pruned { inventory: applied.objects().map(|o| o.id.clone()).collect(), ..Pruned::default() };
        let namespaces: Vec<ObjectRef> = prune::candidates(previous, req).into_iter().filter(prune::is_namespace).collect();
        let contents = if namespaces.is_empty() { Vec::new() } else { target.namespace_contents(&namespaces).await };
        let plan = prune::decide(previous, req, &contents, self.max_prune_ratio, allow_mass_prune);
        for h in plan.held {
            tracing::warn!("{}: {}", h.object, h.message);
            self.event(&Event::prune_refused(&format!("{}: {}", h.object, h.message)));
            out.reasons.push(format!("{}: {}", h.object, h.message));
            push_unique(&mut out.inventory, &h.object);
            out.outcomes.push(h);
        }
        match plan.decision {
            prune::Decision::Nothing => {}
            prune::Decision::Refused { candidates, message } => {
                tracing::warn!("{message}");
                self.event(&Event::prune_refused(&message));
                self.shared.metrics.prune_refused();
                out.refused = true;
                for c in candidates {
                    out.outcomes.push(ObjectOutcome::with(c.clone(), Action::Refused, "prune safety valve"));
                    push_unique(&mut out.inventory, &c);
                }
                out.reasons.push(message);
            }
            prune::Decision::Prune(preq) => match prune::prune(target, &preq).await {
                Ok(rep) => {
                    out.deleted = rep.deleted();
                    self.shared.metrics.pruned(out.deleted as u64);
                    count_outcomes(&self.shared.metrics, &rep.outcomes);
                    for o in rep.remaining() {
                        push_unique(&mut out.inventory, o);
                    }
                    out.outcomes.extend(rep.outcomes);
                }
                Err(e) => {
                    for c in &preq.delete {
                        push_unique(&mut out.inventory, c);
                    }
                    out.reasons.push(e.message().to_string());
                }
            },
        }
        out
    }
}

/// What the prune stage did.
#[derive(Default)]
struct Pruned {
    /// The new inventory (applied objects plus what stays on the target).
    inventory: Vec<ObjectRef>,
    /// Per-object outcomes (held back, refused, deleted, kept, failed).
    outcomes: Vec<ObjectOutcome>,
    /// For the attempt's reason.
    reasons: Vec<String>,
    /// Objects deleted.
    deleted: usize,
    /// The safety valve refused.
    refused: bool,
}

type Key = (String, String, Option<String>, String);

/// `req` without the objects in `drop`.
fn without(req: &ApplyRequest, drop: &BTreeSet<Key>) -> ApplyRequest {
    let mut r = req.clone();
    for g in &mut r.groups {
        g.objects.retain(|o| !drop.contains(&o.id.key()));
    }
    r.groups.retain(|g| !g.objects.is_empty());
    r
}

/// Objects the apply found being deleted (`terminating`) are not as the bundle wants
/// them: listed as unhealthy (Progressing: they come back once gone) in status, history
/// and the fleet report.
fn terminating_health(health: &mut crate::targets::HealthReport, outcomes: &[ObjectOutcome]) {
    for o in outcomes.iter().filter(|o| o.action == Action::Terminating) {
        if health.objects.iter().any(|h| h.object == o.object) {
            continue;
        }
        health.objects.push(crate::targets::ObjectHealth { object: o.object.clone(), health: Health::Progressing, message: o.message.clone() });
        if health.health == Health::Healthy {
            health.health = Health::Progressing;
        }
    }
}

/// Objects whose apply failed are not as the bundle wants them: listed as Degraded, with
/// the failure, in status, history and the fleet report (never Healthy beside them).
fn failed_health(health: &mut crate::targets::HealthReport, outcomes: &[ObjectOutcome]) {
    for o in outcomes.iter().filter(|o| o.action == Action::Failed) {
        health.objects.retain(|h| h.object != o.object);
        health.objects.push(crate::targets::ObjectHealth { object: o.object.clone(), health: Health::Degraded, message: format!("not applied: {}", o.message) });
        health.health = Health::Degraded;
    }
}

fn push_unique(inv: &mut Vec<ObjectRef>, id: &ObjectRef) {
    if !inv.iter().any(|o| o.key() == id.key()) {
        inv.push(id.clone());
    }
}

fn count_outcomes(m: &SourceMetrics, outcomes: &[ObjectOutcome]) {
    let mut counts = std::collections::BTreeMap::new();
    for o in outcomes {
        *counts.entry(o.action.to_string()).or_insert(0u64) += 1;
    }
    for (k, n) in counts {
        m.object(&k, n);
    }
}

/// What a successful attempt adds to its record besides the object outcomes.
struct Extra {
    drift: usize,
    pruned: usize,
    prune_refused: bool,
    health: Option<Health>,
    unhealthy: Vec<crate::targets::ObjectHealth>,
    reason: String,
}

/// The history entry for `summary` (no objects, pruning or health), or None when it
/// repeats the last recorded outcome (same result, digest and reason): a registry outage,
/// a refused tag, a hold or an unchanged drift is recorded once, not on every poll.
fn unless_repeat(state: &SourceState, summary: &AttemptSummary, stage: &str, resync: bool) -> Option<Attempt> {
    let repeat = state.last_attempt.as_ref().is_some_and(|l| l.result == summary.result && l.digest == summary.digest && l.reason == summary.reason);
    (!repeat).then(|| Attempt::plain(&state.source, summary.clone(), stage, resync))
}
