//! A channel statement (`<channel>.statement`, docs/signatures.md "Channel statements"):
//! which bundle it places on which channel of which repository, its signatures, and what
//! the channel's tag names now (an agent follows the tag only while the two agree).

use anyhow::Context;
use drover_proto::channel::statement::{Statement, KIND};
use drover_proto::signed;
use drover_proto::trust::TrustPolicy;
use drover_proto::Repo;
use serde::Serialize;

use super::signatures::Signatures;
use crate::output::{dash, Text};

/// A channel statement.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatementInspection {
    reference: String,
    /// The statement manifest's digest.
    digest: String,
    /// What it says.
    statement: Statement,
    /// Its signatures (judged with `--trust-key`).
    signatures: Signatures,
    /// What the channel's tag names now (absent: no such tag in this repository).
    #[serde(skip_serializing_if = "Option::is_none")]
    channel_holds: Option<String>,
}

/// The channel statement `lookup` of `repo`, read by `reference`.
pub(super) async fn inspect(repo: &Repo, reference: &str, lookup: &str, policy: Option<&TrustPolicy>) -> anyhow::Result<StatementInspection> {
    let (digest, bytes) = signed::read_unverified(repo, &KIND, lookup)
        .await
        .with_context(|| format!("reading the channel statement {reference}"))?
        .ok_or_else(|| anyhow::anyhow!("{reference} is not a readable channel statement"))?;
    let statement = Statement::from_slice(&bytes).map_err(|e| anyhow::anyhow!("{reference}: {e}"))?;
    let signatures = Signatures::of(repo, &digest, policy).await?;
    let channel_holds = repo.resolve(&statement.channel).await.ok().flatten();
    Ok(StatementInspection { reference: reference.to_string(), digest, statement, signatures, channel_holds })
}

impl StatementInspection {
    /// What the channel's tag names, compared with the statement.
    fn channel_now(&self) -> String {
        match &self.channel_holds {
            Some(d) if *d == self.statement.digest => format!("{d} (the placed bundle)"),
            Some(d) => format!("{d}: another bundle than the statement places; agents following the channel refuse it"),
            None => "no such tag here".into(),
        }
    }

    pub(super) fn write_text(&self, out: &mut Text) {
        let s = &self.statement;
        let rows = vec![
            vec!["reference".into(), self.reference.clone()],
            vec!["digest".into(), self.digest.clone()],
            vec!["kind".into(), "channel statement".into()],
            vec!["channel".into(), s.channel.clone()],
            vec!["repository".into(), dash(&s.repository)],
            vec!["places".into(), s.digest.clone()],
            vec!["sequence".into(), s.sequence.to_string()],
            vec!["placed at".into(), s.time.clone()],
            vec!["signature".into(), self.signatures.line()],
            vec!["channel now".into(), self.channel_now()],
        ];
        out.table(&["FIELD", "VALUE"], &rows);
    }
}
