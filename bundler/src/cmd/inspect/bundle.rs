//! A bundle, from its manifest and config (the content layer is not downloaded).

use drover_proto::config::{BundleConfig, WorkloadProvenance, RENDERER_COMMAND};
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::trust::TrustPolicy;
use drover_proto::{media, FetchedBundle, Repo};
use serde::Serialize;

use super::signatures::Signatures;
use crate::output::{dash, Text};

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
    /// The signatures (judged with `--trust-key`).
    signatures: Signatures,
    layer: Descriptor,
    annotations: std::collections::BTreeMap<String, String>,
    manifest: Manifest,
    config: BundleConfig,
}

/// The bundle `head` read from `repo` by `reference`.
pub(super) async fn inspect(repo: &Repo, reference: &str, head: FetchedBundle, policy: Option<&TrustPolicy>) -> anyhow::Result<BundleInspection> {
    let signatures = Signatures::of(repo, &head.digest, policy).await?;
    let layer = head.manifest.bundle_layer().map_err(anyhow::Error::msg)?.clone();
    let c = &head.config;
    Ok(BundleInspection {
        reference: reference.to_string(),
        digest: head.digest.clone(),
        cluster_type: c.cluster_type.clone(),
        environment: c.environment.clone(),
        sequence: c.sequence,
        source: c.source.clone(),
        created: head.manifest.annotations.get(media::ANN_CREATED).cloned(),
        allow_mass_prune: c.allow_mass_prune,
        workloads: c.workloads.clone(),
        signature_tag: signatures.tag.clone(),
        signed: signatures.present,
        signatures,
        layer,
        annotations: head.manifest.annotations.clone(),
        manifest: head.manifest.clone(),
        config: head.config.clone(),
    })
}

impl BundleInspection {
    pub(super) fn write_text(&self, out: &mut Text) {
        let rows = vec![
            vec!["reference".into(), self.reference.clone()],
            vec!["digest".into(), self.digest.clone()],
            vec!["cluster type".into(), dash(&self.cluster_type)],
            vec!["environment".into(), dash(&self.environment)],
            vec!["sequence".into(), self.sequence.to_string()],
            vec!["source".into(), dash(&self.source.repository)],
            vec!["revision".into(), dash(&self.source.revision)],
            vec!["created".into(), dash(self.created.as_deref().unwrap_or(""))],
            vec!["signature".into(), self.signatures.line()],
            vec!["mass prune".into(), if self.allow_mass_prune { "allowed".into() } else { "no".into() }],
            vec!["content".into(), format!("{} ({} bytes)", self.layer.digest, self.layer.size)],
            vec!["objects".into(), self.config.objects.len().to_string()],
            vec!["rendered by".into(), rendered_by(&self.workloads)],
            vec![
                "needs agent".into(),
                match &self.config.min_agent_version {
                    Some(v) => format!("{v} or newer (minAgentVersion)"),
                    None => format!("any ({} or newer)", drover_proto::compat::BASELINE),
                },
            ],
            vec!["health rules".into(), self.config.health_checks.len().to_string()],
        ];
        out.table(&["FIELD", "VALUE"], &rows);
        out.line("");
        if !self.config.health_checks.is_empty() {
            let rules: Vec<Vec<String>> = self
                .config
                .health_checks
                .iter()
                .map(|r| vec![r.kind.clone(), r.api_version.clone(), r.current.clone(), dash(r.failed.as_deref().unwrap_or("")), dash(r.in_progress.as_deref().unwrap_or(""))])
                .collect();
            out.table(&["KIND", "APIVERSION", "CURRENT", "FAILED", "IN PROGRESS"], &rules);
            out.line("");
        }
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

