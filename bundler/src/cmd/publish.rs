//! `drover publish PLATFORM --env E --registry PREFIX --key K`: renders every cluster
//! type, builds each bundle, pushes and signs only those whose content layer differs
//! from the remote `PREFIX/<type>:<env>`, then leaves a signed release record; refuses
//! (promotion gate) when the previous environment was not published at this revision.

use std::path::{Path, PathBuf};

use anyhow::Context;
use drover_proto::archive::Packed;
use drover_proto::bundle::{pack_content, BundleMeta};
use drover_proto::channel::now_secs;
use drover_proto::channel::publish::{publish, Request, Sequence};
use drover_proto::keys::PrivateKey;
use drover_proto::reference::valid_tag;
use drover_proto::trust::TrustPolicy;
use drover_proto::{RegistryClient, RegistryRef, Repo};
use futures::stream::{self, StreamExt};
use serde::Serialize;

use crate::output::{warn, Report, Text};
use crate::platform::{par_map, Platform, RenderedType};
use crate::regargs::RegistryArgs;
use crate::release::{self, RecordResult, ReleaseRecord, ReleasedBundle, RELEASES_REPOSITORY};
use crate::signing::load_signing_key;

/// Arguments of `drover publish`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The platform directory (with fleet.yaml).
    pub platform: PathBuf,
    /// The environment to publish (one of fleet.yaml spec.environments).
    #[arg(long, visible_alias = "environment")]
    pub env: String,
    /// Repository prefix: bundles go to PREFIX/<cluster-type>, records to PREFIX/drover-releases.
    #[arg(long, value_name = "PREFIX")]
    pub registry: String,
    /// Private signing key (drover keygen's drover.key, or PKCS#8 PEM).
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Public key(s) whose signatures count as ours: the previous environment's release
    /// record and the bundles already in each channel (default: the public half of --key).
    /// Repeat for several.
    #[arg(long = "trust-key", value_name = "PUB")]
    pub trust_keys: Vec<PathBuf>,
    /// The platform revision (default: `git rev-parse HEAD` in PLATFORM).
    #[arg(long)]
    pub revision: Option<String>,
    /// Source repository URL recorded in bundles (default: git remote origin, if any).
    #[arg(long)]
    pub source_repository: Option<String>,
    /// Registry operations in flight at once.
    #[arg(long, default_value_t = 8)]
    pub parallel: usize,
    /// Publish an empty bundle for cluster types with no workload assigned (else an error).
    #[arg(long)]
    pub allow_empty: bool,
    /// Treat every warning as an error: known fights between objects (spec.replicas of a
    /// workload an autoscaler scales, rules of an aggregated ClusterRole), namespaces
    /// removed from cluster-scoped objects.
    #[arg(long)]
    pub strict: bool,
    /// Emergency: publish without the previous environment's release record (recorded).
    #[arg(long)]
    pub skip_promotion_gate: bool,
    /// Raise every bundle's minAgentVersion (default: the lowest agent version that
    /// understands every field the bundle uses; docs/bundle.md, "Compatibility").
    #[arg(long, value_name = "VERSION")]
    pub min_agent_version: Option<String>,
    /// Registry flags.
    #[command(flatten)]
    pub registry_args: RegistryArgs,
}

/// One cluster type's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeResult {
    /// The cluster type.
    pub cluster_type: String,
    /// `PREFIX/<type>:<env>`.
    pub reference: String,
    /// The bundle digest the tag points at now.
    pub digest: String,
    /// True when a new bundle was pushed.
    pub changed: bool,
    /// Objects in the bundle.
    pub objects: usize,
    /// The bundle's sequence.
    pub sequence: u64,
    /// The agent version it needs, when it says (its config's `minAgentVersion`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_agent_version: Option<String>,
}

/// What `publish` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishReport {
    /// The environment published.
    pub environment: String,
    /// The platform revision.
    pub revision: String,
    /// One entry per cluster type.
    pub results: Vec<TypeResult>,
    /// The signed release record left in `PREFIX/drover-releases`.
    pub release_record: RecordResult,
    /// True when `--skip-promotion-gate` was used (written into the record).
    pub gate_skipped: bool,
}

impl Report for PublishReport {
    fn write_text(&self, out: &mut Text) {
        let rows: Vec<Vec<String>> = self
            .results
            .iter()
            .map(|r| {
                let status = if r.changed { "changed" } else { "unchanged" };
                vec![r.cluster_type.clone(), r.digest.clone(), status.into(), r.objects.to_string()]
            })
            .collect();
        out.table(&["CLUSTER TYPE", "DIGEST", "STATUS", "OBJECTS"], &rows);
        let changed = self.results.iter().filter(|r| r.changed).count();
        out.line(format!(
            "{} at {}: {changed} changed, {} unchanged; release record {} ({})",
            self.environment,
            self.revision,
            self.results.len() - changed,
            self.release_record.reference,
            if self.release_record.pushed { "pushed" } else { "unchanged" }
        ));
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

struct Local {
    rendered: RenderedType,
    /// The content layer, packed once: compared with the channel's, pushed when changed.
    packed: Packed,
}

struct Ctx<'a> {
    client: &'a RegistryClient,
    prefix: &'a str,
    env: &'a str,
    revision: &'a str,
    source_repository: &'a str,
    key: &'a PrivateKey,
    policy: &'a TrustPolicy,
    min_agent_version: Option<&'a drover_proto::compat::Version>,
}

/// Publishes one cluster type through the channel rules: left alone when the channel holds
/// a bundle that verifies with the same content, else our own bundle with the next
/// verified sequence (history tag, signature, then the channel tag).
async fn publish_type(ctx: &Ctx<'_>, local: &Local) -> anyhow::Result<TypeResult> {
    let t = &local.rendered.name;
    let rref = RegistryRef::parse(&format!("{}/{t}", ctx.prefix))?;
    let repo = Repo::Registry { client: ctx.client.clone(), repo: rref.clone() };
    let reference = rref.with_tag(ctx.env).to_string();
    let meta = BundleMeta {
        cluster_type: t.clone(),
        environment: ctx.env.to_string(),
        sequence: 0,
        source_repository: ctx.source_repository.to_string(),
        revision: ctx.revision.to_string(),
        created: None,
        allow_mass_prune: false,
        workloads: local.rendered.provenance.clone(),
        health_checks: local.rendered.health_checks.clone(),
        min_agent_version: ctx.min_agent_version.cloned(),
    };
    let min_agent_version = meta.stamped_min_agent_version();
    let published = publish(Request {
        repo: &repo,
        channel: ctx.env,
        objects: &local.rendered.objects,
        meta,
        sequence: Sequence::Next { at_least: now_secs() },
        key: Some(ctx.key),
        policy: Some(ctx.policy),
        packed: Some(&local.packed),
        skip_unchanged: true,
    })
    .await
    .with_context(|| format!("publishing {reference}"))?;
    if let Some(note) = &published.untrusted_previous {
        warn(format_args!("{note}; replaced it with our own bundle"));
    }
    Ok(TypeResult {
        cluster_type: t.clone(),
        reference,
        digest: published.digest,
        changed: published.changed,
        objects: published.objects,
        sequence: published.sequence,
        min_agent_version,
    })
}

/// Warns about the reporting agents (in `PREFIX/drover-reports`) too old for the bundles
/// that need more than every agent has.
async fn warn_older_agents(prefix: &str, env: &str, results: &[TypeResult], client: &RegistryClient, policy: &TrustPolicy) {
    use crate::fleet::agents::{warnings, Target};
    let targets: Vec<Target<'_>> = results
        .iter()
        .filter_map(|r| {
            let min = r.min_agent_version.as_deref()?;
            Some(Target { cluster_type: &r.cluster_type, environment: env, channel: env, min_agent_version: min })
        })
        .collect();
    let Ok(repository) = drover_proto::report::prefix_repository(prefix) else { return };
    for w in warnings(&repository.to_string(), client, policy, &targets).await {
        warn(w);
    }
}

/// Runs `drover publish`.
pub async fn run(args: Args) -> anyhow::Result<PublishReport> {
    let platform = Platform::load(&args.platform)?;
    platform.check_environment(&args.env)?;
    let revision = match &args.revision {
        Some(r) => r.clone(),
        None => git(&args.platform, &["rev-parse", "HEAD"]).with_context(|| {
            format!("no revision: pass --revision R, or publish from a git checkout (`git rev-parse HEAD` failed in {})", args.platform.display())
        })?,
    };
    let record_tag = release::record_tag(&args.env, &revision);
    anyhow::ensure!(
        valid_tag(&record_tag),
        "revision {revision:?} cannot be used in the release record tag {record_tag:?}: use letters, digits, '.', '_' and '-' (at most {} characters)",
        128 - args.env.len() - 1
    );
    let prefix = args.registry.trim_end_matches('/').to_string();
    let releases_ref = RegistryRef::parse(&format!("{prefix}/{RELEASES_REPOSITORY}"))
        .with_context(|| format!("--registry {prefix:?} must be HOST[:PORT]/PATH without tag or digest"))?;
    anyhow::ensure!(args.parallel > 0, "--parallel must be at least 1");
    let source_repository = args
        .source_repository
        .clone()
        .or_else(|| git(&args.platform, &["config", "remote.origin.url"]))
        .unwrap_or_default();
    let key = load_signing_key(&args.key)?;
    let min_agent_version = crate::cmd::build::min_agent_version(args.min_agent_version.as_deref())?;
    let policy = if args.trust_keys.is_empty() {
        TrustPolicy::new(vec![key.public_key().clone()], 1)?
    } else {
        TrustPolicy::from_files(&args.trust_keys, 1)?
    };

    // Render and build everything first (all or nothing), in parallel.
    let rendered = tokio::task::block_in_place(|| platform.render(&args.env, None))?;
    crate::output::warnings(rendered.iter().flat_map(|t| &t.warnings), args.strict)?;
    let empty: Vec<&str> = rendered.iter().filter(|t| t.workloads.is_empty()).map(|t| t.name.as_str()).collect();
    anyhow::ensure!(
        empty.is_empty() || args.allow_empty,
        "no workload is assigned to cluster type(s) {} in environment {}; check the workload selectors, or pass --allow-empty to publish empty bundles",
        empty.join(", "),
        args.env
    );
    let locals: Vec<Local> = tokio::task::block_in_place(|| par_map(&rendered, |t| pack_content(&t.objects)))
        .into_iter()
        .zip(rendered)
        .map(|(packed, rendered)| Local { rendered, packed })
        .collect();

    let client = args.registry_args.client_for(&[&args.registry])?;
    let releases = Repo::Registry { client: client.clone(), repo: releases_ref };

    // The promotion gate, before anything is written.
    let gate_skipped = args.skip_promotion_gate;
    if gate_skipped {
        warn(format_args!(
            "--skip-promotion-gate: publishing {} at {revision} without checking the previous environment; the release record says so",
            args.env
        ));
    } else {
        release::check_gate(&releases, &platform.environments, &args.env, &revision, &policy).await?;
    }

    let ctx = Ctx { client: &client, prefix: &prefix, env: &args.env, revision: &revision, source_repository: &source_repository, key: &key, policy: &policy, min_agent_version: min_agent_version.as_ref() };
    let outcomes: Vec<(String, anyhow::Result<TypeResult>)> = stream::iter(locals.iter())
        .map(|l| {
            let ctx = &ctx;
            async move { (l.rendered.name.clone(), publish_type(ctx, l).await) }
        })
        .buffer_unordered(args.parallel)
        .collect()
        .await;
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for (name, r) in outcomes {
        match r {
            Ok(r) => results.push(r),
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    results.sort_by(|a, b| a.cluster_type.cmp(&b.cluster_type));
    if !failures.is_empty() {
        failures.sort();
        anyhow::bail!(
            "publishing {} failed for {} of {} cluster type(s) (no release record written; re-run to retry, unchanged ones are skipped):\n  {}",
            args.env,
            failures.len(),
            locals.len(),
            failures.join("\n  ")
        );
    }

    let record = ReleaseRecord {
        schema_version: release::RECORD_SCHEMA_VERSION,
        environment: args.env.clone(),
        revision: revision.clone(),
        time: release::now_rfc3339(),
        gate_skipped,
        cluster_types: results
            .iter()
            .map(|r| (r.cluster_type.clone(), ReleasedBundle { reference: r.reference.clone(), digest: r.digest.clone() }))
            .collect(),
    };
    let rec = release::publish_record(&releases, &record, &key, &policy).await?;
    warn_older_agents(&prefix, &args.env, &results, &client, &policy).await;

    Ok(PublishReport { environment: args.env, revision, results, release_record: rec, gate_skipped })
}
