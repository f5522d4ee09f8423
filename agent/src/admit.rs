//! Stages 2 and 3 together (fetch, verify), in the order that downloads nothing the checks
//! before it have not admitted — an unsigned push costs an agent one manifest however
//! large its layer, a bundle for another cluster type costs its config but not its layer:
//!
//! 1. the manifest of the digest ([`fetch::manifest`], size-capped while streaming), or
//!    the whole bundle from the local cache of verified bundles;
//! 2. the signatures over the manifest digest against the trust policy
//!    ([`verify::signatures`]); skipped only when re-applying the applied digest under
//!    the very policy it was verified with (same [`Trust::fingerprint`]);
//! 3. the config blob ([`fetch::head`]);
//! 4. cluster type, environment and anti-rollback ([`verify::identity`]);
//! 5. the channel statement that places the bundle on the source's tag
//!    ([`verify::placement`]);
//! 6. the content layer ([`fetch::layer`]).

use crate::fetch;
use crate::record::{SourceState, Store};
use crate::resolve::Source;
use crate::stage::StageError;
use crate::verify::{self, Expectations, Trust, Verified};

/// An admitted bundle.
pub struct Admitted {
    /// The bundle and who signed it.
    pub verified: Verified,
    /// True when it was read from the local cache (nothing downloaded).
    pub from_cache: bool,
}

/// Where admission stopped.
#[derive(Debug)]
pub struct Stopped {
    /// The stage to record (`fetch` or `verify`).
    pub stage: &'static str,
    /// The bundle's sequence, when its config was read.
    pub sequence: Option<u64>,
    /// Why.
    pub error: StageError,
}

/// Everything admission reads besides the digest.
pub struct Admission<'a> {
    /// Where the bundle comes from.
    pub source: &'a Source,
    /// The cache of verified bundles.
    pub store: &'a Store,
    /// The trust policy.
    pub trust: &'a Trust,
    /// Its fingerprint ([`Trust::fingerprint`]).
    pub fingerprint: &'a str,
    /// Expected cluster type and environment.
    pub expect: &'a Expectations,
    /// The applied state (anti-rollback floor, the policy the applied digest was verified under).
    pub state: &'a SourceState,
}

fn stop(stage: &'static str, sequence: Option<u64>) -> impl FnOnce(StageError) -> Stopped {
    move |error| Stopped { stage, sequence, error }
}

impl Admission<'_> {
    /// Admits `digest` or says where and why it stopped.
    pub async fn admit(&self, digest: &str) -> Result<Admitted, Stopped> {
        let cached = fetch::from_cache(self.store, &self.source.name, digest).unwrap_or_else(|e| {
            tracing::warn!("{e}");
            None
        });
        if let Some(bundle) = cached {
            let signers = self.signatures(digest, true).await.map_err(stop("verify", None))?;
            let sequence = Some(bundle.config.sequence);
            verify::identity(digest, &bundle.config, self.expect, self.state).map_err(stop("verify", sequence))?;
            self.placement(digest, &bundle.config).await.map_err(stop("verify", sequence))?;
            return Ok(Admitted { verified: Verified { bundle, signers }, from_cache: true });
        }
        let manifest = fetch::manifest(self.source, digest).await.map_err(stop("fetch", None))?;
        let signers = self.signatures(digest, false).await.map_err(stop("verify", None))?;
        let head = fetch::head(self.source, manifest, digest).await.map_err(stop("fetch", None))?;
        let sequence = Some(head.config.sequence);
        verify::identity(digest, &head.config, self.expect, self.state).map_err(stop("verify", sequence))?;
        self.placement(digest, &head.config).await.map_err(stop("verify", sequence))?;
        let bundle = fetch::layer(self.source, head).await.map_err(stop("fetch", sequence))?;
        Ok(Admitted { verified: Verified { bundle, signers }, from_cache: false })
    }

    /// Step 5: the signed channel statement for the source's tag.
    async fn placement(&self, digest: &str, cfg: &drover_proto::config::BundleConfig) -> Result<(), StageError> {
        verify::placement(self.source.repo(), &self.source.lookup, digest, cfg, self.trust, self.state).await
    }

    /// True when `digest` is the applied one and was verified under the current policy.
    pub fn verified_under_current_policy(&self, digest: &str) -> bool {
        self.state.applied_digest.as_deref() == Some(digest) && self.state.policy_fingerprint.as_deref() == Some(self.fingerprint)
    }

    /// Step 2. Skipped only for a bundle from this agent's own cache (`cached`: it
    /// verified it itself) that is the applied digest under the current policy; the
    /// applied digest may come from the target's record, which never skips a check. The
    /// applied digest is re-verified when the policy changed since it was applied; the
    /// errors then say so (and an unreachable source means: not re-applied).
    async fn signatures(&self, digest: &str, cached: bool) -> Result<Vec<String>, StageError> {
        if cached && self.verified_under_current_policy(digest) {
            return Ok(Vec::new());
        }
        let reverify = self.state.applied_digest.as_deref() == Some(digest);
        match verify::signatures(self.source.repo(), digest, self.trust).await {
            Err(StageError::Unreachable(m)) if reverify => Err(StageError::Unreachable(format!(
                "the trust policy changed since {digest} was applied and it cannot be re-verified now ({m}); not re-applying it until it is"
            ))),
            Err(StageError::Rejected { reason, message }) if reverify => Err(StageError::Rejected {
                reason,
                message: format!("the trust policy changed since {digest} was applied and it does not satisfy the current one; not re-applying it: {message}"),
            }),
            other => other,
        }
    }
}
