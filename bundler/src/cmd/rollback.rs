//! `drover rollback REF --to DIGEST|TAG --key K`: re-publishes an older bundle's content
//! as a NEW bundle whose sequence is above every published one, signs it, writes the
//! history tag `<env>-<sequence>` and moves REF's tag to it (DESIGN §4 anti-rollback).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use drover_proto::archive::UnpackLimits;
use drover_proto::bundle::{assemble, open_content, BundleMeta};
use drover_proto::digest::is_valid_digest;
use drover_proto::repo::FetchLimits;
use drover_proto::{media, Repo};
use serde::Serialize;

use crate::output::{print_json, print_table, OutputFormat};
use crate::regargs::RegistryArgs;
use crate::signing::{load_signing_key, open_reference, sign_with};

/// Arguments of `drover rollback`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel to roll back: HOST/REPO:TAG (or oci:DIR:TAG).
    pub reference: String,
    /// The older bundle whose content to restore: a digest or a tag in the same repository
    /// (e.g. a history tag prod-41).
    #[arg(long, value_name = "DIGEST|TAG")]
    pub to: String,
    /// Private signing key (cosign encrypted format or PKCS#8 PEM).
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Mark the new bundle as allowed to prune more than the agent's maxPruneRatio
    /// (default: as the restored bundle was).
    #[arg(long)]
    pub allow_mass_prune: bool,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Serialize)]
struct Report {
    reference: String,
    digest: String,
    sequence: u64,
    history_tag: String,
    restored_from: String,
    restored_sequence: u64,
    replaced: String,
    replaced_sequence: u64,
    objects: usize,
    signature: String,
}

/// Highest `<env>-<n>` history tag number in a registry repository (0 when none or not a registry).
async fn highest_history(repo: &Repo, env: &str) -> anyhow::Result<u64> {
    let Repo::Registry { client, repo: r } = repo else { return Ok(0) };
    let tags = client.list_tags(r).await.with_context(|| format!("listing tags of {}", r.repository_url()))?;
    let prefix = format!("{env}-");
    Ok(tags
        .iter()
        .filter_map(|t| t.strip_prefix(&prefix))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse::<u64>().ok())
        .max()
        .unwrap_or(0))
}

/// Runs `drover rollback`.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    let key = load_signing_key(&args.key)?;
    let client = args.registry.client()?;
    let (repo, lookup, _) = open_reference(&args.reference, &client, true)?;
    let channel = match lookup {
        Some(t) if !is_valid_digest(&t) => t,
        _ => anyhow::bail!("{} must name the channel tag to roll back (HOST/REPO:TAG), not a digest", args.reference),
    };
    let limits = FetchLimits::default();
    let current = repo.fetch_bundle(&channel, &limits).await.with_context(|| format!("fetching the current bundle {}", args.reference))?;
    let old_name = repo.describe(&args.to);
    let old = repo.fetch_bundle(&args.to, &limits).await.with_context(|| format!("fetching the bundle to restore {old_name}"))?;
    if old.digest == current.digest {
        anyhow::bail!("{} already points at {} ({old_name}); nothing to roll back", args.reference, old.digest);
    }
    if old.config.cluster_type != current.config.cluster_type || old.config.environment != current.config.environment {
        anyhow::bail!(
            "{old_name} was rendered for cluster type {:?} / environment {:?}, but {} holds {:?} / {:?}; refusing to relabel content",
            old.config.cluster_type,
            old.config.environment,
            args.reference,
            current.config.cluster_type,
            current.config.environment
        );
    }
    let objects = open_content(&old.config, &old.layer, &UnpackLimits::default())
        .with_context(|| format!("reading the content of {old_name}"))?;
    let objects: BTreeMap<_, _> = objects.into_iter().map(|o| (o.id, o.yaml)).collect();
    let env = if current.config.environment.is_empty() { channel.clone() } else { current.config.environment.clone() };
    let sequence = current.config.sequence.max(highest_history(&repo, &env).await?) + 1;
    let meta = BundleMeta {
        cluster_type: old.config.cluster_type.clone(),
        environment: old.config.environment.clone(),
        sequence,
        source_repository: old.config.source.repository.clone(),
        revision: old.config.source.revision.clone(),
        created: None,
        allow_mass_prune: args.allow_mass_prune || old.config.allow_mass_prune,
    };
    let bundle = assemble(&objects, &meta);
    let history_tag = format!("{env}-{sequence}");
    // Push untagged, sign, then tag: no tag ever points at an unsigned bundle.
    repo.push_bundle(&bundle, &[]).await.with_context(|| format!("pushing the new bundle to {}", repo.describe(&bundle.digest)))?;
    let sig = sign_with(&repo, &bundle.digest, &key).await?;
    for tag in [history_tag.as_str(), channel.as_str()] {
        repo.put_manifest(bundle.manifest.clone(), media::OCI_MANIFEST, Some(tag))
            .await
            .with_context(|| format!("tagging {}", repo.describe(tag)))?;
    }
    let report = Report {
        reference: args.reference.clone(),
        digest: bundle.digest.clone(),
        sequence,
        history_tag: repo.describe(&history_tag),
        restored_from: old.digest.clone(),
        restored_sequence: old.config.sequence,
        replaced: current.digest.clone(),
        replaced_sequence: current.config.sequence,
        objects: objects.len(),
        signature: sig.signature_reference,
    };
    match out {
        OutputFormat::Json => print_json(&report)?,
        OutputFormat::Table => print_table(
            &["REFERENCE", "DIGEST", "SEQUENCE", "RESTORED FROM"],
            &[vec![
                report.reference.clone(),
                report.digest.clone(),
                report.sequence.to_string(),
                format!("{} (sequence {})", report.restored_from, report.restored_sequence),
            ]],
        ),
    }
    Ok(())
}
