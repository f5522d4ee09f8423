//! `drover promote SRC DST_TAG|DST --key PUB...`: verifies SRC, then points the
//! destination tag at the same digest (copying bundle and signatures when the
//! destination repository differs). Refuses to lower the destination's sequence.


use anyhow::Context;
use drover_proto::digest::signature_tag;
use drover_proto::reference::valid_tag;
use drover_proto::repo::FetchLimits;
use drover_proto::trust::{copy_signatures, verify};
use drover_proto::{media, Repo};
use serde::Serialize;

use crate::output::{print_json, print_table, OutputFormat};
use crate::regargs::RegistryArgs;
use crate::trustargs::TrustArgs;
use crate::signing::{open_reference, resolve_digest, same_repository};

/// Arguments of `drover promote`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The verified bundle to promote (HOST/REPO:TAG, ...@sha256:..., oci:DIR:TAG).
    pub source: String,
    /// The destination: a tag in the source repository (e.g. prod-ring1), or a full
    /// reference with a tag (HOST/OTHER-REPO:TAG, oci:DIR:TAG).
    pub destination: String,
    /// Trusted keys and threshold.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// What the destination tag pointed at before.
#[derive(Serialize)]
struct Previous {
    digest: String,
    sequence: u64,
}

#[derive(Serialize)]
struct Report {
    source: String,
    destination: String,
    digest: String,
    sequence: u64,
    previous: Option<Previous>,
    copied: bool,
    signatures_copied: usize,
    matched_keys: Vec<String>,
    changed: bool,
}

/// Runs `drover promote`.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    let policy = args.trust.policy()?;
    let client = args.registry.client()?;
    let (src, src_lookup, _) = open_reference(&args.source, &client, false)?;
    let digest = resolve_digest(&src, src_lookup.as_deref(), &args.source).await?;
    let limits = FetchLimits::default();
    let (manifest_bytes, _) = src.manifest(&digest, limits.manifest).await.with_context(|| format!("fetching {}", args.source))?;
    let head = src
        .fetch_bundle_head(manifest_bytes.clone(), digest.clone(), &limits)
        .await
        .with_context(|| format!("{} is not a usable drover bundle", args.source))?;
    let verification = verify(&src, &digest, &policy).await.with_context(|| format!("refusing to promote {}", args.source))?;

    // Destination: a bare tag in the source repository, or a full reference.
    let (dst, dst_tag, dst_name) = if valid_tag(&args.destination) && !args.destination.contains('/') {
        (src.clone(), args.destination.clone(), src.describe(&args.destination))
    } else {
        let (dst, lookup, parsed) = match drover_proto::Reference::parse(&args.destination)? {
            // A new OCI layout is created (relocation into an air-gapped copy).
            layout @ drover_proto::Reference::Layout { .. } => {
                let (repo, lookup) =
                    Repo::open(&layout, &client, true).with_context(|| format!("opening {}", args.destination))?;
                (repo, lookup, layout)
            }
            _ => open_reference(&args.destination, &client, true)?,
        };
        let tag = match (lookup, parsed.as_registry()) {
            (Some(t), r) if !drover_proto::digest::is_valid_digest(&t) && r.is_none_or(|r| r.digest.is_none()) => t,
            _ => anyhow::bail!("destination {} must end in a tag (HOST/REPO:TAG or oci:DIR:TAG), not a digest", args.destination),
        };
        let name = dst.describe(&tag);
        (dst, tag, name)
    };
    if dst_tag.ends_with(".sig") {
        anyhow::bail!("destination tag {dst_tag} is reserved for signatures");
    }

    // Anti-rollback: never lower the destination's sequence.
    let previous = match dst.resolve(&dst_tag).await.with_context(|| format!("looking up {dst_name}"))? {
        None => None,
        Some(cur) if cur == digest => Some(Previous { digest: cur, sequence: head.config.sequence }),
        Some(cur) => {
            let (bytes, _) = dst.manifest(&cur, limits.manifest).await.with_context(|| format!("fetching {dst_name}"))?;
            let cur_head = dst.fetch_bundle_head(bytes, cur.clone(), &limits).await.with_context(|| {
                format!("{dst_name} currently holds {cur}, which is not a readable drover bundle; refusing to overwrite it")
            })?;
            let cur_seq = cur_head.config.sequence;
            if cur_seq > head.config.sequence {
                anyhow::bail!(
                    "refusing to promote: {dst_name} holds sequence {cur_seq} ({cur}), {} has the lower sequence {}; \
                     that would be a rollback. Use `drover rollback {dst_name} --to {digest} --key KEY` to re-publish old content with a new sequence",
                    args.source,
                    head.config.sequence
                );
            }
            if cur_seq == head.config.sequence {
                anyhow::bail!(
                    "refusing to promote: {dst_name} holds a different bundle {cur} with the same sequence {cur_seq} as {}",
                    args.source
                );
            }
            Some(Previous { digest: cur, sequence: cur_seq })
        }
    };

    // Cross-repository: copy the bundle and its signatures first, verify them there.
    let copied = !same_repository(&src, &dst);
    let mut signatures_copied = 0;
    if copied {
        copy_bundle(&src, &dst, &digest, &manifest_bytes, &limits).await?;
        signatures_copied = copy_signatures(&src, &dst, &digest)
            .await
            .with_context(|| format!("copying {} to {}", src.describe(&signature_tag(&digest)), dst.describe(&signature_tag(&digest))))?;
        verify(&dst, &digest, &policy).await.with_context(|| format!("verifying the copy in {dst_name}"))?;
    }
    let changed = previous.as_ref().is_none_or(|p| p.digest != digest);
    if changed {
        dst.put_manifest(manifest_bytes, media::OCI_MANIFEST, Some(&dst_tag)).await.with_context(|| format!("tagging {dst_name}"))?;
    }
    let report = Report {
        source: args.source.clone(),
        destination: dst_name,
        digest,
        sequence: head.config.sequence,
        previous,
        copied,
        signatures_copied,
        matched_keys: verification.matched.iter().map(|m| m.fingerprint.clone()).collect(),
        changed,
    };
    match out {
        OutputFormat::Json => print_json(&report)?,
        OutputFormat::Table => print_table(
            &["DESTINATION", "DIGEST", "SEQUENCE", "PREVIOUS"],
            &[vec![
                report.destination.clone(),
                report.digest.clone(),
                report.sequence.to_string(),
                report.previous.as_ref().map(|p| format!("{} (sequence {})", p.digest, p.sequence)).unwrap_or_else(|| "-".into()),
            ]],
        ),
    }
    Ok(())
}

/// Copies a bundle's config, layer and manifest (by digest, untagged) into `dst`.
async fn copy_bundle(src: &Repo, dst: &Repo, digest: &str, manifest_bytes: &[u8], limits: &FetchLimits) -> anyhow::Result<()> {
    let bundle = src.fetch_bundle(digest, limits).await.with_context(|| format!("fetching {}", src.describe(digest)))?;
    dst.put_blob(&bundle.manifest.config.digest, bundle.config_bytes).await?;
    dst.put_blob(&bundle.manifest.layers[0].digest, bundle.layer).await?;
    dst.put_manifest(manifest_bytes.to_vec(), media::OCI_MANIFEST, None)
        .await
        .with_context(|| format!("copying {digest} to {}", dst.describe(digest)))?;
    Ok(())
}
