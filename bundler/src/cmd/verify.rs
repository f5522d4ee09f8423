//! `drover verify REF --key PUB... [--threshold N]`: exit 0 only when at least N distinct
//! trusted keys signed this exact digest; reports matched keys and why others failed.


use drover_proto::trust::{verify, TrustError, Verification};
use serde::Serialize;

use crate::output::{print_json, print_table, OutputFormat};
use crate::regargs::RegistryArgs;
use crate::trustargs::TrustArgs;
use crate::signing::{open_reference, resolve_digest};

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

/// The `-o json` document.
#[derive(Serialize)]
struct Report<'a> {
    reference: &'a str,
    digest: &'a str,
    satisfied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    verification: Option<&'a Verification>,
}

/// Runs `drover verify`.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    let policy = args.trust.policy()?;
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, lookup, _) = open_reference(&args.reference, &client, false)?;
    let digest = resolve_digest(&repo, lookup.as_deref(), &args.reference).await?;
    let result = verify(&repo, &digest, &policy).await;
    let (verification, error) = match &result {
        Ok(v) => (Some(v), None),
        Err(TrustError::NotSatisfied(v)) => (Some(v.as_ref()), Some(result.as_ref().unwrap_err().to_string())),
        Err(e) => (None, Some(e.to_string())),
    };
    match out {
        OutputFormat::Json => print_json(&Report {
            reference: &args.reference,
            digest: &digest,
            satisfied: result.is_ok(),
            error: error.clone(),
            verification,
        })?,
        OutputFormat::Table => {
            if let Some(v) = verification {
                let rows: Vec<Vec<String>> = v
                    .keys
                    .iter()
                    .map(|k| {
                        vec![
                            k.fingerprint.clone(),
                            k.key.clone(),
                            if k.matched { "signed".into() } else { "NO".into() },
                            k.reason.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                print_table(&["FINGERPRINT", "KEY", "RESULT", "REASON"], &rows);
                println!("{} of {} required key(s) signed {digest}", v.matched.len(), v.threshold);
            }
        }
    }
    match result {
        Ok(_) => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context(format!("verifying {}", args.reference))),
    }
}
