//! `drover sign REF --key K [--trust-key PUB]`: adds a cosign-compatible signature to an
//! existing bundle (appended to its `sha256-<hex>.sig` manifest; existing signatures are
//! kept). A tag is signed only after it verified against `--trust-key`; a digest
//! (`REF@sha256:...`) is signed as named.

use std::path::PathBuf;

use anyhow::Context;
use drover_proto::channel::sign::countersign;
use drover_proto::trust::sign::SignatureInfo;
use serde::Serialize;

use crate::output::{Report, Text};
use crate::regargs::RegistryArgs;
use crate::signing::{load_signing_key, open_reference};
use crate::trustargs::TrustArgs;

/// Arguments of `drover sign`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bundle to sign: HOST/REPO@sha256:... (the digest you built), or a tag
    /// (HOST/REPO:TAG, oci:DIR:TAG) together with --trust-key.
    pub reference: String,
    /// Private key (cosign encrypted format or PKCS#8 PEM); password from
    /// DROVER_KEY_PASSWORD, else COSIGN_PASSWORD.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Keys the bundle must already verify with before it is signed (required for a tag).
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `drover sign`.
pub async fn run(args: Args) -> anyhow::Result<SignReport> {
    let key = load_signing_key(&args.key)?;
    let policy = args.trust.optional_policy()?;
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, lookup, _) = open_reference(&args.reference, &client, true)?;
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{} names no tag or digest (add @sha256:... or :TAG)", args.reference))?;
    let done = countersign(&repo, &lookup, &key, policy.as_ref()).await.with_context(|| format!("signing {}", args.reference))?;
    Ok(SignReport { info: done.bundle, statement: done.statement })
}

/// What `sign` did (the signature written, or found already there).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignReport {
    /// The bundle's signature.
    #[serde(flatten)]
    pub info: SignatureInfo,
    /// The channel statement's signature, when the tag's statement places the bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement: Option<SignatureInfo>,
}

impl Report for SignReport {
    fn write_text(&self, out: &mut Text) {
        let info = &self.info;
        out.table(
            &["DIGEST", "SIGNATURE", "KEY", "ADDED", "LAYERS"],
            &[vec![
                info.digest.clone(),
                info.signature_reference.clone(),
                info.key_fingerprint.clone(),
                if info.added { "yes".into() } else { "already signed".into() },
                info.layers.to_string(),
            ]],
        );
        if let Some(s) = &self.statement {
            out.line(format!("countersigned the channel statement {} ({} layer(s))", s.signature_reference, s.layers));
        }
    }
}
