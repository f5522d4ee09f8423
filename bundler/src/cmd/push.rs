//! `drover push DIR REF`: builds a bundle in memory (as `drover build`) and pushes it;
//! with `--environment E` also the immutable history tag `E-<sequence>` (DESIGN §3);
//! with `--key K` signs the pushed digest.

use std::path::PathBuf;

use anyhow::Context;
use drover_proto::{Reference, Repo};

use crate::cmd::build::{print_summary, BundleArgs, Summary};
use crate::output::OutputFormat;
use crate::regargs::RegistryArgs;

/// Arguments of `drover push`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    bundle: BundleArgs,
    /// Where to push: HOST[:PORT]/REPO:TAG (the tag is the channel, e.g. the environment).
    reference: String,
    /// Sign the pushed bundle with this private key (cosign format or PKCS#8 PEM).
    #[arg(long, value_name = "KEY")]
    key: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Runs `drover push`.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    let reference = Reference::parse(&args.reference)?;
    let tag = match &reference {
        Reference::Registry(r) => {
            anyhow::ensure!(r.digest.is_none(), "{}: cannot push to a digest; give a tag, e.g. {}:dev", args.reference, r.repository_url());
            r.tag.clone().ok_or_else(|| anyhow::anyhow!("{}: give a tag (the channel), e.g. {}:dev", args.reference, r.repository_url()))?
        }
        _ => anyhow::bail!(
            "{}: push goes to a registry (HOST[:PORT]/REPO:TAG); to write a layout use `drover build --out oci:DIR:TAG`",
            args.reference
        ),
    };
    // Everything that can fail on input (YAML, flags, key, password) fails before any write.
    let built = args.bundle.build()?;
    let key = match &args.key {
        Some(k) => Some(crate::signing::load_signing_key(k).with_context(|| format!("loading signing key {}", k.display()))?),
        None => None,
    };
    let bundle = &built.bundle;
    let meta = &bundle.config_doc;
    let client = args.registry.client()?;
    let (repo, _) = Repo::open(&reference, &client, true)?;
    let mut tags = Vec::new();
    if !meta.environment.is_empty() {
        let history = format!("{}-{}", meta.environment, meta.sequence);
        anyhow::ensure!(drover_proto::reference::valid_tag(&history), "history tag {history:?} is not a valid tag");
        if let Some(existing) = repo.resolve(&history).await.with_context(|| format!("looking up {}", repo.describe(&history)))? {
            anyhow::ensure!(
                existing == bundle.digest,
                "{} already holds {existing} (history tags are immutable); publish with a higher --sequence",
                repo.describe(&history)
            );
        }
        if history != tag {
            tags.push(history);
        }
    }
    // Blobs, manifest and history tag first; sign; only then move the channel tag, so the
    // channel never points at an unsigned bundle when a key is given.
    let started = std::time::Instant::now();
    let first: Vec<&str> = tags.iter().map(String::as_str).collect();
    let digest = repo.push_bundle(bundle, &first).await.with_context(|| format!("pushing to {}", args.reference))?;
    let signature = match &key {
        Some(key) => Some(
            crate::signing::sign_with(&repo, &digest, key)
                .await
                .with_context(|| format!("signing {} (the channel tag {tag} was not moved)", repo.describe(&digest)))?,
        ),
        None => None,
    };
    repo.put_manifest(bundle.manifest.clone(), drover_proto::media::OCI_MANIFEST, Some(&tag))
        .await
        .with_context(|| format!("tagging {}", repo.describe(&tag)))?;
    tags.push(tag.clone());
    tracing::debug!(push_ms = started.elapsed().as_millis() as u64, "pushed blobs, manifest and tags");
    // Channel tag first in the summary, then the history tag.
    tags.rotate_right(1);
    let summary = Summary {
        reference: format!("{}@{digest}", repo.describe(&tag)),
        digest,
        objects: built.loaded.objects.len(),
        tags,
        sequence: meta.sequence,
        signature,
    };
    print_summary(&summary, out)
}
