//! `drover fleet enroll --registry PREFIX --key KEY [--cluster TYPE.NAME[=FINGERPRINT]... |
//! --all-pending] [--remove]`: approves clusters' report keys into the fleet roster of
//! `PREFIX/drover-reports` (or `--reports HOST/REPO`), a document signed with the release
//! key (docs/fleet.md, "Who can write a report"). Without `--cluster` or `--all-pending` it
//! lists the clusters whose reports carry a key the roster does not enroll, and changes
//! nothing: that needs no private key, only the public one the roster is checked with
//! (`--trust-key PUB`). The rules are `crate::fleet::enroll`'s.

use std::path::PathBuf;

use anyhow::Context;
use drover_proto::report::roster::{self, Held, Roster};
use drover_proto::report::{self, prefix_repository};
use drover_proto::trust::TrustPolicy;
use drover_proto::{Reference, Repo};
use serde::Serialize;

use crate::fleet::enroll::{parse_cluster, plan, Change, Selection};
use crate::fleet::CONCURRENCY;
use crate::output::{Report, Text, UsageError};
use crate::regargs::RegistryArgs;
use crate::signing::load_signing_key;

/// Arguments of `drover fleet enroll`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Publish prefix: the roster of PREFIX/drover-reports.
    #[arg(long = "registry", value_name = "PREFIX", conflicts_with = "reports")]
    pub prefix: Option<String>,
    /// A reports repository (HOST/REPO or oci:DIR) instead of PREFIX/drover-reports.
    #[arg(long, value_name = "REF")]
    pub reports: Option<String>,
    /// Private release signing key: signs the roster (not needed to list: --trust-key).
    #[arg(long, value_name = "KEY")]
    pub key: Option<PathBuf>,
    /// Public key(s) the current roster must verify with (default: the public half of --key).
    #[arg(long = "trust-key", value_name = "PUB")]
    pub trust_keys: Vec<PathBuf>,
    /// A cluster to enroll (or remove), TYPE.NAME, with =FINGERPRINT (12+ hex digits, as its agent logs it) to pin its key. Repeatable.
    #[arg(long = "cluster", value_name = "TYPE.NAME[=FINGERPRINT]")]
    pub clusters: Vec<String>,
    /// Enroll every cluster not in the roster whose report is signed (a changed key is listed, never replaced).
    #[arg(long, conflicts_with_all = ["clusters", "remove"])]
    pub all_pending: bool,
    /// Remove the --cluster clusters from the roster (their reports stop counting).
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
    /// The roster's reference.
    pub roster: String,
    /// Its sequence now.
    pub sequence: u64,
    /// True when a new roster was written.
    pub written: bool,
    /// Every cluster concerned, with what happened (or is pending).
    pub clusters: Vec<Change>,
    /// Clusters enrolled in total.
    pub enrolled: usize,
}

impl Report for Enrolled {
    fn write_text(&self, out: &mut Text) {
        let rows: Vec<Vec<String>> = self.clusters.iter().map(|c| vec![c.cluster.clone(), c.key.clone(), c.action.clone()]).collect();
        out.table(&["CLUSTER", "REPORT KEY", "ACTION"], &rows);
        if self.written {
            out.line(format!("wrote {} (sequence {}, {} clusters enrolled)", self.roster, self.sequence, self.enrolled));
        } else {
            out.line(format!("{} unchanged ({} clusters enrolled)", self.roster, self.enrolled));
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

/// Runs `drover fleet enroll`.
pub async fn run(args: Args) -> anyhow::Result<Enrolled> {
    let selection = selection(&args)?;
    let key = match &args.key {
        Some(path) => Some(load_signing_key(path)?),
        None if selection == Selection::List && !args.trust_keys.is_empty() => None,
        None if selection == Selection::List => {
            return Err(UsageError("listing needs the public release key the roster is checked with: --trust-key PUB (or --key KEY)".into()).into())
        }
        None => return Err(UsageError("enrolling signs a new roster: pass --key KEY (the private release key)".into()).into()),
    };
    let policy = match &key {
        Some(k) if args.trust_keys.is_empty() => TrustPolicy::new(vec![k.public_key().clone()], 1)?,
        _ => TrustPolicy::from_files(&args.trust_keys, 1)?,
    };
    let target = match (&args.prefix, &args.reports) {
        (Some(p), _) => prefix_repository(p).map_err(anyhow::Error::msg)?.to_string(),
        (None, Some(r)) => r.clone(),
        (None, None) => return Err(UsageError("name the reports: --registry PREFIX (PREFIX/drover-reports) or --reports HOST/REPO".into()).into()),
    };
    let client = args.registry.client_for(&[&target])?;
    let (repo, _) = Repo::open(&Reference::parse(&target)?, &client, true).with_context(|| format!("opening {target}"))?;
    let reference = repo.describe(roster::TAG);
    let mut current = match roster::read(&repo, &policy).await.with_context(|| format!("reading {reference}"))? {
        Held::Trusted(r) => r,
        Held::Untrusted(_) if repo.resolve(roster::TAG).await?.is_none() => Roster::default(),
        Held::Untrusted(why) => anyhow::bail!(
            "{why}. Nothing enrolled: a roster that does not verify is not built upon. Pass the key it was signed with as --trust-key \
             (key rotation), or delete the tag (skopeo delete docker://{reference}) to start a new roster"
        ),
    };
    let loaded = report::store::read_all(&repo, CONCURRENCY).await.with_context(|| format!("reading the reports in {target}"))?;
    let before = current.clone();
    let clusters = plan(&mut current, &loaded.reports, &selection, args.remove).map_err(anyhow::Error::msg)?;
    let written = current != before;
    if written {
        current.sequence = before.sequence.checked_add(1).context("roster sequence overflow")?;
        current.time = drover_proto::time::now_rfc3339();
        let key = key.context("a roster change needs --key")?;
        roster::write(&repo, &current, &key).await.with_context(|| format!("writing {reference}"))?;
    }
    Ok(Enrolled { roster: reference, sequence: current.sequence, written, enrolled: current.clusters.len(), clusters })
}
