//! `drover promote SRC DST_TAG|DST --key KEY --trust-key PUB...`: verifies SRC, then points
//! the destination tag at the same digest, copying bundle and verified signatures when the
//! destination repository differs (`drover_proto::channel::promote`), after signing the
//! destination channel's statement with `--key`. Never lowers the destination's sequence,
//! never mixes cluster types or environments. With `--require-healthy` the health gate
//! (`crate::fleet::gate`) must pass first.

use std::path::PathBuf;

use anyhow::Context;
use drover_proto::channel::promote::{promote, source_placement, verified_source, Promoted, Unplaced};
use serde::Serialize;
use drover_proto::digest::is_valid_digest;
use drover_proto::reference::valid_tag;
use drover_proto::{Reference, Repo};

use crate::cmd::fleet::args::{channel_of, gate, GateArgs, Judged};
use crate::fleet::gate::Verdict;
use crate::output::{note, warn, Report, Text};
use crate::regargs::RegistryArgs;
use crate::signing::{load_signing_key, open_reference};
use crate::trustargs::TrustArgs;

/// Arguments of `drover promote`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The verified bundle to promote (HOST/REPO:TAG, ...@sha256:..., oci:DIR:TAG).
    pub source: String,
    /// The destination: a tag in the source repository (e.g. prod-ring1), or a full
    /// reference with a tag (HOST/OTHER-REPO:TAG, oci:DIR:TAG).
    pub destination: String,
    /// Private signing key: signs the destination channel's statement (placing a bundle
    /// on a channel is a signed act; agents follow a channel only with it).
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Trusted keys and threshold.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// The health gate (docs/fleet.md): promote only when the source channel's clusters are ready.
    #[command(flatten)]
    pub gate: GateArgs,
    /// Promote even though the source channel has no channel statement that counts (missing,
    /// deleted or unsigned): only to migrate a channel last moved before statements existed,
    /// after checking what its tag names (docs/signatures.md, "Channel statements").
    #[arg(long = "migrate-unplaced-source")]
    pub migrate_unplaced_source: bool,
}

/// Runs `drover promote`.
pub async fn run(args: Args) -> anyhow::Result<PromoteReport> {
    let policy = args.trust.policy()?;
    let key = load_signing_key(&args.key)?;
    let client = args.registry.client_for(&[&args.source, &args.destination])?;
    let (src, src_lookup, _) = open_reference(&args.source, &client, false)?;
    let src_lookup = src_lookup.ok_or_else(|| anyhow::anyhow!("{} names no tag or digest (add :TAG or @sha256:...)", args.source))?;
    // Destination: a bare tag in the source repository, or a full reference.
    let (dst, dst_tag) = if valid_tag(&args.destination) && !args.destination.contains('/') {
        (src.clone(), args.destination.clone())
    } else {
        let parsed = Reference::parse(&args.destination)?;
        let (dst, lookup) = match &parsed {
            // A new OCI layout is created (relocation into an air-gapped copy).
            Reference::Layout { .. } => Repo::open(&parsed, &client, true).with_context(|| format!("opening {}", args.destination))?,
            _ => {
                let (repo, lookup, _) = open_reference(&args.destination, &client, true)?;
                (repo, lookup)
            }
        };
        match lookup {
            Some(t) if !is_valid_digest(&t) && parsed.as_registry().is_none_or(|r| r.digest.is_none()) => (dst, t),
            _ => anyhow::bail!("destination {} must end in a tag (HOST/REPO:TAG or oci:DIR:TAG), not a digest", args.destination),
        }
    };
    let destination = dst.describe(&dst_tag);
    // With the gate, exactly the digest the gate judged is promoted (the tag may move meanwhile).
    let mut verdict = None;
    let unplaced = if args.migrate_unplaced_source { Unplaced::Migrate } else { Unplaced::Refuse };
    let mut source_unplaced = None;
    let src_lookup = match args.gate.rule(None)? {
        Some(rule) => {
            let channel = channel_of(&args.source, &src_lookup)?;
            let head = verified_source(&src, &src_lookup, &policy).await.with_context(|| format!("promoting {} (nothing moved)", args.source))?;
            // The digest is promoted below (exactly what the gate judged), so the channel's
            // placement is checked here, on the channel tag.
            source_unplaced = source_placement(&src, &src_lookup, &head, &policy, unplaced)
                .await
                .with_context(|| format!("promoting {} (nothing moved)", args.source))?;
            let what = Judged { source: &args.source, channel: &channel, digest: &head.digest, config: &head.config };
            let v = gate(&args.gate, &rule, what, &policy, &client).await?;
            if !v.passed {
                let refused = format!("refusing to promote {} to {destination} (nothing moved): {}", args.source, v.describe());
                return Ok(PromoteReport { source: args.source, destination, promoted: false, moved: None, gate: Some(v), refused: Some(refused) });
            }
            note(format_args!("health gate passed: {}", v.describe()));
            verdict = Some(v);
            head.digest
        }
        None => src_lookup,
    };
    let mut done = promote(&src, &src_lookup, &dst, &dst_tag, &policy, &key, unplaced)
        .await
        .with_context(|| format!("promoting {} to {destination} (nothing moved)", args.source))?;
    if let Some(note) = &done.untrusted_previous {
        warn(format_args!("{note}; replaced it"));
    }
    done.source_unplaced = done.source_unplaced.take().or(source_unplaced);
    if let Some(why) = &done.source_unplaced {
        warn(format_args!("the source's placement was not checked ({}): {why}", drover_proto::channel::statement::MIGRATE_FLAG));
    }
    if dst.repository_name().is_empty() {
        warn(format_args!(
            "{destination} is in an OCI layout without a repository name: its channel statement names no repository, so only agents reading this layout accept it \
             (a registry's agents refuse it); to place it for a registry repository, promote there, or name the repository: oci:DIR:REPOSITORY:TAG"
        ));
    }
    if let Some(min) = done.min_agent_version.as_deref() {
        if let Ok(reports) = args.gate.reports_for(&args.destination).or_else(|_| args.gate.reports_for(&args.source)) {
            let target = crate::fleet::agents::Target { cluster_type: &done.cluster_type, environment: &done.environment, channel: &dst_tag, min_agent_version: min };
            for w in crate::fleet::agents::warnings(&reports, &client, &policy, &[target]).await {
                warn(w);
            }
        }
    }
    Ok(PromoteReport { source: args.source, destination, promoted: true, moved: Some(done), gate: verdict, refused: None })
}

/// What `promote` did (or why the health gate refused it).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromoteReport {
    /// The source as given.
    pub source: String,
    /// The destination tag, in full.
    pub destination: String,
    /// False when the health gate refused (nothing moved).
    pub promoted: bool,
    /// What moved (digest, sequence, previous, copies); absent when nothing moved.
    #[serde(flatten)]
    pub moved: Option<Promoted>,
    /// The health gate's verdict (`--require-healthy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Verdict>,
    /// Why nothing moved (the gate did not pass).
    #[serde(skip)]
    pub refused: Option<String>,
}

impl Report for PromoteReport {
    fn failure(&self) -> Option<String> {
        self.refused.clone()
    }

    fn write_text(&self, out: &mut Text) {
        let Some(done) = &self.moved else {
            if let Some(v) = &self.gate {
                crate::cmd::fleet::wait::write_verdict(v, out);
            }
            return;
        };
        out.table(
            &["DESTINATION", "DIGEST", "SEQUENCE", "PREVIOUS", "STATEMENT"],
            &[vec![
                self.destination.clone(),
                done.digest.clone(),
                done.sequence.to_string(),
                done.previous.as_ref().map(|p| format!("{} (sequence {})", p.digest, p.sequence)).unwrap_or_else(|| "-".into()),
                format!("{} ({})", done.statement.statement, if done.statement.new { "signed" } else { "countersigned" }),
            ]],
        );
    }
}
