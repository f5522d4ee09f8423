//! `drover rollback REF --to DIGEST|TAG --key K [--trust-key PUB]`: re-publishes an older
//! bundle's content as a NEW bundle whose sequence is above every verified one, after the
//! older bundle verified (`drover_proto::channel::rollback`).

use std::path::PathBuf;

use anyhow::Context;
use drover_proto::channel::rollback::{rollback, RolledBack};
use serde::Serialize;
use drover_proto::trust::TrustPolicy;

use crate::output::{Report, Text};
use crate::regargs::RegistryArgs;
use crate::signing::{load_signing_key, open_reference};

/// Arguments of `drover rollback`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel to roll back: HOST/REPO:TAG (or oci:DIR:TAG).
    pub reference: String,
    /// The older bundle whose content to restore: a digest or a tag in the same repository
    /// (e.g. a history tag prod-41). It must verify with --trust-key.
    #[arg(long, value_name = "DIGEST|TAG")]
    pub to: String,
    /// Private signing key (cosign encrypted format or PKCS#8 PEM).
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Public key(s) the restored bundle and the channel's history must verify with
    /// (default: the public half of --key). Repeat for several.
    #[arg(long = "trust-key", value_name = "PUB")]
    pub trust_keys: Vec<PathBuf>,
    /// Mark the new bundle as allowed to prune more than the agent's maxPruneRatio
    /// (default: as the restored bundle was).
    #[arg(long)]
    pub allow_mass_prune: bool,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `drover rollback`.
pub async fn run(args: Args) -> anyhow::Result<RollbackReport> {
    let key = load_signing_key(&args.key)?;
    let policy = if args.trust_keys.is_empty() {
        TrustPolicy::new(vec![key.public_key().clone()], 1)?
    } else {
        TrustPolicy::from_files(&args.trust_keys, 1)?
    };
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, lookup, _) = open_reference(&args.reference, &client, true)?;
    let channel = lookup.ok_or_else(|| anyhow::anyhow!("{} must name the channel tag to roll back (HOST/REPO:TAG)", args.reference))?;
    let done = rollback(&repo, &channel, &args.to, &key, &policy, args.allow_mass_prune)
        .await
        .with_context(|| format!("rolling back {} (nothing was tagged)", args.reference))?;
    Ok(RollbackReport { reference: args.reference, rolled_back: done })
}

/// What `rollback` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollbackReport {
    /// The channel as given.
    pub reference: String,
    /// The new bundle and what it restored.
    #[serde(flatten)]
    pub rolled_back: RolledBack,
}

impl Report for RollbackReport {
    fn write_text(&self, out: &mut Text) {
        let done = &self.rolled_back;
        out.table(
            &["REFERENCE", "DIGEST", "SEQUENCE", "RESTORED FROM"],
            &[vec![
                self.reference.clone(),
                done.digest.clone(),
                done.sequence.to_string(),
                format!("{} (sequence {})", done.restored_from, done.restored_sequence),
            ]],
        );
    }
}
