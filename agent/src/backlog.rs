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
        let blank = AttemptSummary { digest: None, sequence: None, result: AttemptResult::Failed, reason: String::new(), at: String::new() };
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
