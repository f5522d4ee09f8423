//! `drover verify REF --trust-key PUB... [--threshold N]`: exit 0 only when an agent with
//! the same keys and threshold would apply what REF names: at least N distinct trusted
//! keys signed this exact digest and, for a channel tag, the channel's signed statement
//! (docs/design.md §4) places this digest there, signed to the same policy — the agent's
//! own rule (`drover_proto::channel::statement::check`), with the same next step when it
//! refuses. Reports matched keys and why others failed. A digest (`REPO@sha256:…`) or a
//! history tag names the bundle alone: only its signatures are checked.

use drover_proto::channel::statement::{self, Placement, Statement};
use drover_proto::digest::is_valid_digest;
use drover_proto::trust::{verify_stored, TrustError, TrustPolicy, Verification};
use drover_proto::Repo;
use serde::Serialize;

use crate::output::{Report, Text};
use crate::regargs::RegistryArgs;
use crate::signing::{open_reference, resolve_digest};
use crate::trustargs::TrustArgs;

/// Arguments of `drover verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bundle: HOST/REPO:TAG, HOST/REPO@sha256:..., oci:DIR:TAG or oci-archive:FILE:TAG.
    pub reference: String,
    /// Trusted keys and threshold.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// The outcome for one trusted key.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyOutcome {
    /// Key fingerprint (hex sha256 of the DER SubjectPublicKeyInfo).
    pub fingerprint: String,
    /// Where the key was loaded from.
    pub key: String,
    /// True when it signed this exact digest.
    pub matched: bool,
    /// Why it did not count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A trusted key that signed the digest (each counted once).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchedKey {
    /// Key fingerprint.
    pub fingerprint: String,
    /// Where the key was loaded from.
    pub key: String,
    /// Index of the first signature layer it verified.
    pub layer: usize,
    /// The payload's docker-reference (informational: bundles are relocated).
    pub docker_reference: String,
}

/// The outcome for one signature layer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayerOutcome {
    /// Position in the signature manifest.
    pub index: usize,
    /// Layer (payload) digest.
    pub digest: String,
    /// Fingerprints of the trusted keys whose signature over this layer verifies.
    pub signed_by: Vec<String>,
    /// Why the layer does not count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The channel statement of a tag, as `verify` found it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelOutcome {
    /// The channel (the tag).
    pub channel: String,
    /// Where its statement is.
    pub statement_reference: String,
    /// True when a statement signed to the policy places this digest (and its sequence) there.
    pub placed: bool,
    /// The statement, when one verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement: Option<Statement>,
    /// Fingerprints of the trusted keys that signed the statement.
    pub signed_by: Vec<String>,
    /// Why the digest is not placed (agents following the tag refuse it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// What `verify` found (`-o json`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// The reference as given.
    pub reference: String,
    /// The manifest digest it names.
    pub digest: String,
    /// True when at least `threshold` distinct trusted keys signed `digest`.
    pub satisfied: bool,
    /// True when an agent with the same keys and threshold following the reference would
    /// apply it: `satisfied` and, for a channel tag, `channel.placed` (the exit code).
    pub accepted: bool,
    /// Distinct trusted keys required.
    pub threshold: usize,
    /// The signature manifest that was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_reference: Option<String>,
    /// The trusted keys that signed.
    pub matched: Vec<MatchedKey>,
    /// Per trusted key.
    pub keys: Vec<KeyOutcome>,
    /// Per signature layer.
    pub layers: Vec<LayerOutcome>,
    /// Why verification refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The channel statement, when the reference names a tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelOutcome>,
}

impl VerifyReport {
    fn new(reference: &str, digest: &str, threshold: usize, v: Option<&Verification>, error: Option<String>) -> Self {
        VerifyReport {
            reference: reference.to_string(),
            digest: digest.to_string(),
            satisfied: error.is_none() && v.is_some_and(|v| v.satisfied),
            accepted: error.is_none() && v.is_some_and(|v| v.satisfied),
            threshold: v.map(|v| v.threshold).unwrap_or(threshold),
            signature_reference: v.map(|v| v.signature_reference.clone()),
            matched: v
                .map(|v| {
                    v.matched
                        .iter()
                        .map(|m| MatchedKey {
                            fingerprint: m.fingerprint.clone(),
                            key: m.key.clone(),
                            layer: m.layer,
                            docker_reference: m.docker_reference.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            keys: v
                .map(|v| {
                    v.keys
                        .iter()
                        .map(|k| KeyOutcome { fingerprint: k.fingerprint.clone(), key: k.key.clone(), matched: k.matched, reason: k.reason.clone() })
                        .collect()
                })
                .unwrap_or_default(),
            layers: v
                .map(|v| {
                    v.layers
                        .iter()
                        .map(|l| LayerOutcome { index: l.index, digest: l.digest.clone(), signed_by: l.signed_by.clone(), problem: l.problem.clone() })
                        .collect()
                })
                .unwrap_or_default(),
            error,
            channel: None,
        }
    }
}

/// The channel statement of tag `lookup` for `digest`: what an agent following the tag
/// checks. `None` for a digest or a history tag (which certifies itself).
async fn channel(repo: &Repo, lookup: Option<&str>, digest: &str, policy: &TrustPolicy) -> anyhow::Result<Option<ChannelOutcome>> {
    let Some(tag) = lookup.filter(|l| !is_valid_digest(l) && !statement::is_statement_tag(l) && !l.ends_with(".sig")) else { return Ok(None) };
    let Ok(statement_tag) = statement::tag(tag) else { return Ok(None) };
    let limits = drover_proto::repo::FetchLimits::default();
    let Ok((bytes, _)) = repo.manifest(digest, limits.manifest).await else { return Ok(None) };
    let Ok(head) = repo.fetch_bundle_head(bytes, digest.to_string(), &limits).await else { return Ok(None) };
    if statement::self_certifying(tag, &head.config.environment, head.config.sequence) {
        return Ok(None);
    }
    let placement = statement::read(repo, tag, policy).await?;
    let checked = statement::check(&placement, repo, tag, digest, head.config.sequence);
    let (statement, signed_by) = match &placement {
        Placement::Trusted { statement, verification, .. } => {
            (Some(statement.clone()), verification.matched.iter().map(|m| m.fingerprint.clone()).collect())
        }
        _ => (None, Vec::new()),
    };
    Ok(Some(ChannelOutcome {
        channel: tag.to_string(),
        statement_reference: repo.describe(&statement_tag),
        placed: checked.is_ok(),
        statement,
        signed_by,
        problem: checked.err(),
    }))
}

impl Report for VerifyReport {
    fn write_text(&self, out: &mut Text) {
        if !self.keys.is_empty() {
            let rows: Vec<Vec<String>> = self
                .keys
                .iter()
                .map(|k| {
                    let result = if k.matched { "signed" } else { "NO" };
                    vec![k.fingerprint.clone(), k.key.clone(), result.into(), k.reason.clone().unwrap_or_default()]
                })
                .collect();
            out.table(&["FINGERPRINT", "KEY", "RESULT", "REASON"], &rows);
        }
        out.line(format!("{} of {} required key(s) signed {}", self.matched.len(), self.threshold, self.digest));
        if let Some(c) = &self.channel {
            match (&c.statement, &c.problem) {
                (Some(s), None) => out.line(format!(
                    "channel {}: placed by {} (sequence {}, {}; signed by {})",
                    c.channel,
                    c.statement_reference,
                    s.sequence,
                    s.time,
                    c.signed_by.iter().map(|f| &f[..12]).collect::<Vec<_>>().join(", ")
                )),
                (_, _) => out.line(format!("channel {}: NOT placed, agents following it refuse it", c.channel)),
            }
        }
    }

    fn failure(&self) -> Option<String> {
        if !self.satisfied {
            return Some(format!("verifying {}: {}", self.reference, self.error.as_deref().unwrap_or("not satisfied")));
        }
        let c = self.channel.as_ref().filter(|c| !c.placed)?;
        Some(format!(
            "verifying {}: the bundle's signatures satisfy the policy, but agents following channel {} refuse it: {}",
            self.reference,
            c.channel,
            c.problem.as_deref().unwrap_or("no statement places it")
        ))
    }
}

/// Runs `drover verify`: the report says whether the policy is satisfied (exit 1 when not).
pub async fn run(args: Args) -> anyhow::Result<VerifyReport> {
    let policy = args.trust.policy()?;
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, lookup, _) = open_reference(&args.reference, &client, false)?;
    let digest = resolve_digest(&repo, lookup.as_deref(), &args.reference).await?;
    let report = match verify_stored(&repo, &digest, &policy).await {
        Ok(v) => VerifyReport::new(&args.reference, &digest, args.trust.threshold, Some(&v), None),
        Err(TrustError::NotSatisfied(v)) => {
            let why = TrustError::NotSatisfied(v.clone()).to_string();
            VerifyReport::new(&args.reference, &digest, args.trust.threshold, Some(&v), Some(why))
        }
        Err(e) => VerifyReport::new(&args.reference, &digest, args.trust.threshold, None, Some(e.to_string())),
    };
    let channel = if report.satisfied { channel(&repo, lookup.as_deref(), &digest, &policy).await? } else { None };
    let accepted = report.satisfied && channel.as_ref().is_none_or(|c| c.placed);
    Ok(VerifyReport { channel, accepted, ..report })
}
