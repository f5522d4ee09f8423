//! `drover sign REF --key K`: adds a cosign-compatible signature to an existing bundle
//! (appended to its `sha256-<hex>.sig` manifest; existing signatures are kept).

use std::path::PathBuf;

use crate::output::{print_json, print_table, OutputFormat};
use crate::regargs::RegistryArgs;
use crate::signing::{load_signing_key, open_reference, resolve_digest, sign_with};

/// Arguments of `drover sign`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bundle to sign: HOST/REPO:TAG, HOST/REPO@sha256:..., or oci:DIR:TAG.
    pub reference: String,
    /// Private key (cosign encrypted format or PKCS#8 PEM); password from
    /// DROVER_KEY_PASSWORD, else COSIGN_PASSWORD.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `drover sign`.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    let key = load_signing_key(&args.key)?;
    let client = args.registry.client()?;
    let (repo, lookup, _) = open_reference(&args.reference, &client, true)?;
    let digest = resolve_digest(&repo, lookup.as_deref(), &args.reference).await?;
    let info = sign_with(&repo, &digest, &key).await?;
    match out {
        OutputFormat::Json => print_json(&info)?,
        OutputFormat::Table => print_table(
            &["DIGEST", "SIGNATURE", "KEY", "ADDED", "LAYERS"],
            &[vec![
                info.digest.clone(),
                info.signature_reference.clone(),
                info.key_fingerprint.clone(),
                if info.added { "yes".into() } else { "already signed".into() },
                info.layers.to_string(),
            ]],
        ),
    }
    Ok(())
}
