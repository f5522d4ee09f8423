//! `drover verify REF --trust-key PUB... [--threshold N]`: exit 0 only when at least N
//! distinct trusted keys signed this exact digest; reports matched keys and why others
//! failed.

use drover_proto::trust::{verify_stored, TrustError, Verification};
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
}

impl VerifyReport {
    fn new(reference: &str, digest: &str, threshold: usize, v: Option<&Verification>, error: Option<String>) -> Self {
        VerifyReport {
            reference: reference.to_string(),
            digest: digest.to_string(),
            satisfied: error.is_none() && v.is_some_and(|v| v.satisfied),
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
        }
    }
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
    }

    fn failure(&self) -> Option<String> {
        (!self.satisfied).then(|| format!("verifying {}: {}", self.reference, self.error.as_deref().unwrap_or("not satisfied")))
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
    Ok(report)
}
