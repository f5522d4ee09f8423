//! The stage contract: what every pipeline stage (`resolve`, `fetch`, `verify`, `unpack`,
//! `plan`, `apply`, `prune`) returns when it stops the pipeline. Stages depend on this
//! module, never on `pipeline` (which wires them).

/// Why a stage stopped the pipeline.
#[derive(Debug, Clone)]
pub enum StageError {
    /// The source could not be reached (retried with backoff; what is applied stays).
    Unreachable(String),
    /// The bundle was refused; `reason` is the metric label.
    Rejected {
        /// Short reason label (`unsigned`, `signature`, `rollback`, `content`, ...).
        reason: &'static str,
        /// Full message.
        message: String,
    },
    /// Something failed locally (target, database).
    Failed(String),
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl StageError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            StageError::Unreachable(m) | StageError::Failed(m) => m,
            StageError::Rejected { message, .. } => message,
        }
    }
}
