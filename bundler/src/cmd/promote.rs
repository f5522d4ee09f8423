//! `drover promote SRC DST_TAG|DST --trust-key PUB...`: verifies SRC, then points the
//! destination tag at the same digest, copying bundle and verified signatures when the
//! destination repository differs (`drover_proto::channel::promote`). Never lowers the
//! destination's sequence, never mixes cluster types or environments.

use anyhow::Context;
use drover_proto::channel::promote::{promote, Promoted};
use serde::Serialize;
use drover_proto::digest::is_valid_digest;
use drover_proto::reference::valid_tag;
use drover_proto::{Reference, Repo};

use crate::output::{warn, Report, Text};
use crate::regargs::RegistryArgs;
use crate::signing::open_reference;
use crate::trustargs::TrustArgs;

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

/// Runs `drover promote`.
pub async fn run(args: Args) -> anyhow::Result<PromoteReport> {
    let policy = args.trust.policy()?;
    let client = args.registry.client()?;
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
    let done = promote(&src, &src_lookup, &dst, &dst_tag, &policy)
        .await
        .with_context(|| format!("promoting {} to {destination} (nothing moved)", args.source))?;
    if let Some(note) = &done.untrusted_previous {
        warn(format_args!("{note}; replaced it"));
    }
    Ok(PromoteReport { source: args.source, destination, promoted: done })
}

/// What `promote` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromoteReport {
    /// The source as given.
    pub source: String,
    /// The destination tag, in full.
    pub destination: String,
    /// What moved (digest, sequence, previous, copies).
    #[serde(flatten)]
    pub promoted: Promoted,
}

impl Report for PromoteReport {
    fn write_text(&self, out: &mut Text) {
        let done = &self.promoted;
        out.table(
            &["DESTINATION", "DIGEST", "SEQUENCE", "PREVIOUS"],
            &[vec![
                self.destination.clone(),
                done.digest.clone(),
                done.sequence.to_string(),
                done.previous.as_ref().map(|p| format!("{} (sequence {})", p.digest, p.sequence)).unwrap_or_else(|| "-".into()),
            ]],
        );
    }
}
