//! A cluster's fleet report (`<reports repository>:<type>.<name>`, docs/fleet.md): what
//! its agent says about the cluster, who signed it (the cluster's report key) and, with
//! `--trust-key`, whether it counts: the roster signed by those keys must enroll that key
//! for the cluster ([`drover_proto::report::roster::Held::judge`], the rule `fleet
//! status` applies). The report is read through the format's limits, cleaned.

use anyhow::Context;
use drover_proto::report::roster::{self, Standing};
use drover_proto::report::store::{self, Signer};
use drover_proto::report::Report;
use drover_proto::trust::TrustPolicy;
use drover_proto::Repo;
use serde::Serialize;

use crate::output::{dash, Text};

/// A fleet report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportInspection {
    reference: String,
    /// The report manifest's digest.
    digest: String,
    /// What it says (text cleaned and cut to the format's limits).
    report: Report,
    /// The fingerprint of the report key that signed it (absent: unsigned or badly signed).
    #[serde(skip_serializing_if = "Option::is_none")]
    report_key: Option<String>,
    /// Why its signature is missing or invalid.
    #[serde(skip_serializing_if = "Option::is_none")]
    signature_problem: Option<String>,
    /// What the reader cut to the format's limits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cut: Vec<String>,
    /// Whether it counts (only with `--trust-key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    standing: Option<Standing>,
}

/// The report `lookup` of `repo`, read by `reference`, whose manifest has `digest`.
pub(super) async fn inspect(repo: &Repo, reference: &str, lookup: &str, digest: &str, policy: Option<&TrustPolicy>) -> anyhow::Result<ReportInspection> {
    let received = store::read(repo, lookup)
        .await
        .with_context(|| format!("reading the fleet report {reference}"))?
        .ok_or_else(|| anyhow::anyhow!("{reference} disappeared while reading it"))?;
    let standing = match policy {
        Some(p) => {
            let held = roster::read(repo, p).await.with_context(|| format!("reading the roster beside {reference}"))?;
            Some(held.judge(&received, drover_proto::time::now_unix()))
        }
        None => None,
    };
    let (report_key, signature_problem) = match &received.signer {
        Signer::Key(k) => (Some(k.fingerprint().to_string()), None),
        Signer::Unsigned => (None, Some("unsigned".to_string())),
        Signer::Invalid(why) => (None, Some(format!("badly signed: {why}"))),
    };
    Ok(ReportInspection { reference: reference.to_string(), digest: digest.to_string(), report: received.report, report_key, signature_problem, cut: received.cut, standing })
}

impl ReportInspection {
    /// The signature line: the key, and whether the report counts.
    fn signature_line(&self) -> String {
        let key = match (&self.report_key, &self.signature_problem) {
            (Some(fp), _) => format!("report key {}", &fp[..fp.len().min(12)]),
            (None, Some(why)) => why.clone(),
            (None, None) => "none".into(),
        };
        match &self.standing {
            Some(Standing::Trusted) => format!("{key}: counts (enrolled in the roster signed by --trust-key)"),
            Some(Standing::Untrusted(why)) => format!("{key}: does NOT count: {why}"),
            None => format!("{key} (whether it counts: pass --trust-key PUB, the release key)"),
        }
    }

    pub(super) fn write_text(&self, out: &mut Text) {
        let r = &self.report;
        let opt = |s: &Option<String>| dash(s.as_deref().unwrap_or_default());
        let attempt = r.last_attempt.as_ref().map(|a| {
            let why = if a.reason.is_empty() { String::new() } else { format!(": {}", a.reason) };
            format!("{} at {}{why}", a.result, a.at)
        });
        let mut rows = vec![
            vec!["reference".into(), self.reference.clone()],
            vec!["digest".into(), self.digest.clone()],
            vec!["kind".into(), "fleet report".into()],
            vec!["cluster".into(), r.tag()],
            vec!["environment".into(), r.environment.clone()],
            vec!["channel".into(), r.channel.clone()],
            vec!["applied".into(), opt(&r.applied_digest)],
            vec!["sequence".into(), r.applied_sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into())],
            vec!["health".into(), format!("{} since {}", r.health, opt(&r.health_since))],
            vec!["last attempt".into(), opt(&attempt)],
            vec!["reported at".into(), r.reported_at.clone()],
            vec!["agent version".into(), dash(&r.agent_version)],
            vec!["signature".into(), self.signature_line()],
        ];
        if let Some(h) = &r.held {
            rows.push(vec!["held".into(), format!("since {}: {}", h.since, h.reason)]);
        }
        if !self.cut.is_empty() {
            rows.push(vec!["cut to limits".into(), self.cut.join("; ")]);
        }
        out.table(&["FIELD", "VALUE"], &rows);
        if !r.failing.is_empty() {
            out.line("");
            let failing: Vec<Vec<String>> = r.failing.iter().map(|f| vec![f.object.to_string(), f.state.clone(), f.message.clone()]).collect();
            out.table(&["OBJECT", "STATE", "MESSAGE"], &failing);
        }
    }
}
