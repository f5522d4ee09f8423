//! A fleet roster (`<reports repository>:drover-roster`, docs/fleet.md "Who can write a
//! report"): the enrolled clusters with their report keys, its sequence and its
//! signatures (judged with `--trust-key`). Reading it needs no private key.

use anyhow::Context;
use drover_proto::report::roster::{Roster, KIND};
use drover_proto::signed;
use drover_proto::trust::TrustPolicy;
use drover_proto::Repo;
use serde::Serialize;

use super::signatures::Signatures;
use crate::output::Text;

/// A fleet roster.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RosterInspection {
    reference: String,
    /// The roster manifest's digest.
    digest: String,
    /// What it says.
    roster: Roster,
    /// Its signatures (judged with `--trust-key`).
    signatures: Signatures,
}

/// The roster `lookup` of `repo`, read by `reference`.
pub(super) async fn inspect(repo: &Repo, reference: &str, lookup: &str, policy: Option<&TrustPolicy>) -> anyhow::Result<RosterInspection> {
    let (digest, bytes) = signed::read_unverified(repo, &KIND, lookup)
        .await
        .with_context(|| format!("reading the fleet roster {reference}"))?
        .ok_or_else(|| anyhow::anyhow!("{reference} is not a readable fleet roster"))?;
    let roster = Roster::from_slice(&bytes).map_err(|e| anyhow::anyhow!("{reference}: {e}"))?;
    let signatures = Signatures::of(repo, &digest, policy).await?;
    Ok(RosterInspection { reference: reference.to_string(), digest, roster, signatures })
}

impl RosterInspection {
    pub(super) fn write_text(&self, out: &mut Text) {
        let r = &self.roster;
        let rows = vec![
            vec!["reference".into(), self.reference.clone()],
            vec!["digest".into(), self.digest.clone()],
            vec!["kind".into(), "fleet roster".into()],
            vec!["sequence".into(), r.sequence.to_string()],
            vec!["written".into(), r.time.clone()],
            vec!["enrolled".into(), format!("{} cluster(s)", r.clusters.len())],
            vec!["signature".into(), self.signatures.line()],
        ];
        out.table(&["FIELD", "VALUE"], &rows);
        out.line("");
        let clusters: Vec<Vec<String>> = r.clusters.iter().map(|(tag, fp)| vec![tag.clone(), fp.clone()]).collect();
        out.table(&["CLUSTER", "REPORT KEY"], &clusters);
    }
}
