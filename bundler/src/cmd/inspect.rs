//! `drover inspect REF`: what a bundle is (digest, cluster type, environment, sequence,
//! source, created, signature present) and every object it holds, from the manifest and
//! the config alone (the content layer is not downloaded).

use anyhow::Context;
use drover_proto::config::BundleConfig;
use drover_proto::digest::signature_tag;
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::{media, FetchLimits, Reference, Repo};
use serde::Serialize;

use crate::output::{print_json, print_table, OutputFormat};
use crate::regargs::RegistryArgs;

/// Arguments of `drover inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bundle: HOST/REPO:TAG, HOST/REPO@sha256:..., oci:DIR:TAG or oci-archive:FILE:TAG.
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Inspection {
    reference: String,
    digest: String,
    cluster_type: String,
    environment: String,
    sequence: u64,
    source: drover_proto::config::SourceInfo,
    created: Option<String>,
    allow_mass_prune: bool,
    signature_tag: String,
    signed: bool,
    layer: Descriptor,
    annotations: std::collections::BTreeMap<String, String>,
    manifest: Manifest,
    config: BundleConfig,
}

/// Runs `drover inspect`.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    let parsed = Reference::parse(&args.reference)?;
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, lookup) = Repo::open(&parsed, &client, false).with_context(|| format!("opening {}", args.reference))?;
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{} names no tag or digest (add :TAG or @sha256:...)", args.reference))?;
    let limits = FetchLimits::default();
    let (bytes, digest) = repo.manifest(&lookup, limits.manifest).await.with_context(|| format!("fetching {}", args.reference))?;
    let head = repo.fetch_bundle_head(bytes, digest, &limits).await.with_context(|| format!("reading {}", args.reference))?;
    let sig_tag = signature_tag(&head.digest);
    let signed = repo.resolve(&sig_tag).await.map(|d| d.is_some()).unwrap_or(false);
    let layer = head.manifest.bundle_layer().map_err(anyhow::Error::msg)?.clone();
    let c = &head.config;
    let info = Inspection {
        reference: args.reference.clone(),
        digest: head.digest.clone(),
        cluster_type: c.cluster_type.clone(),
        environment: c.environment.clone(),
        sequence: c.sequence,
        source: c.source.clone(),
        created: head.manifest.annotations.get(media::ANN_CREATED).cloned(),
        allow_mass_prune: c.allow_mass_prune,
        signature_tag: sig_tag,
        signed,
        layer,
        annotations: head.manifest.annotations.clone(),
        manifest: head.manifest.clone(),
        config: head.config.clone(),
    };
    match out {
        OutputFormat::Json => print_json(&info),
        OutputFormat::Table => {
            let dash = |s: &str| if s.is_empty() { "-".to_string() } else { s.to_string() };
            let rows = vec![
                vec!["reference".into(), info.reference.clone()],
                vec!["digest".into(), info.digest.clone()],
                vec!["cluster type".into(), dash(&info.cluster_type)],
                vec!["environment".into(), dash(&info.environment)],
                vec!["sequence".into(), info.sequence.to_string()],
                vec!["source".into(), dash(&info.source.repository)],
                vec!["revision".into(), dash(&info.source.revision)],
                vec!["created".into(), dash(info.created.as_deref().unwrap_or(""))],
                vec![
                    "signature".into(),
                    if info.signed {
                        format!("present at {} (not verified; use drover verify)", info.signature_tag)
                    } else {
                        "none".into()
                    },
                ],
                vec!["mass prune".into(), if info.allow_mass_prune { "allowed".into() } else { "no".into() }],
                vec!["content".into(), format!("{} ({} bytes)", info.layer.digest, info.layer.size)],
                vec!["objects".into(), c.objects.len().to_string()],
            ];
            print_table(&["FIELD", "VALUE"], &rows);
            println!();
            let objs: Vec<Vec<String>> = c
                .objects
                .iter()
                .map(|o| vec![o.kind.clone(), o.namespace.clone().unwrap_or_else(|| "-".into()), o.name.clone(), o.api_version.clone()])
                .collect();
            print_table(&["KIND", "NAMESPACE", "NAME", "APIVERSION"], &objs);
            Ok(())
        }
    }
}
