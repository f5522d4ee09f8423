//! Stage 3, verify: the trust policy (signatures, fail closed), then the signed config's
//! cluster type and environment against what this agent expects, then anti-rollback
//! (a sequence lower than the applied one is refused; equal only with the same digest).

use drover_proto::channel::admits::admits;
use drover_proto::channel::{ChannelError, Position};
use drover_proto::trust::{self, TrustError, TrustPolicy};
use drover_proto::{FetchedBundle, Repo};

use crate::stage::StageError;
use crate::record::SourceState;

/// What the bundle must match besides its signatures.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    /// Required `clusterType`.
    pub cluster_type: Option<String>,
    /// Required `environment`.
    pub environment: Option<String>,
}

/// How signatures are checked.
pub enum Trust {
    /// Against a policy (keys + threshold).
    Policy(TrustPolicy),
    /// Not at all (`--insecure-skip-verify`).
    SkipInsecure,
}

/// A bundle that passed every check of this stage.
pub struct Verified {
    /// The bundle.
    pub bundle: FetchedBundle,
    /// Fingerprints of the keys that signed (empty when skipped).
    pub signers: Vec<String>,
}

fn reject(reason: &'static str, message: String) -> StageError {
    StageError::Rejected { reason, message }
}

/// Checks signatures in `repo` (unless `skip_signatures`: re-applying an already applied
/// digest from the cache), expectations and anti-rollback against `state`.
pub async fn verify(
    repo: &Repo,
    bundle: FetchedBundle,
    trust: &Trust,
    skip_signatures: bool,
    expect: &Expectations,
    state: &SourceState,
) -> Result<Verified, StageError> {
    let digest = bundle.digest.clone();
    let mut signers = Vec::new();
    if let (Trust::Policy(policy), false) = (trust, skip_signatures) {
        match trust::verify(repo, &digest, policy).await {
            Ok(v) if v.satisfied => signers = v.matched.iter().map(|m| m.fingerprint.clone()).collect(),
            Ok(v) => return Err(reject("signature", format!("{digest}: signature policy not satisfied: {}", v.failure_summary()))),
            Err(TrustError::Store(e)) => return Err(StageError::Unreachable(format!("reading signatures of {digest}: {e}"))),
            Err(e @ TrustError::Unsigned { .. }) => return Err(reject("unsigned", e.to_string())),
            Err(e @ TrustError::Tampered { .. }) => return Err(reject("tampered", e.to_string())),
            Err(e @ TrustError::NotSatisfied(_)) => return Err(reject("signature", e.to_string())),
            Err(e) => return Err(reject("policy", e.to_string())),
        }
    }
    let cfg = &bundle.config;
    if let Some(want) = &expect.cluster_type {
        if &cfg.cluster_type != want {
            return Err(reject(
                "cluster_type",
                format!("{digest} is for cluster type {:?}, this agent expects {want:?}", cfg.cluster_type),
            ));
        }
    }
    if let Some(want) = &expect.environment {
        if &cfg.environment != want {
            return Err(reject(
                "environment",
                format!("{digest} is for environment {:?}, this agent expects {want:?}", cfg.environment),
            ));
        }
    }
    check_rollback(&digest, cfg.sequence, state)?;
    Ok(Verified { bundle, signers })
}

/// Anti-rollback against the applied state: the channel module's admission rule
/// (`drover_proto::channel::admits`, the same never-lower rule every command obeys).
pub fn check_rollback(digest: &str, sequence: u64, state: &SourceState) -> Result<(), StageError> {
    let floor = match (state.applied_sequence, state.applied_digest.as_deref()) {
        (Some(sequence), Some(digest)) => Some(Position { digest: digest.to_string(), sequence }),
        _ => None,
    };
    let candidate = Position { digest: digest.to_string(), sequence };
    admits(&state.source, floor.as_ref(), &candidate).map(|_| ()).map_err(|e| match e {
        ChannelError::Implausible { .. } => reject("sequence", e.to_string()),
        e => reject("rollback", e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_rules() {
        let st = SourceState { applied_sequence: Some(5), applied_digest: Some("sha256:a".into()), ..Default::default() };
        assert!(check_rollback("sha256:b", 4, &st).is_err());
        assert!(check_rollback("sha256:b", 5, &st).is_err());
        assert!(check_rollback("sha256:a", 5, &st).is_ok());
        assert!(check_rollback("sha256:b", 6, &st).is_ok());
        assert!(check_rollback("sha256:b", 0, &SourceState::default()).is_ok());
    }
}
