//! `--on-degraded rollback` in the pipeline ([`crate::rollback`] has the rules): a new
//! bundle Degraded at the end of its health wait is replaced by the last bundle Healthy
//! here, from the verified cache, through the same apply -> wait -> prune -> record as any
//! bundle (the prune removes what the Degraded one added); the refusal that follows, and
//! its release.

use drover_proto::channel::Position;
use drover_proto::time::now_rfc3339;

use crate::events::Event;
use crate::record::{AttemptResult, AttemptSummary, SourceState};
use crate::rollback::{self, LastHealthy, RolledBack};
use crate::stage::StageError;
use crate::targets::Health;
use crate::verify::Verified;
use crate::{fetch, plan, unpack, verify, wait};

use super::{unless_repeat, Attempted, CycleOutcome, Pipeline};

impl Pipeline {
    /// Rolls back from `bad` (just applied, Degraded: `why`) to the last bundle Healthy
    /// here. `out`: the outcome of the Degraded attempt (returned when nothing is done).
    pub(super) async fn roll_back(&mut self, bad: Position, why: String, out: CycleOutcome) -> CycleOutcome {
        let name = self.source.name.clone();
        let Ok(state) = self.state(&name) else { return out };
        let Some(good) = state.last_healthy.clone().filter(|g| g.position.digest != bad.digest) else {
            tracing::warn!("{} is Degraded and no earlier bundle was Healthy here: nothing to roll back to (--on-degraded rollback)", bad.digest);
            return out;
        };
        // An operator's hold taken while the bundle was being applied keeps it (nothing is
        // changed while held); closed apply windows do not stop the rollback.
        let hold = self.hold.check(self.target.as_ref(), &name).await;
        if let Some(h) = hold.filter(|h| !crate::hold::allows_rollback(Some(h))) {
            let summary = AttemptSummary {
                digest: Some(bad.digest.clone()),
                sequence: Some(bad.sequence),
                result: AttemptResult::Held,
                reason: format!(
                    "held by {}: {}; {} is Degraded and is not rolled back to {} while held (the Degraded bundle stays)",
                    h.by, h.reason, bad.digest, good.position.digest
                ),
                at: now_rfc3339(),
                writes: None,
            };
            tracing::warn!("{}", summary.reason);
            self.event(&Event::held(&summary.reason));
            let attempt = unless_repeat(&state, &summary, "rollback", false);
            return self.save(&state, summary, attempt, AttemptResult::Held, false);
        }
        tracing::warn!(from = %bad.digest, to = %good.position.digest, "rolling back: {why}");
        self.writes_start = self.target.writes();
        let rb = RolledBack { from: bad.clone(), to: good.position.clone(), at: now_rfc3339(), reason: why, released: false };
        let at = Attempted { digest: bad.digest.clone(), sequence: Some(bad.sequence), stage: "rollback", resync: false, rollback: Some(rb) };
        let prepared = self.prepare_rollback(&good).await;
        let (req, refused, allow_mass_prune) = match prepared {
            Ok(p) => p,
            Err(e) => {
                let e = StageError::Failed(format!("rollback of {} to {}: {}; the Degraded bundle stays", bad.digest, good.position.digest, e.message()));
                return self.finish(&state, at, Err(e), Vec::new());
            }
        };
        self.change(req, refused, state, at, allow_mass_prune, Vec::new()).await
    }

    /// The request that puts `good` back: from the verified cache, its signatures checked
    /// again only when the trust policy changed since it was applied, this agent's version
    /// and expectations checked (not the floor: going back below it is the point), its
    /// health rules, the plan policy (the objects it refuses now come back beside the
    /// request, as for any bundle).
    async fn prepare_rollback(&self, good: &LastHealthy) -> Result<(crate::targets::ApplyRequest, Vec<crate::targets::ObjectOutcome>, bool), StageError> {
        let digest = &good.position.digest;
        let bundle = fetch::from_cache(self.store(), &self.source.name, digest)?
            .ok_or_else(|| StageError::Failed(format!("{digest} is not in the local cache of verified bundles")))?;
        let signers = if good.policy_fingerprint == self.fingerprint {
            Vec::new()
        } else {
            verify::signatures(self.source.repo(), digest, &self.trust).await?
        };
        verify::agent_version(digest, &bundle.config)?;
        verify::expected(digest, &bundle.config, &self.expect)?;
        let health = wait::rules(digest, &bundle.config, &self.health_checks)?;
        let allow_mass_prune = bundle.config.allow_mass_prune;
        let unpacked = unpack::unpack(Verified { bundle, signers })?;
        let known = plan::cluster_kinds(self.target.as_ref(), &unpacked, &self.policy).await?;
        let (mut req, refused) = plan::plan(unpacked, &self.policy, &known, &self.source.name, &self.field_manager)?;
        req.health = health;
        Ok((req, refused, allow_mass_prune))
    }

    /// The rollback part of recording an apply of `digest`/`sequence` that ended `health`:
    /// a rollback's refusal is recorded; any other apply at or above a refused sequence
    /// ends it; a Healthy bundle becomes the next rollback's target.
    pub(super) fn roll_back_state(&self, state: &mut SourceState, at: &Attempted, digest: &str, sequence: u64, health: Health) {
        match &at.rollback {
            Some(rb) => {
                state.rolled_back = Some(rb.clone());
                self.shared.metrics.rolled_back(Some(rb));
            }
            None => {
                rollback::superseded(&mut state.rolled_back, state.applied_sequence);
                if state.rolled_back.as_ref().is_none_or(|r| r.released) {
                    self.shared.metrics.rolled_back(None);
                }
            }
        }
        if health == Health::Healthy {
            let position = Position { digest: digest.to_string(), sequence };
            state.last_healthy = Some(LastHealthy { position, policy_fingerprint: self.fingerprint.clone() });
        }
    }

    /// `drover-agent release --rollback` asked at `asked`: the refusal in force is lifted
    /// (the floor stays) and the channel's bundle is applied again from this poll on.
    pub(super) fn release_rollback(&mut self, state: &mut SourceState, asked: &str) {
        let Some(rb) = rollback::release(&mut state.rolled_back, asked) else {
            tracing::info!("release request ({asked}): no rollback refusal in force");
            return;
        };
        let note = format!("rollback refusal of {} (sequence {}) released by the operator; it is applied again when the channel names it", rb.from.digest, rb.from.sequence);
        tracing::warn!("{note}");
        self.event(&Event::rollback_released(&note));
        self.shared.metrics.rolled_back(None);
        if let Err(e) = self.store().record(state, &[]) {
            tracing::warn!("{e}");
        }
        self.publish(state, |_| {});
    }

    /// A poll that found the channel still naming the refused bundle: nothing applied.
    pub(super) fn refused_poll(&mut self, state: &SourceState) -> CycleOutcome {
        tracing::debug!("the channel names the bundle rolled back from; not applied");
        self.shared.metrics.poll(&AttemptResult::RolledBack.to_string());
        if self.last_apply.is_some() {
            self.shared.ready.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.publish(state, |st| st.consecutive_failures = 0);
        CycleOutcome { result: AttemptResult::RolledBack, unreachable: false }
    }
}
