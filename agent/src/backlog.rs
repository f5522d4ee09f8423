//! What the state database could not take yet. A full disk or a read-only volume under
//! `--state-dir` does not stop the agent: the source's state and the attempts are kept in
//! memory (the last attempt `Failed`, stage `record`, with a reason naming the database
//! and what to do) and written, oldest attempt first, by the first write that succeeds.

use std::path::Path;

use drover_proto::time::now_rfc3339;

use crate::record::{Attempt, AttemptResult, AttemptSummary, RecordError, SourceState, Store, HISTORY_CAP};

/// The newest state of the source and the attempts not written yet.
#[derive(Default)]
pub struct Backlog {
    state: SourceState,
    /// Oldest first, at most [`HISTORY_CAP`].
    attempts: Vec<Attempt>,
}

impl Backlog {
    /// Replaces the state and adds `attempt` to what must be written.
    pub fn push(&mut self, state: SourceState, attempt: Option<Attempt>) {
        self.state = state;
        self.attempts.extend(attempt);
        let over = self.attempts.len().saturating_sub(HISTORY_CAP);
        self.attempts.drain(..over);
    }

    /// The newest state.
    pub fn state(&self) -> &SourceState {
        &self.state
    }

    /// Writes the state and the attempts in one flush.
    pub fn write(&self, store: &Store) -> Result<(), RecordError> {
        store.record(&self.state, &self.attempts)?;
        if self.attempts.len() > 1 {
            tracing::info!("state database {}: written again, with {} attempt(s) kept in memory meanwhile", store.path().display(), self.attempts.len());
        }
        Ok(())
    }

    /// The database refused the write `e`: the last attempt becomes `Failed`, its reason
    /// says what happened, that it was not recorded and what to do; the first such failure
    /// per reason joins the attempts (and the log).
    pub fn not_written(&mut self, e: &RecordError, db: &Path) {
        let blank = AttemptSummary { digest: None, sequence: None, result: AttemptResult::Failed, reason: String::new(), at: String::new(), writes: None };
        let last = self.state.last_attempt.clone().unwrap_or(blank);
        let what = if last.reason.is_empty() { last.result.to_string() } else { format!("{} ({})", last.result, last.reason) };
        let reason = format!(
            "{what}, not recorded: {e}; the agent runs on from memory and writes its state once it can: free space on the volume of {} \
             or make it writable (a restart before that starts from the state written last)",
            db.display()
        );
        let summary = AttemptSummary { result: AttemptResult::Failed, reason: reason.clone(), at: now_rfc3339(), ..last };
        if !self.attempts.iter().any(|a| a.stage == "record" && a.summary.reason == reason) {
            tracing::error!("{reason}");
            let attempt = Attempt::plain(&self.state.source, summary.clone(), "record", false);
            self.push(self.state.clone(), Some(attempt));
        }
        self.state.last_attempt = Some(summary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(result: AttemptResult, reason: &str) -> AttemptSummary {
        AttemptSummary { digest: Some("sha256:aa".into()), sequence: Some(7), result, reason: reason.into(), at: "t".into(), writes: None }
    }

    #[test]
    fn an_unwritten_attempt_turns_failed_once_per_error_keeping_what_happened() {
        let e = RecordError::Db { path: "/var/lib/drover/db".into(), message: "I/O error: No space left on device (os error 28)".into() };
        let mut b = Backlog::default();
        let state = SourceState { source: "reg/fleet/edge:prod".into(), last_attempt: Some(summary(AttemptResult::Applied, "")), ..Default::default() };
        let applied = Attempt::plain("reg/fleet/edge:prod", summary(AttemptResult::Applied, ""), "record", true);
        b.push(state.clone(), Some(applied.clone()));
        b.not_written(&e, Path::new("/var/lib/drover/db"));
        let last = b.state().last_attempt.clone().unwrap();
        assert_eq!((last.result, last.digest.as_deref(), last.sequence), (AttemptResult::Failed, Some("sha256:aa"), Some(7)));
        assert!(last.reason.starts_with("Applied, not recorded: state database /var/lib/drover/db: I/O error: No space left"), "{}", last.reason);
        assert!(last.reason.contains("free space on the volume of /var/lib/drover/db or make it writable"), "{}", last.reason);
        // The next resync fails the same way: kept, but the failure is not repeated.
        b.push(state, Some(applied));
        b.not_written(&e, Path::new("/var/lib/drover/db"));
        let stages: Vec<&str> = b.attempts.iter().map(|a| a.stage.as_str()).collect();
        assert_eq!(stages, ["record", "record", "record"]);
        let failed = b.attempts.iter().filter(|a| a.summary.result == AttemptResult::Failed).count();
        assert_eq!(failed, 1, "one Failed entry per error");
        // A failed attempt keeps its own reason in front.
        let mut b = Backlog::default();
        let refused = SourceState { last_attempt: Some(summary(AttemptResult::Failed, "apply of sha256:aa failed")), ..Default::default() };
        b.push(refused, None);
        b.not_written(&e, Path::new("/d"));
        assert!(b.state().last_attempt.as_ref().unwrap().reason.starts_with("Failed (apply of sha256:aa failed), not recorded: "));
    }

    #[test]
    fn at_most_the_history_cap_waits() {
        let mut b = Backlog::default();
        for i in 0..(HISTORY_CAP + 30) {
            let a = Attempt::plain("s", summary(AttemptResult::Applied, &i.to_string()), "record", true);
            b.push(SourceState::default(), Some(a));
        }
        assert_eq!(b.attempts.len(), HISTORY_CAP);
        assert_eq!(b.attempts[0].summary.reason, "30", "the oldest are dropped");
    }
}
