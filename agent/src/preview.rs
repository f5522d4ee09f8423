//! `drover-agent plan`: what applying the newest bundle would do on this target, changing
//! nothing. The same path as a poll up to the plan stage — resolve, admission (fetch and
//! verify: signatures, cluster type, environment, anti-rollback; [`crate::admit`]),
//! unpack, policy and order ([`crate::plan`]) — then, instead of apply and prune, the
//! target's [`Target::plan_apply`] and, with the prune stage's own decision (inventory
//! difference, Namespaces held back, the safety valve: [`crate::prune::decide`]),
//! [`Target::plan_prune`].
//!
//! Nothing is written: not the target (the kube target's dry run stores nothing; the dir
//! target is only read), not the state directory. sled locks the database of a running
//! agent and opening it writes, so plan reads a private copy of `STATE_DIR/db` (with the
//! bundle cache: Secrets) in a temporary directory `drover-agent-plan-<pid>-*` (0700),
//! removed on every exit: when plan ends, fails or is interrupted (SIGINT/SIGTERM drop it:
//! `lib.rs`), and, for a plan that was killed outright, by the next plan's sweep of
//! copies whose process is gone ([`sweep_stale_copies`]); the floor and inventory are
//! also raised by the target's record ([`crate::recall`]), read only.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::admit::Admission;
use crate::assemble::Clients;
use crate::config::{Settings, SourceSettings};
use crate::record::Store;
use crate::resolve::Source;
use crate::targets::{ObjectPlan, PlanAction};
use crate::verify::Expectations;

/// What `plan` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// The source's name.
    pub name: String,
    /// The source.
    pub source: String,
    /// The target.
    pub target: String,
    /// The bundle planned (the channel's newest, verified).
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
    /// The applied bundle, when one is recorded.
    pub applied_digest: Option<String>,
    /// Its sequence.
    pub applied_sequence: Option<u64>,
    /// True when applying would change the target (exit code 3).
    pub changes: bool,
    /// Objects per action.
    pub summary: std::collections::BTreeMap<String, usize>,
    /// Per object, in apply order, then the prune candidates.
    pub objects: Vec<ObjectPlan>,
    /// Notes (the prune safety valve, an unreadable in-cluster record).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How `plan` ended.
pub enum Planned {
    /// The plan.
    Plan(PlanReport),
    /// The bundle would be refused or cannot be fetched (`stage`: resolve, fetch,
    /// verify, unpack, plan).
    Refused {
        /// Where.
        stage: &'static str,
        /// Why.
        message: String,
    },
}

/// The name prefix of plan's private copies in the temporary directory.
pub const COPY_PREFIX: &str = "drover-agent-plan-";

/// Removes the private copies in `tmp` left by plans that were killed: directories named
/// `drover-agent-plan-<pid>-*` of this user whose process no longer runs (a copy of a
/// running plan, or another user's, is left alone). Returns how many were removed.
pub fn sweep_stale_copies(tmp: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(COPY_PREFIX).and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let Ok(md) = std::fs::symlink_metadata(e.path()) else { continue };
        if !md.is_dir() || !ours(&md) {
            continue;
        }
        match std::fs::remove_dir_all(e.path()) {
            Ok(()) => removed += 1,
            Err(err) => tracing::warn!("cannot remove a stale copy of a state database {}: {err}", e.path().display()),
        }
    }
    removed
}

#[cfg(unix)]
fn ours(md: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    md.uid() == unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn ours(_md: &std::fs::Metadata) -> bool {
    false
}

/// A new private temporary directory for the copy, after sweeping stale ones.
fn private_copy() -> anyhow::Result<tempfile::TempDir> {
    let tmp = std::env::temp_dir();
    let swept = sweep_stale_copies(&tmp);
    if swept > 0 {
        tracing::info!("removed {swept} copies of a state database left in {} by plans that were killed", tmp.display());
    }
    tempfile::Builder::new()
        .prefix(&format!("{COPY_PREFIX}{}-", std::process::id()))
        .tempdir()
        .context("a temporary directory for the copy of the state database")
}

/// Copies the database of `state_dir` (if any) into `into`, for reading; refused by the
/// rule the agent starts by ([`crate::statedir::StateDir::for_reading`]).
fn copy_db(state_dir: &Path, into: &Path) -> anyhow::Result<()> {
    let src = state_dir.join(crate::statedir::DB);
    if matches!(std::fs::symlink_metadata(&src), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(());
    }
    crate::statedir::StateDir::for_reading(state_dir).context("plan reads no database but the agent's")?;
    let mut todo = vec![(src.clone(), into.join("db"))];
    while let Some((from, to)) = todo.pop() {
        crate::private::create_dir_all(&to).with_context(|| format!("copying {}", from.display()))?;
        for e in std::fs::read_dir(&from).with_context(|| format!("reading {}", from.display()))? {
            let e = e?;
            let ft = e.file_type()?;
            if ft.is_dir() {
                todo.push((e.path(), to.join(e.file_name())));
            } else if ft.is_file() {
                std::fs::copy(e.path(), to.join(e.file_name())).with_context(|| format!("copying {}", e.path().display()))?;
            }
        }
    }
    Ok(())
}

/// What `plan` needs once for every source it plans: the private copy of the state
/// database (removed when this is dropped) and the clients.
pub struct Session {
    store: Store,
    clients: Clients,
    _copy: tempfile::TempDir,
}

impl Session {
    /// Copies the state database of `settings` and connects the clients.
    pub async fn open(settings: &Settings) -> anyhow::Result<Session> {
        let copy = private_copy()?;
        copy_db(&settings.state_dir, copy.path())?;
        let store = Store::open(copy.path()).context("reading the copy of the state database")?;
        let clients = Clients::new(settings, true).await?;
        Ok(Session { store, clients, _copy: copy })
    }

    /// Plans the newest bundle of source `s` on its target.
    pub async fn plan(&mut self, settings: &Settings, s: &SourceSettings) -> anyhow::Result<Planned> {
        let trust = crate::assemble::trust(s)?;
        let fingerprint = trust.fingerprint();
        let client = self.clients.registry(s)?;
        let mut source = Source::open(&s.source, &s.reference, &client).with_context(|| format!("source {}", s.source))?;
        let target = self.clients.target(settings, s, true)?;
        let store = &self.store;
        let (state, note) = crate::recall::recall(target.as_ref(), store.source(&s.source)?).await;
        let refused = |stage: &'static str| move |e: crate::stage::StageError| Planned::Refused { stage, message: e.message().to_string() };
        let digest = match crate::resolve::resolve(&mut source).await {
            Ok(d) => d,
            Err(e) => return Ok(refused("resolve")(e)),
        };
        if state.refuses(&digest) {
            let message = format!(
                "{digest} is the bundle this agent rolled back from (--on-degraded rollback): it is not applied on its own; a newer bundle is, and `drover-agent release --rollback` lifts the refusal"
            );
            return Ok(Planned::Refused { stage: "rollback", message });
        }
        let expect = Expectations { cluster_type: s.expect_cluster_type.clone(), environment: s.expect_environment.clone() };
        let admission = Admission { source: &source, store, trust: &trust, fingerprint: &fingerprint, expect: &expect, state: &state };
        let verified = match admission.admit(&digest).await {
            Ok(a) => a.verified,
            Err(stop) => return Ok(Planned::Refused { stage: stop.stage, message: stop.error.message().to_string() }),
        };
        let allow_mass_prune = verified.bundle.config.allow_mass_prune;
        if let Err(e) = crate::wait::rules(&verified.bundle.digest, &verified.bundle.config, &s.health_checks) {
            return Ok(refused("verify")(e));
        }
        let unpacked = match crate::unpack::unpack(verified) {
            Ok(u) => u,
            Err(e) => return Ok(refused("unpack")(e)),
        };
        let policy = crate::assemble::policy(s);
        let known = match crate::plan::cluster_kinds(target.as_ref(), &unpacked, &policy).await {
            Ok(k) => k,
            Err(e) => return Ok(refused("plan")(e)),
        };
        let (req, refused_objects) = match crate::plan::plan(unpacked, &policy, &known, &s.source, &s.field_manager) {
            Ok(r) => r,
            Err(e) => return Ok(refused("plan")(e)),
        };
        let mut objects: Vec<ObjectPlan> = refused_objects.into_iter().map(|o| ObjectPlan::with(o.object, PlanAction::Refused, o.message)).collect();
        let mut applied = target.plan_apply(&req).await.context("planning the apply")?;
        for o in &mut applied {
            o.message = crate::apply::mask_secret_messages(&req, &o.object, &o.message);
        }
        objects.extend(applied);
        let refused_keys: std::collections::BTreeSet<_> = objects.iter().filter(|o| o.action == PlanAction::Refused).map(|o| o.object.key()).collect();
        let previous: Vec<_> = state.inventory.iter().filter(|o| !refused_keys.contains(&o.key())).cloned().collect();
        let mut notes: Vec<String> = note.into_iter().collect();
        let namespaces: Vec<_> = crate::prune::candidates(&previous, &req).into_iter().filter(crate::prune::is_namespace).collect();
        let contents = if namespaces.is_empty() { Vec::new() } else { target.namespace_contents(&namespaces).await };
        let decision = crate::prune::decide(&previous, &req, &contents, s.max_prune_ratio, allow_mass_prune);
        for h in decision.held {
            objects.push(ObjectPlan::with(h.object, PlanAction::PruneRefused, h.message));
        }
        match decision.decision {
            crate::prune::Decision::Nothing => {}
            crate::prune::Decision::Refused { candidates, message } => {
                objects.extend(candidates.into_iter().map(|c| ObjectPlan::with(c, PlanAction::PruneRefused, "prune safety valve")));
                notes.push(message);
            }
            crate::prune::Decision::Prune(preq) => {
                objects.extend(target.plan_prune(&preq).await.context("planning the prune")?);
            }
        }
        let mut summary = std::collections::BTreeMap::new();
        for o in &objects {
            let name = serde_json::to_value(o.action).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            *summary.entry(name).or_insert(0) += 1;
        }
        Ok(Planned::Plan(PlanReport {
            name: s.name.clone(),
            source: s.source.clone(),
            target: target.describe(),
            digest: req.digest.clone(),
            sequence: req.sequence,
            applied_digest: state.applied_digest.clone(),
            applied_sequence: state.applied_sequence,
            changes: objects.iter().any(|o| o.action.changes()),
            summary,
            objects,
            notes,
        }))
    }
}

impl PlanReport {
    /// True when some object would fail (a refused object does not: the rest would be
    /// applied, as `run` does).
    pub fn fails(&self) -> bool {
        self.objects.iter().any(|o| o.action == PlanAction::Failed)
    }

    /// Human-readable rendering.
    pub fn to_text(&self) -> String {
        let applied = match (&self.applied_digest, self.applied_sequence) {
            (Some(d), Some(s)) => format!("{d} sequence {s}"),
            _ => "nothing".into(),
        };
        let mut out = format!("plan: {} sequence {} on {} (applied: {applied})\n", self.digest, self.sequence, self.target);
        for o in &self.objects {
            let action = serde_json::to_value(o.action).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            out += &format!("  {action:<13} {}", o.object);
            if !o.message.is_empty() {
                out += &format!("  ({})", o.message);
            }
            out.push('\n');
            for c in &o.diff {
                out += &format!("      {}: {} -> {}\n", c.path, crate::diff::short(&c.before), crate::diff::short(&c.after));
            }
        }
        for n in &self.notes {
            out += &format!("note: {n}\n");
        }
        let counts: Vec<String> = self.summary.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out += &format!("{}{}\n", counts.join(", "), if self.changes { "" } else { "; nothing would change" });
        out
    }
}
