//! `drover inspect REF`: what a bundle is (digest, cluster type, environment, sequence,
//! source, created, signature present) and every object it holds, from the manifest and
//! the config alone (the content layer is not downloaded). A release record
//! (`PREFIX/drover-releases:ENV`) is shown as the record it is.

use anyhow::Context;
use drover_proto::config::{BundleConfig, WorkloadProvenance, RENDERER_COMMAND};
use drover_proto::digest::signature_tag;
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::{media, FetchLimits, Reference, Repo};
use serde::Serialize;

use crate::output::{dash, Report, Text};
use crate::regargs::RegistryArgs;
use crate::release::{self, ReleaseRecord};

/// Arguments of `drover inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A bundle or a release record: HOST/REPO:TAG, HOST/REPO@sha256:..., oci:DIR:TAG,
    /// oci:DIR@sha256:... or oci-archive:FILE:TAG.
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// What `inspect` found: a bundle or a release record (`kind`).
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Inspection {
    /// A drover bundle.
    Bundle(Box<BundleInspection>),
    /// A release record left by `drover publish`.
    ReleaseRecord(RecordInspection),
}

/// A bundle, from its manifest and config.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleInspection {
    reference: String,
    digest: String,
    cluster_type: String,
    environment: String,
    sequence: u64,
    source: drover_proto::config::SourceInfo,
    created: Option<String>,
    allow_mass_prune: bool,
    /// How each workload was rendered (from the config; empty when not recorded).
    workloads: Vec<WorkloadProvenance>,
    signature_tag: String,
    signed: bool,
    layer: Descriptor,
    annotations: std::collections::BTreeMap<String, String>,
    manifest: Manifest,
    config: BundleConfig,
}

/// A release record (NOT verified; `drover releases --trust-key` verifies).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordInspection {
    reference: String,
    digest: String,
    signature_tag: String,
    signed: bool,
    record: ReleaseRecord,
}

impl Report for Inspection {
    fn write_text(&self, out: &mut Text) {
        match self {
            Inspection::Bundle(b) => b.write_text(out),
            Inspection::ReleaseRecord(r) => r.write_text(out),
        }
    }
}

fn signature_line(signed: bool, tag: &str, verify_with: &str) -> String {
    if signed {
        format!("present at {tag} (not verified; use {verify_with})")
    } else {
        "none".into()
    }
}

impl BundleInspection {
    fn write_text(&self, out: &mut Text) {
        let rows = vec![
            vec!["reference".into(), self.reference.clone()],
            vec!["digest".into(), self.digest.clone()],
            vec!["cluster type".into(), dash(&self.cluster_type)],
            vec!["environment".into(), dash(&self.environment)],
            vec!["sequence".into(), self.sequence.to_string()],
            vec!["source".into(), dash(&self.source.repository)],
            vec!["revision".into(), dash(&self.source.revision)],
            vec!["created".into(), dash(self.created.as_deref().unwrap_or(""))],
            vec!["signature".into(), signature_line(self.signed, &self.signature_tag, "drover verify")],
            vec!["mass prune".into(), if self.allow_mass_prune { "allowed".into() } else { "no".into() }],
            vec!["content".into(), format!("{} ({} bytes)", self.layer.digest, self.layer.size)],
            vec!["objects".into(), self.config.objects.len().to_string()],
            vec!["rendered by".into(), rendered_by(&self.workloads)],
        ];
        out.table(&["FIELD", "VALUE"], &rows);
        out.line("");
        if !self.workloads.is_empty() {
            let ws: Vec<Vec<String>> = self.workloads.iter().map(|w| vec![w.name.clone(), renderer(w), dash(w.version.as_deref().unwrap_or(""))]).collect();
            out.table(&["WORKLOAD", "RENDERED BY", "VERSION"], &ws);
            out.line("");
        }
        let objs: Vec<Vec<String>> = self
            .config
            .objects
            .iter()
            .map(|o| vec![o.kind.clone(), o.namespace.clone().unwrap_or_else(|| "-".into()), o.name.clone(), o.api_version.clone()])
            .collect();
        out.table(&["KIND", "NAMESPACE", "NAME", "APIVERSION"], &objs);
    }
}

/// The "rendered by" summary: how many workloads templates and commands rendered.
fn rendered_by(ws: &[WorkloadProvenance]) -> String {
    if ws.is_empty() {
        return "not recorded (templates, or a drover build directory)".into();
    }
    let commands = ws.iter().filter(|w| w.renderer == RENDERER_COMMAND).count();
    format!("{} workload(s): {commands} by a command, {} by templates", ws.len(), ws.len() - commands)
}

/// One workload's renderer: `templates`, or `command: ["helm","template",...]`.
fn renderer(w: &WorkloadProvenance) -> String {
    if w.command.is_empty() {
        w.renderer.clone()
    } else {
        format!("{}: {}", w.renderer, serde_json::to_string(&w.command).expect("strings serialize"))
    }
}

impl RecordInspection {
    fn write_text(&self, out: &mut Text) {
        let r = &self.record;
        let rows = vec![
            vec!["reference".into(), self.reference.clone()],
            vec!["digest".into(), self.digest.clone()],
            vec!["kind".into(), "release record (drover publish)".into()],
            vec!["environment".into(), r.environment.clone()],
            vec!["revision".into(), r.revision.clone()],
            vec!["published".into(), r.time.clone()],
            vec!["promotion gate".into(), if r.gate_skipped { "SKIPPED (`drover publish --skip-promotion-gate`)".into() } else { "passed".into() }],
            vec!["signature".into(), signature_line(self.signed, &self.signature_tag, "`drover releases --trust-key PUB`")],
        ];
        out.table(&["FIELD", "VALUE"], &rows);
        out.line("");
        let types: Vec<Vec<String>> =
            r.cluster_types.iter().map(|(t, b)| vec![t.clone(), b.digest.clone(), b.reference.clone()]).collect();
        out.table(&["CLUSTER TYPE", "DIGEST", "REFERENCE"], &types);
    }
}

/// Runs `drover inspect`.
pub async fn run(args: Args) -> anyhow::Result<Inspection> {
    let parsed = Reference::parse(&args.reference)?;
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, lookup) = Repo::open(&parsed, &client, false).with_context(|| format!("opening {}", args.reference))?;
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{} names no tag or digest (add :TAG or @sha256:...)", args.reference))?;
    let limits = FetchLimits::default();
    let (bytes, digest) = repo.manifest(&lookup, limits.manifest).await.with_context(|| format!("fetching {}", args.reference))?;
    let signed = |digest: &str| {
        let tag = signature_tag(digest);
        let repo = &repo;
        async move { (repo.resolve(&tag).await.map(|d| d.is_some()).unwrap_or(false), tag) }
    };
    if Manifest::from_slice(&bytes).is_ok_and(|m| m.config.media_type == media::RELEASE_RECORD) {
        let (digest, record) = release::fetch(&repo, &digest)
            .await
            .with_context(|| format!("reading the release record {}", args.reference))?
            .ok_or_else(|| anyhow::anyhow!("{} disappeared while reading it", args.reference))?;
        let (signed, signature_tag) = signed(&digest).await;
        return Ok(Inspection::ReleaseRecord(RecordInspection { reference: args.reference, digest, signature_tag, signed, record }));
    }
    let head = repo.fetch_bundle_head(bytes, digest, &limits).await.with_context(|| format!("reading {}", args.reference))?;
    let (signed, signature_tag) = signed(&head.digest).await;
    let layer = head.manifest.bundle_layer().map_err(anyhow::Error::msg)?.clone();
    let c = &head.config;
    Ok(Inspection::Bundle(Box::new(BundleInspection {
        reference: args.reference.clone(),
        digest: head.digest.clone(),
        cluster_type: c.cluster_type.clone(),
        environment: c.environment.clone(),
        sequence: c.sequence,
        source: c.source.clone(),
        created: head.manifest.annotations.get(media::ANN_CREATED).cloned(),
        allow_mass_prune: c.allow_mass_prune,
        workloads: c.workloads.clone(),
        signature_tag,
        signed,
        layer,
        annotations: head.manifest.annotations.clone(),
        manifest: head.manifest.clone(),
        config: head.config.clone(),
    })))
}
