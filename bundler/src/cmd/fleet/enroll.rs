//! `drover fleet enroll --fleet FILE --registry PREFIX (--cluster TYPE.NAME[=FINGERPRINT]... |
//! --all-pending) [--remove]`: declares clusters in the Fleet file (docs/fleet.md,
//! "Declared membership"): each named (or every pending: signed, not declared) cluster with
//! the full fingerprint, environment and channel its report carries; `--remove` deletes
//! the entry. The file is edited in place, comments and order kept
//! (`crate::platform::fleetedit`), and the changed lines are printed: that diff is what a
//! reviewer approves. No key is needed. Without `--cluster` or `--all-pending` it lists
//! the clusters pending and changes nothing.
//!
//! Without `--fleet` it edits the registry roster of `PREFIX/drover-reports` (or `--reports
//! HOST/REPO`) instead, signed with `--key`, as before declared membership (a registry
//! writer can roll that roster back: every reader warns). The rules are
//! `crate::fleet::enroll`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Context;
use drover_proto::report::roster::{self, Held, Roster};
use drover_proto::report::store::Received;
use drover_proto::report::{self, prefix_repository};
use drover_proto::trust::TrustPolicy;
use drover_proto::{Reference, RegistryClient, Repo};
use serde::Serialize;

use crate::fleet::enroll::{parse_cluster, plan, Action, Change, Selection};
use crate::fleet::read::CONCURRENCY;
use crate::output::{warn, Report, Text, UsageError};
use crate::platform::fleetedit::{self, Edit};
use crate::platform::membership::{self, DeclaredCluster};
use crate::regargs::RegistryArgs;
use crate::signing::load_signing_key;

use super::args::ROSTER_WARNING;

/// Arguments of `drover fleet enroll`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The Fleet file (the platform's fleet.yaml) whose spec.clusters to edit; the change is reviewed like any other.
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<PathBuf>,
    /// Publish prefix: the reports (and, without --fleet, the roster) of PREFIX/drover-reports.
    #[arg(long = "registry", value_name = "PREFIX", conflicts_with = "reports")]
    pub prefix: Option<String>,
    /// A reports repository (HOST/REPO, oci:DIR or oci-archive:FILE) instead of PREFIX/drover-reports.
    #[arg(long, value_name = "REF")]
    pub reports: Option<String>,
    /// Without --fleet: the private release signing key that signs the registry roster (not needed to list: --trust-key).
    #[arg(long, value_name = "KEY", conflicts_with = "fleet")]
    pub key: Option<PathBuf>,
    /// Without --fleet: public key(s) the current roster must verify with (default: the public half of --key).
    #[arg(long = "trust-key", value_name = "PUB", conflicts_with = "fleet")]
    pub trust_keys: Vec<PathBuf>,
    /// A cluster to enroll (or remove), TYPE.NAME, with =FINGERPRINT (all 64 hex digits, as its agent logs it) to pin its key. Repeatable.
    #[arg(long = "cluster", value_name = "TYPE.NAME[=FINGERPRINT]")]
    pub clusters: Vec<String>,
    /// Enroll every cluster not enrolled yet whose report is signed (a changed key is listed, never replaced).
    #[arg(long, conflicts_with_all = ["clusters", "remove"])]
    pub all_pending: bool,
    /// Remove the --cluster clusters (their reports stop counting).
    #[arg(long)]
    pub remove: bool,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// What `fleet enroll` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Enrolled {
    /// The Fleet file edited (with --fleet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<String>,
    /// The roster's reference (without --fleet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roster: Option<String>,
    /// The roster's sequence now (without --fleet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// True when the file (or a new roster) was written.
    pub written: bool,
    /// Every cluster concerned, with what happened (or is pending).
    pub clusters: Vec<Change>,
    /// Clusters enrolled (declared) in total.
    pub enrolled: usize,
    /// The changed lines of the Fleet file (`-` removed, `+` added): what a reviewer approves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<String>,
}

impl Report for Enrolled {
    fn write_text(&self, out: &mut Text) {
        let rows: Vec<Vec<String>> = self.clusters.iter().map(|c| vec![c.cluster.clone(), c.key.clone(), c.action.as_str().to_string()]).collect();
        out.table(&["CLUSTER", "REPORT KEY", "ACTION"], &rows);
        match (&self.fleet, &self.roster) {
            (Some(file), _) if self.written => {
                out.line(format!("changed {file} ({} clusters declared); review and commit the change:", self.enrolled));
                for l in &self.diff {
                    out.line(l);
                }
            }
            (Some(file), _) => out.line(format!("{file} unchanged ({} clusters declared)", self.enrolled)),
            (None, Some(r)) if self.written => out.line(format!("wrote {r} (sequence {}, {} clusters enrolled)", self.sequence.unwrap_or(0), self.enrolled)),
            (None, r) => out.line(format!("{} unchanged ({} clusters enrolled)", r.as_deref().unwrap_or("the roster"), self.enrolled)),
        }
    }
}

fn selection(args: &Args) -> anyhow::Result<Selection> {
    if args.all_pending {
        return Ok(Selection::AllPending);
    }
    if args.clusters.is_empty() {
        anyhow::ensure!(!args.remove, UsageError("--remove needs the clusters to remove: --cluster TYPE.NAME".into()));
        return Ok(Selection::List);
    }
    let named: Result<Vec<_>, String> = args.clusters.iter().map(|c| parse_cluster(c)).collect();
    Ok(Selection::Clusters(named.map_err(UsageError)?))
}

/// The reports repository named, if any.
fn target(args: &Args) -> anyhow::Result<Option<String>> {
    Ok(match (&args.prefix, &args.reports) {
        (Some(p), _) => Some(prefix_repository(p).map_err(anyhow::Error::msg)?.to_string()),
        (None, Some(r)) => Some(r.clone()),
        (None, None) => None,
    })
}

fn no_reports() -> anyhow::Error {
    UsageError("name the reports: --registry PREFIX (PREFIX/drover-reports) or --reports HOST/REPO".into()).into()
}

async fn reports(target: &str, client: &RegistryClient, create: bool) -> anyhow::Result<(Repo, Vec<Received>)> {
    let (repo, _) = Repo::open(&Reference::parse(target)?, client, create).with_context(|| format!("opening {target}"))?;
    let loaded = report::store::read_all(&repo, CONCURRENCY).await.with_context(|| format!("reading the reports in {target}"))?;
    Ok((repo, loaded.reports))
}

/// Runs `drover fleet enroll`.
pub async fn run(args: Args) -> anyhow::Result<Enrolled> {
    let selection = selection(&args)?;
    match &args.fleet {
        Some(file) => declare(&args, file, &selection).await,
        None => roster_enroll(&args, &selection).await,
    }
}

/// `--fleet FILE`: the change is an edit of the file.
async fn declare(args: &Args, file: &std::path::Path, selection: &Selection) -> anyhow::Result<Enrolled> {
    let fleet = membership::load(file)?;
    let received = match (target(args)?, args.remove) {
        (Some(t), _) => reports(&t, &args.registry.client_for(&[&t])?, false).await?.1,
        (None, true) => Vec::new(),
        (None, false) => return Err(no_reports()),
    };
    let mut declared: BTreeMap<String, String> = fleet.clusters.iter().map(|c| (c.name.clone(), c.report_key.clone())).collect();
    let changes = plan(&mut declared, &received, selection, args.remove).map_err(anyhow::Error::msg)?;
    let edits: Vec<Edit> = changes
        .iter()
        .filter_map(|c| match c.action {
            Action::Enrolled => {
                let (cluster_type, cluster_name) = c.cluster.split_once('.').expect("a checked tag");
                Some(Edit::Add(DeclaredCluster {
                    name: c.cluster.clone(),
                    cluster_type: cluster_type.into(),
                    cluster_name: cluster_name.into(),
                    environment: c.environment.clone().unwrap_or_default(),
                    channel: c.channel.clone().unwrap_or_default(),
                    report_key: c.key.clone(),
                }))
            }
            Action::ReEnrolled => Some(Edit::Rekey { name: c.cluster.clone(), old: c.previous.clone().unwrap_or_default(), new: c.key.clone() }),
            Action::Removed => Some(Edit::Remove(c.cluster.clone())),
            _ => None,
        })
        .collect();
    let count = declared.len();
    if edits.is_empty() {
        return Ok(Enrolled { fleet: Some(fleet.path), roster: None, sequence: None, written: false, clusters: changes, enrolled: count, diff: vec![] });
    }
    let edited = fleetedit::apply(&fleet.text, &edits).map_err(|e| anyhow::anyhow!("{}: {e}; nothing changed", fleet.path))?;
    // The edited text must declare exactly what was decided, and pass every check.
    let after = membership::from_text(&fleet.path, edited.text.clone(), fleet.cluster_types.clone())
        .map_err(|e| anyhow::anyhow!("{e} (after enrolling from the reports: is the cluster's agent configured as intended?); nothing changed"))?;
    let got: BTreeSet<(String, String)> = after.clusters.iter().map(|c| (c.name.clone(), c.report_key.clone())).collect();
    let want: BTreeSet<(String, String)> = declared.into_iter().collect();
    anyhow::ensure!(got == want, "{}: the edit of spec.clusters did not come out as intended; edit the file by hand. Nothing changed", fleet.path);
    drover_proto::layout::write_atomic(file, edited.text.as_bytes()).with_context(|| format!("writing {}", fleet.path))?;
    Ok(Enrolled { fleet: Some(fleet.path), roster: None, sequence: None, written: true, clusters: changes, enrolled: count, diff: edited.diff })
}

/// Without `--fleet`: the registry roster, signed with `--key`.
async fn roster_enroll(args: &Args, selection: &Selection) -> anyhow::Result<Enrolled> {
    warn(ROSTER_WARNING);
    let target = target(args)?.ok_or_else(no_reports)?;
    let key = args.key.as_deref().map(load_signing_key).transpose()?;
    let policy = match (&key, args.trust_keys.is_empty()) {
        (_, false) => TrustPolicy::from_files(&args.trust_keys, 1)?,
        (Some(k), true) => TrustPolicy::new(vec![k.public_key().clone()], 1)?,
        (None, true) => return Err(UsageError("give --trust-key PUB (the key the roster is signed with) or --key KEY, or declare the clusters in a Fleet file with --fleet".into()).into()),
    };
    let client = args.registry.client_for(&[&target])?;
    let (repo, received) = reports(&target, &client, true).await?;
    let reference = repo.describe(roster::TAG);
    let mut current = match roster::read(&repo, &policy).await.with_context(|| format!("reading {reference}"))? {
        Held::Trusted(r) => r,
        Held::Untrusted(_) if repo.resolve(roster::TAG).await?.is_none() => Roster::default(),
        Held::Untrusted(why) => anyhow::bail!(
            "{why}. Nothing enrolled: a roster that does not verify is not built upon. Pass the key it was signed with as --trust-key \
             (key rotation), or delete the tag (skopeo delete docker://{reference}) to start a new roster"
        ),
    };
    let before = current.clone();
    let clusters = plan(&mut current.clusters, &received, selection, args.remove).map_err(anyhow::Error::msg)?;
    let written = current != before;
    if written {
        let key = key.ok_or_else(|| UsageError("changing the roster needs the release key that signs it: --key KEY".into()))?;
        current.sequence = before.sequence.checked_add(1).context("roster sequence overflow")?;
        current.time = drover_proto::time::now_rfc3339();
        roster::write(&repo, &current, &key).await.with_context(|| format!("writing {reference}"))?;
    }
    Ok(Enrolled {
        fleet: None,
        roster: Some(reference),
        sequence: Some(current.sequence),
        written,
        enrolled: current.clusters.len(),
        clusters,
        diff: vec![],
    })
}
