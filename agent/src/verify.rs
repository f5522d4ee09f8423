//! Stage 3, verify: the checks that admit a digest, each run as soon as what it needs is
//! in hand ([`crate::admit`] orders them with the downloads): the trust policy over the
//! manifest digest ([`signatures`], fail closed) before any blob is read, then the signed
//! config's cluster type and environment and anti-rollback ([`identity`]) and the signed
//! channel statement ([`placement`]) before the content layer is read. Also the trust
//! policy's [`Trust::fingerprint`], recorded with the applied digest so that a changed
//! policy re-verifies it.

use drover_proto::channel::admits::admits;
use drover_proto::channel::statement;
use drover_proto::channel::{ChannelError, Position};
use drover_proto::digest::is_valid_digest;
use drover_proto::config::BundleConfig;
use drover_proto::digest::sha256_digest;
use drover_proto::trust::{self, TrustError, TrustPolicy};
use drover_proto::{FetchedBundle, Repo};

use crate::record::SourceState;
use crate::stage::StageError;

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

/// The fingerprint recorded for `--insecure-skip-verify`.
pub const INSECURE_FINGERPRINT: &str = "insecure";

impl Trust {
    /// Identifies the policy: `sha256:` over the threshold and the sorted fingerprints of
    /// the trusted keys (where the key files live does not matter), or `insecure`. Two
    /// policies with the same fingerprint accept exactly the same signatures.
    pub fn fingerprint(&self) -> String {
        match self {
            Trust::SkipInsecure => INSECURE_FINGERPRINT.to_string(),
            Trust::Policy(p) => {
                let mut keys: Vec<&str> = p.keys.iter().map(|k| k.fingerprint()).collect();
                keys.sort_unstable();
                keys.dedup();
                let text = format!("drover-trust-policy-v1\nthreshold {}\n{}\n", p.threshold, keys.join("\n"));
                sha256_digest(text.as_bytes())
            }
        }
    }
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

/// Checks the signatures of `digest` in `repo` against the policy (nothing to check with
/// `--insecure-skip-verify`). Returns the fingerprints of the keys that signed. Reads
/// only the signature manifest and its payloads: the bundle's own blobs are not needed,
/// the signatures bind the manifest digest and the manifest binds every blob.
pub async fn signatures(repo: &Repo, digest: &str, trust: &Trust) -> Result<Vec<String>, StageError> {
    let Trust::Policy(policy) = trust else { return Ok(Vec::new()) };
    match trust::verify(repo, digest, policy).await {
        Ok(v) if v.satisfied => Ok(v.matched.iter().map(|m| m.fingerprint.clone()).collect()),
        Ok(v) => Err(reject("signature", format!("{digest}: signature policy not satisfied: {}", v.failure_summary()))),
        Err(TrustError::Store(e)) => Err(StageError::Unreachable(format!("reading signatures of {digest}: {e}"))),
        Err(e @ TrustError::Unsigned { .. }) => Err(reject("unsigned", e.to_string())),
        Err(e @ TrustError::Tampered { .. }) => Err(reject("tampered", e.to_string())),
        Err(e @ TrustError::NotSatisfied(_)) => Err(reject("signature", e.to_string())),
        Err(e) => Err(reject("policy", e.to_string())),
    }
}

/// The version of this agent (what a bundle's `minAgentVersion` is compared with).
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Refuses a bundle whose signed config needs a newer agent (reason `agent-too-old`,
/// naming both versions; docs/bundle.md, "Compatibility").
pub fn agent_version(digest: &str, cfg: &BundleConfig) -> Result<(), StageError> {
    drover_proto::compat::check(cfg.min_agent_version.as_deref(), AGENT_VERSION).map_err(|m| reject("agent-too-old", format!("{digest}: {m}")))
}

/// Checks the signed config of `digest` against this agent's version and what it expects
/// (cluster type, environment), and against the applied state (anti-rollback).
pub fn identity(digest: &str, cfg: &BundleConfig, expect: &Expectations, state: &SourceState) -> Result<(), StageError> {
    agent_version(digest, cfg)?;
    expected(digest, cfg, expect)?;
    check_rollback(digest, cfg.sequence, state)
}

/// The signed config's cluster type and environment against what this agent expects.
pub fn expected(digest: &str, cfg: &BundleConfig, expect: &Expectations) -> Result<(), StageError> {
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
    Ok(())
}

/// The channel rule (docs/design.md §4, "Channel statements"): a bundle the source's tag
/// names is applied only when that channel's signed statement places it there (same
/// digest and sequence, signed to the trust policy's threshold). Not asked for a source
/// that names a digest or the bundle's own history tag (they certify themselves), for the
/// applied bundle (a resync: it was admitted when it was applied) or with
/// `--insecure-skip-verify`. Reads the statement manifest (the statement embedded) and its
/// signature manifest.
pub async fn placement(repo: &Repo, lookup: &str, digest: &str, cfg: &BundleConfig, trust: &Trust, state: &SourceState) -> Result<(), StageError> {
    let Trust::Policy(policy) = trust else { return Ok(()) };
    if is_valid_digest(lookup) || state.applied_digest.as_deref() == Some(digest) || statement::self_certifying(lookup, &cfg.environment, cfg.sequence) {
        return Ok(());
    }
    let placement = match statement::read(repo, lookup, policy).await {
        Ok(p) => p,
        Err(ChannelError::Store(e)) => return Err(StageError::Unreachable(format!("reading the channel statement of {}: {e}", repo.describe(lookup)))),
        Err(e) => return Err(reject("channel", e.to_string())),
    };
    statement::check(&placement, repo, lookup, digest, cfg.sequence).map(|_| ()).map_err(|m| reject("channel", m))
}

/// Anti-rollback against the applied state: the channel module's admission rule
/// (`drover_proto::channel::admits`, the same never-lower rule every command obeys). The
/// floor is the applied bundle, raised to a bundle this agent rolled back from
/// ([`crate::rollback::floor`]); the applied bundle itself is re-applied (a resync) below it.
pub fn check_rollback(digest: &str, sequence: u64, state: &SourceState) -> Result<(), StageError> {
    if state.applied_digest.as_deref() == Some(digest) && state.applied_sequence == Some(sequence) {
        return Ok(());
    }
    let floor: Option<Position> = state.floor();
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

    #[test]
    fn fingerprint_depends_on_keys_and_threshold_only() {
        use drover_proto::keys::PrivateKey;
        let (ka, kb) = (PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap());
        let (a, b) = (ka.public_key(), kb.public_key());
        let fp = |keys: Vec<&drover_proto::keys::PublicKey>, t| {
            Trust::Policy(TrustPolicy::new(keys.into_iter().cloned().collect(), t).unwrap()).fingerprint()
        };
        assert_eq!(fp(vec![a, b], 1), fp(vec![b, a], 1));
        assert_ne!(fp(vec![a, b], 1), fp(vec![a, b], 2));
        assert_ne!(fp(vec![a, b], 1), fp(vec![a], 1));
        assert_ne!(fp(vec![a], 1), fp(vec![b], 1));
        assert_eq!(Trust::SkipInsecure.fingerprint(), INSECURE_FINGERPRINT);
    }
}
