//! The end of a cycle: what is recorded (the attempt, the history entry, the state) and
//! what is kept in memory when the state database cannot take it.

use drover_proto::text::clean;
use drover_proto::time::now_rfc3339;

use crate::events::Event;
use crate::record::{Attempt, AttemptResult, AttemptSummary, RecordError, SourceState};
use crate::stage::StageError;
use crate::targets::ObjectOutcome;

use super::{unless_repeat, Attempted, CycleOutcome, Extra, Pipeline};

impl Pipeline {
    /// Records an attempt that went through apply, wait, prune and record: `Applied`, or
    /// `Failed` when objects failed (named in `extra.reason` and in `objects`), `RolledBack`
    /// when the attempt put the last healthy bundle back and nothing failed.
    pub(super) fn finish_ok(&mut self, state: &SourceState, at: Attempted, objects: Vec<ObjectOutcome>, extra: Extra, result: AttemptResult) -> CycleOutcome {
        let result = if result == AttemptResult::Applied && at.rollback.is_some() { AttemptResult::RolledBack } else { result };
        let summary = AttemptSummary {
            digest: Some(at.digest.clone()),
            sequence: at.sequence,
            result,
            reason: extra.reason,
            at: now_rfc3339(),
            writes: None,
        };
        let attempt = Attempt {
            id: 0,
            source: state.source.clone(),
            name: String::new(),
            summary: summary.clone(),
            stage: at.stage.into(),
            resync: at.resync,
            drift: extra.drift,
            pruned: extra.pruned,
            prune_refused: extra.prune_refused,
            health: extra.health,
            objects,
            unhealthy: extra.unhealthy,
            rolled_back: at.rollback,
        };
        self.rejected = None;
        self.save(state, summary, Some(attempt), result, false)
    }

    /// Records a refused or failed attempt (state otherwise unchanged).
    pub(super) fn finish(&mut self, state: &SourceState, at: Attempted, err: Result<(), StageError>, objects: Vec<ObjectOutcome>) -> CycleOutcome {
        let Err(e) = err else { unreachable!("finish is for errors") };
        let (result, unreachable) = match &e {
            StageError::Rejected { reason, message } => {
                tracing::error!(reason, "bundle refused: {message}");
                self.shared.metrics.verification_failure(reason);
                self.rejected = Some(crate::refused::Refused::record(self.rejected.take(), &at.digest, reason, message, at.stage));
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
        self.event(&match &e {
            StageError::Rejected { reason, message } => Event::rejected(&at.digest, reason, message, at.stage),
            StageError::Unreachable(m) | StageError::Failed(m) => Event::failed(at.stage, m),
        });
        let summary = AttemptSummary {
            digest: (!at.digest.is_empty()).then(|| at.digest.clone()),
            sequence: at.sequence,
            result,
            reason: e.message().to_string(),
            at: now_rfc3339(),
            writes: None,
        };
        // Repeats of the same outcome (a registry outage, a refused tag) are not appended.
        let attempt = unless_repeat(state, &summary, at.stage, at.resync).map(|a| Attempt { objects, ..a });
        self.save(state, summary, attempt, result, unreachable)
    }

    /// Writes what the state database could not take yet (at shutdown); false when it
    /// still cannot.
    pub fn write_unsaved(&mut self) -> bool {
        let name = self.source.name.clone();
        let _ = self.state(&name);
        self.unsaved.is_none()
    }

    /// The source's state: what the state database could not take yet (written now, if
    /// it can), else the database's.
    pub(super) fn state(&mut self, name: &str) -> Result<SourceState, RecordError> {
        let Some(b) = self.unsaved.take() else { return self.store().source(name) };
        let state = b.state().clone();
        match b.write(self.store()) {
            Ok(()) => self.shared.metrics.state_unwritable(false),
            Err(_) => self.unsaved = Some(b),
        }
        Ok(state)
    }

    /// Records `summary` as the last attempt (and `attempt` in the history) and publishes
    /// it. When the state database cannot take it, the attempt is `Failed` (stage
    /// `record`) and everything is kept in memory until it can ([`Pipeline::state`]).
    /// Every message is cleaned first: reasons and object messages carry a registry's or
    /// an API server's words (untrusted; [`clean::one_line`]).
    pub(super) fn save(&mut self, state: &SourceState, summary: AttemptSummary, attempt: Option<Attempt>, result: AttemptResult, unreachable: bool) -> CycleOutcome {
        let mut summary = cleaned(summary);
        let mut attempt = attempt.map(|mut a| {
            a.summary = cleaned(a.summary);
            for o in a.objects.iter_mut() {
                o.message = clean::one_line(&o.message).into_owned();
            }
            for u in a.unhealthy.iter_mut() {
                u.message = clean::one_line(&u.message).into_owned();
            }
            a
        });
        if let (Some(now), Some(start)) = (self.target.writes(), self.writes_start.take()) {
            let sent = now.since(&start);
            self.shared.metrics.api_writes(&sent);
            summary.writes = Some(sent);
            if let Some(a) = attempt.as_mut() {
                a.summary.writes = Some(sent);
            }
        }
        if let Some(a) = attempt.as_mut() {
            a.name = self.shared.name.clone();
        }
        let mut state = state.clone();
        state.name = self.shared.name.clone();
        state.waiting = self.waiting_on.clone();
        state.last_attempt = Some(summary);
        let schemas = self.target.schemas();
        if !schemas.is_empty() {
            state.schemas = schemas;
        }
        let mut b = self.unsaved.take().unwrap_or_default();
        b.push(state, attempt.clone());
        let written = b.write(self.store());
        self.shared.metrics.state_unwritable(written.is_err());
        let (result, state) = match written {
            Ok(()) => (result, b.state().clone()),
            Err(e) => {
                b.not_written(&e, self.store().path());
                let state = b.state().clone();
                self.unsaved = Some(b);
                (AttemptResult::Failed, state)
            }
        };
        crate::report::observe(&self.shared.observed, &state, attempt.as_ref());
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

/// `summary` with its reason cleaned to one line.
fn cleaned(mut summary: AttemptSummary) -> AttemptSummary {
    summary.reason = clean::one_line(&summary.reason).into_owned();
    summary
}
