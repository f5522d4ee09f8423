//! The signatures of what `drover inspect` shows: found, and judged against
//! `--trust-key` when given (`drover_proto::trust::verify`, the rule every reader applies).

use anyhow::Context;
use drover_proto::digest::signature_tag;
use drover_proto::trust::{self, TrustError, TrustPolicy};
use drover_proto::Repo;
use serde::Serialize;

/// The signatures of a manifest digest, as `inspect` shows them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Signatures {
    /// The signature manifest's tag (`sha256-<hex>.sig`).
    pub tag: String,
    /// True when it exists.
    pub present: bool,
    /// Their state against `--trust-key` (absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<Judged>,
}

/// Signatures judged against a trust policy.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Judged {
    /// True when at least `threshold` distinct trusted keys signed.
    pub satisfied: bool,
    /// Distinct trusted keys required.
    pub threshold: usize,
    /// Fingerprints of the trusted keys that signed.
    pub signed_by: Vec<String>,
    /// Why it is not satisfied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Signatures {
    /// The signatures of `digest` in `repo`, judged against `policy` when given.
    pub(super) async fn of(repo: &Repo, digest: &str, policy: Option<&TrustPolicy>) -> anyhow::Result<Signatures> {
        let tag = signature_tag(digest);
        let present = repo.resolve(&tag).await.map(|d| d.is_some()).unwrap_or(false);
        let Some(policy) = policy else { return Ok(Signatures { tag, present, verified: None }) };
        let threshold = policy.threshold;
        let judged = match trust::verify(repo, digest, policy).await {
            Ok(v) => Judged { satisfied: v.satisfied, threshold, signed_by: v.matched.iter().map(|m| m.fingerprint.clone()).collect(), reason: None },
            Err(TrustError::Store(e)) => return Err(e).with_context(|| format!("reading the signatures of {}", repo.describe(digest))),
            Err(TrustError::NotSatisfied(v)) => Judged {
                satisfied: false,
                threshold,
                signed_by: v.matched.iter().map(|m| m.fingerprint.clone()).collect(),
                reason: Some(TrustError::NotSatisfied(v).to_string()),
            },
            Err(e) => Judged { satisfied: false, threshold, signed_by: Vec::new(), reason: Some(e.to_string()) },
        };
        Ok(Signatures { tag, present, verified: Some(judged) })
    }

    /// One line: verified (by whom), not satisfied (why), or only found.
    pub(super) fn line(&self) -> String {
        match (&self.verified, self.present) {
            (Some(j), _) if j.satisfied => {
                let by: Vec<&str> = j.signed_by.iter().map(|f| &f[..f.len().min(12)]).collect();
                format!("verified: {} of {} required trusted key(s) signed ({})", j.signed_by.len(), j.threshold, by.join(", "))
            }
            (Some(j), _) => format!("NOT verified: {}", j.reason.as_deref().unwrap_or("not satisfied")),
            (None, true) => format!("present at {} (not verified: pass --trust-key PUB)", self.tag),
            (None, false) => "none".into(),
        }
    }
}
