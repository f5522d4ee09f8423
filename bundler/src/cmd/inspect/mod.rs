//! `drover inspect REF [--trust-key PUB...]`: what REF is and what it holds, from its
//! manifest and config alone (a bundle's content layer is not downloaded). REF may be a
//! bundle ([`bundle`]), a release record of `drover publish` ([`record`]), a channel
//! statement (`<channel>.statement`, [`statement`]), a fleet roster (`drover-roster`,
//! [`roster`]) or a cluster's fleet report (`<type>.<name>`, [`report`]); the manifest's
//! media types say which. None of them needs a private key.
//! Signatures are found but not judged, unless `--trust-key` is given: then their state
//! against that policy (keys and threshold) is shown, by the rule every reader applies
//! (`drover_proto::trust::verify`). Showing is not gating: the exit code is 0 either way
//! (`drover verify` is the gate).

mod bundle;
mod record;
mod report;
mod roster;
mod signatures;
mod statement;

use anyhow::Context;
use drover_proto::manifest::Manifest;
use drover_proto::{media, FetchLimits, Reference, Repo};
use serde::Serialize;

use crate::output::{Report, Text};
use crate::regargs::RegistryArgs;
use crate::trustargs::TrustArgs;

pub use bundle::BundleInspection;
pub use record::RecordInspection;
pub use report::ReportInspection;
pub use roster::RosterInspection;
pub use signatures::{Judged, Signatures};
pub use statement::StatementInspection;

/// Arguments of `drover inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to inspect: a bundle, a release record, a channel statement, a fleet roster or
    /// a fleet report (HOST/REPO:TAG, HOST/REPO@sha256:..., HOST/REPO:CHANNEL.statement,
    /// HOST/PREFIX/drover-reports:drover-roster, HOST/PREFIX/drover-reports:TYPE.NAME,
    /// oci:DIR:TAG, oci:DIR@sha256:... or oci-archive:FILE:TAG).
    reference: String,
    /// Judge the signatures against these keys (optional; without them signatures are
    /// only found). For a fleet report: the release key(s) its roster is signed with.
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// What `inspect` found (`kind`).
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Inspection {
    /// A drover bundle.
    Bundle(Box<BundleInspection>),
    /// A release record left by `drover publish`.
    ReleaseRecord(RecordInspection),
    /// A channel statement (`<channel>.statement`).
    ChannelStatement(StatementInspection),
    /// A fleet roster (`drover-roster`).
    FleetRoster(RosterInspection),
    /// A cluster's fleet report.
    FleetReport(Box<ReportInspection>),
}

impl Report for Inspection {
    fn write_text(&self, out: &mut Text) {
        match self {
            Inspection::Bundle(b) => b.write_text(out),
            Inspection::ReleaseRecord(r) => r.write_text(out),
            Inspection::ChannelStatement(s) => s.write_text(out),
            Inspection::FleetRoster(r) => r.write_text(out),
            Inspection::FleetReport(r) => r.write_text(out),
        }
    }
}

/// Runs `drover inspect`.
pub async fn run(args: Args) -> anyhow::Result<Inspection> {
    let policy = args.trust.optional_policy()?;
    let parsed = Reference::parse(&args.reference)?;
    let client = args.registry.client_for(&[&args.reference])?;
    let (repo, lookup) = Repo::open(&parsed, &client, false).with_context(|| format!("opening {}", args.reference))?;
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{} names no tag or digest (add :TAG or @sha256:...)", args.reference))?;
    let limits = FetchLimits::default();
    let (bytes, digest) = repo.manifest(&lookup, limits.manifest).await.with_context(|| format!("fetching {}", args.reference))?;
    let (config_type, artifact_type) = match Manifest::from_slice(&bytes) {
        Ok(m) => (m.config.media_type, m.artifact_type.unwrap_or_default()),
        Err(_) => (String::new(), String::new()),
    };
    let policy = policy.as_ref();
    if config_type == media::RELEASE_RECORD {
        return Ok(Inspection::ReleaseRecord(record::inspect(&repo, &args.reference, &digest, policy).await?));
    }
    if artifact_type == media::STATEMENT_ARTIFACT_TYPE || config_type == media::STATEMENT {
        return Ok(Inspection::ChannelStatement(statement::inspect(&repo, &args.reference, &lookup, policy).await?));
    }
    if artifact_type == media::ROSTER_ARTIFACT_TYPE || config_type == media::ROSTER {
        return Ok(Inspection::FleetRoster(roster::inspect(&repo, &args.reference, &lookup, policy).await?));
    }
    if artifact_type == media::REPORT_ARTIFACT_TYPE || config_type == media::REPORT_CONFIG {
        return Ok(Inspection::FleetReport(Box::new(report::inspect(&repo, &args.reference, &lookup, &digest, policy).await?)));
    }
    let head = repo.fetch_bundle_head(bytes, digest, &limits).await.with_context(|| format!("reading {}", args.reference))?;
    Ok(Inspection::Bundle(Box::new(bundle::inspect(&repo, &args.reference, head, policy).await?)))
}
