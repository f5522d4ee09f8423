//! The stage contract: what every pipeline stage (`resolve`, `fetch`, `verify`, `unpack`,
//! `plan`, `apply`, `prune`) returns when it stops the pipeline. Stages depend on this
//! module, never on `pipeline` (which wires them).

/// Every `reason` of [`StageError::Rejected`] (the label values of
/// `drover_verification_failures_total`, exported at 0 from the start so that an alert on
/// `increase(...)` sees the first refusal).
pub const REJECT_REASONS: &[&str] =
    &["unsigned", "signature", "tampered", "policy", "sequence", "rollback", "cluster_type", "environment", "fetch", "content", "channel", "agent-too-old", "health-rule"];

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

#[cfg(test)]
mod tests {
    /// Every reason label written in the stages is one of [`super::REJECT_REASONS`].
    #[test]
    fn reject_reasons_are_listed() {
        let sources = [include_str!("verify.rs"), include_str!("fetch.rs"), include_str!("unpack.rs"), include_str!("plan.rs"), include_str!("wait.rs")];
        let mut found = 0;
        for src in sources {
            for pat in ["reject(\"", "reason: \""] {
                for (i, _) in src.match_indices(pat) {
                    let rest = &src[i + pat.len()..];
                    let label = &rest[..rest.find('"').expect("closing quote")];
                    assert!(super::REJECT_REASONS.contains(&label), "reason {label:?} is not in REJECT_REASONS");
                    found += 1;
                }
            }
        }
        assert!(found >= 10, "found only {found} reasons");
    }
}
