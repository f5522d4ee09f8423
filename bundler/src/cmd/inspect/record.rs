//! A release record left by `drover publish` (`PREFIX/drover-releases:ENV`).

use anyhow::Context;
use drover_proto::trust::TrustPolicy;
use drover_proto::Repo;
use serde::Serialize;

use super::signatures::Signatures;
use crate::output::Text;
use crate::release::{self, ReleaseRecord};

/// A release record (its signatures judged only with `--trust-key`; `drover releases
/// --trust-key` lists every environment's).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordInspection {
    reference: String,
    digest: String,
    signature_tag: String,
    signed: bool,
    /// The signatures (judged with `--trust-key`).
    signatures: Signatures,
    record: ReleaseRecord,
}

/// The release record `digest` of `repo`, read by `reference`.
pub(super) async fn inspect(repo: &Repo, reference: &str, digest: &str, policy: Option<&TrustPolicy>) -> anyhow::Result<RecordInspection> {
    let (digest, record) = release::fetch(repo, digest)
        .await
        .with_context(|| format!("reading the release record {reference}"))?
        .ok_or_else(|| anyhow::anyhow!("{reference} disappeared while reading it"))?;
    let signatures = Signatures::of(repo, &digest, policy).await?;
    Ok(RecordInspection { reference: reference.to_string(), digest, signature_tag: signatures.tag.clone(), signed: signatures.present, signatures, record })
}

impl RecordInspection {
    pub(super) fn write_text(&self, out: &mut Text) {
        let r = &self.record;
        let rows = vec![
            vec!["reference".into(), self.reference.clone()],
            vec!["digest".into(), self.digest.clone()],
            vec!["kind".into(), "release record (drover publish)".into()],
            vec!["environment".into(), r.environment.clone()],
            vec!["revision".into(), r.revision.clone()],
            vec!["published".into(), r.time.clone()],
            vec!["promotion gate".into(), if r.gate_skipped { "SKIPPED (`drover publish --skip-promotion-gate`)".into() } else { "passed".into() }],
            vec!["signature".into(), self.signatures.line()],
        ];
        out.table(&["FIELD", "VALUE"], &rows);
        out.line("");
        let types: Vec<Vec<String>> =
            r.cluster_types.iter().map(|(t, b)| vec![t.clone(), b.digest.clone(), b.reference.clone()]).collect();
        out.table(&["CLUSTER TYPE", "DIGEST", "REFERENCE"], &types);
    }
}

