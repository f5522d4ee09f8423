//! `drover push DIR REF`: builds a bundle from a directory (as `drover build`) and
//! publishes it into the channel REF names through the channel rules
//! (`drover_proto::channel::publish`): a sequence above every verified one (or
//! `--sequence`, never lower), the immutable history tag `<env>-<sequence>` when an
//! environment is given, and with `--key K` the signature before any tag moves.

use std::path::PathBuf;

use anyhow::Context;
use drover_proto::channel::publish::{publish, Request, Sequence};
use drover_proto::trust::TrustPolicy;
use drover_proto::{Reference, Repo};

use crate::cmd::build::{BundleArgs, Summary};
use crate::output::warn;
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
pub async fn run(args: Args) -> anyhow::Result<Summary> {
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
    let meta = args.bundle.meta()?;
    let loaded = args.bundle.load()?;
    let key = args.key.as_deref().map(crate::signing::load_signing_key).transpose()?;
    let policy = key.as_ref().map(|k| TrustPolicy::new(vec![k.public_key().clone()], 1)).transpose()?;
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, _) = Repo::open(&reference, &client, true)?;
    let sequence = match args.bundle.sequence {
        Some(s) => Sequence::Exact(s),
        None => Sequence::Next { at_least: meta.sequence },
    };
    let started = std::time::Instant::now();
    let published = publish(Request {
        repo: &repo,
        channel: &tag,
        objects: &loaded.objects,
        meta,
        sequence,
        key: key.as_ref(),
        policy: policy.as_ref(),
        packed: None,
        skip_unchanged: false,
    })
    .await
    .with_context(|| format!("pushing to {} (the channel tag {tag} was not moved)", args.reference))?;
    tracing::debug!(push_ms = started.elapsed().as_millis() as u64, "pushed blobs, manifest, signature and tags");
    if let Some(note) = &published.untrusted_previous {
        warn(format_args!("{note}; replaced it"));
    }
    let mut tags = vec![tag.clone()];
    tags.extend(published.history_tag.clone().filter(|h| *h != tag));
    Ok(Summary {
        reference: format!("{}@{}", repo.describe(&tag), published.digest),
        digest: published.digest,
        objects: loaded.objects.len(),
        tags,
        sequence: published.sequence,
        signature: published.signature,
    })
}
