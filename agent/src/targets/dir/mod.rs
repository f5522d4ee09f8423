//! The `dir:PATH` target: keeps `PATH/manifests/` equal to the applied bundle's tree, for
//! non-Kubernetes consumers and for trying drover without a cluster.
//!
//! PATH belongs to the agent ([`crate::owned`]): created 0700 when missing, refused when
//! another user owns it or its group or others may write it, or when it is reached through
//! a directory another user may change (the message names path, owner and mode). Every file
//! operation goes through the directory opened once ([`fsat`]: `openat` without following
//! links), so an entry replaced by a link (`.drover-stage` to a file elsewhere, a bundle
//! file to `/dev/zero`) is neither followed nor read; reads are bounded by the bundle's
//! own sizes.
//!
//! Apply builds the complete new tree in `PATH/.drover-stage/manifests` (new files
//! written, files of the current tree the bundle lacks hard-linked so that only prune
//! removes them), then swaps it in with two renames (`manifests` → `.drover-old`, stage →
//! `manifests`). A file in the tree that the agent did not write (another user's, a link,
//! a device, a file with other hard links) is not carried into the new tree: it is
//! reported (the attempt's reason: `status`, `history`). A crash between the renames is
//! repaired when the target is opened again. Bundles carry Secrets: the tree is private
//! (directories 0700, files 0600).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use drover_proto::media;
use drover_proto::object::ObjectRef;
use drover_proto::text::redact;

use crate::fsat::{self, Found};

use super::{
    Action, ApplyReport, ApplyRequest, BoxFuture, HealthReport, ObjectOutcome, ObjectPlan, PlanAction, PruneReport, PruneRequest, Target,
    TargetError,
};

const TREE: &str = "manifests";
const STAGE: &str = ".drover-stage";
const OLD: &str = ".drover-old";
/// Largest file read to decide a prune or show a plan's diff: no object of a cluster is
/// larger (etcd keeps at most 1.5 MiB per object).
const MAX_READ: u64 = 3 << 20;

/// The directory target.
#[derive(Debug, Clone)]
pub struct DirTarget {
    root: PathBuf,
    /// PATH, opened once (`None` for a plan of a directory that does not exist).
    fd: Option<Arc<OwnedFd>>,
}

fn io_err(path: &Path, e: io::Error) -> TargetError {
    TargetError::Io { path: path.display().to_string(), message: e.to_string() }
}

/// The components below `manifests/` of a bundle path.
fn comps(rel: &Path) -> Vec<&str> {
    rel.components().skip(1).filter_map(|c| c.as_os_str().to_str()).collect()
}

impl DirTarget {
    /// Opens (creating, private) the directory, refuses one the agent does not own or that
    /// others may write, repairs an interrupted swap and makes the tree private.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, TargetError> {
        let root = root.into();
        let fd = crate::owned::claim(&root, "target directory", false).map_err(|e| match e {
            crate::owned::OwnedError::Refused { path, message } => TargetError::Io { path, message },
            crate::owned::OwnedError::Io { path, source } => TargetError::Io { path, message: source.to_string() },
        })?;
        let t = DirTarget { root, fd: Some(Arc::new(fd)) };
        t.recover()?;
        if let Some(tree) = t.tree_fd()? {
            fsat::walk(tree.as_fd(), true).map_err(|e| io_err(&t.root.join(TREE), e))?;
        }
        Ok(t)
    }

    /// The directory as it is, for reading only (`drover-agent plan`): nothing is
    /// created, repaired or tightened.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let fd = fsat::open_root(&root).ok().map(Arc::new);
        DirTarget { root, fd }
    }

    fn root_fd(&self) -> Result<&OwnedFd, TargetError> {
        self.fd.as_deref().ok_or_else(|| TargetError::Unavailable(format!("{} is not a directory the agent opened", self.root.display())))
    }

    /// `manifests/`, opened, when it exists.
    fn tree_fd(&self) -> Result<Option<OwnedFd>, TargetError> {
        let Some(root) = self.fd.as_deref() else { return Ok(None) };
        match fsat::open_dir(root.as_fd(), TREE) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&self.root.join(TREE), e)),
        }
    }

    /// Finishes or undoes a swap interrupted by a crash, and drops a stale stage.
    fn recover(&self) -> Result<(), TargetError> {
        let root = self.root_fd()?.as_fd();
        if self.tree_fd()?.is_none() && fsat::open_dir(root, OLD).is_ok() {
            fsat::rename(root, OLD, root, TREE).map_err(|e| io_err(&self.root.join(OLD), e))?;
        }
        for leftover in [OLD, STAGE] {
            fsat::remove_tree(root, leftover).map_err(|e| io_err(&self.root.join(leftover), e))?;
        }
        Ok(())
    }

    /// Maps a bundle path to a file under PATH, refusing anything that could leave it.
    fn safe_rel(path: &str) -> Option<PathBuf> {
        let p = Path::new(path);
        let mut comps = p.components();
        if comps.next() != Some(Component::Normal(TREE.as_ref())) {
            return None;
        }
        if !comps.clone().all(|c| matches!(c, Component::Normal(n) if n.to_str().is_some())) || comps.next().is_none() {
            return None;
        }
        Some(p.to_path_buf())
    }

    /// What is at `rel` in the current tree, reading at most `max` bytes.
    fn current(&self, tree: Option<&OwnedFd>, rel: &Path, max: u64) -> io::Result<Found> {
        match tree {
            Some(t) => fsat::read_path(t.as_fd(), &comps(rel), max),
            None => Ok(Found::Missing),
        }
    }

    fn apply_sync(&self, req: &ApplyRequest) -> Result<ApplyReport, TargetError> {
        self.recover()?;
        let tree = self.tree_fd()?;
        let mut outcomes = Vec::new();
        let mut wanted: BTreeMap<PathBuf, &[u8]> = BTreeMap::new();
        let mut failed = false;
        for obj in req.objects() {
            if failed {
                outcomes.push(ObjectOutcome::with(obj.id.clone(), Action::Skipped, "an earlier object failed"));
                continue;
            }
            let Some(rel) = Self::safe_rel(&obj.path) else {
                failed = true;
                outcomes.push(ObjectOutcome::with(obj.id.clone(), Action::Failed, format!("unsafe path {:?}", obj.path)));
                continue;
            };
            // Read no more than the bundle's own bytes: a longer file differs anyway.
            let action = match self.current(tree.as_ref(), &rel, obj.yaml.len() as u64) {
                Ok(Found::Ours(cur)) if cur == obj.yaml.as_slice() => Action::Unchanged,
                Ok(Found::Missing) => Action::Created,
                Ok(_) => Action::Configured,
                Err(e) => {
                    failed = true;
                    outcomes.push(ObjectOutcome::with(obj.id.clone(), Action::Failed, format!("{}: {e}", self.root.join(&rel).display())));
                    continue;
                }
            };
            outcomes.push(ObjectOutcome::new(obj.id.clone(), action));
            wanted.insert(rel, obj.yaml.as_slice());
        }
        let foreign = match &tree {
            Some(t) => fsat::walk(t.as_fd(), false).map_err(|e| io_err(&self.root.join(TREE), e))?,
            None => Vec::new(),
        };
        let foreign: Vec<(String, String)> = foreign
            .into_iter()
            .filter_map(|e| e.foreign.map(|why| (format!("{TREE}/{}", e.comps.join("/")), why)))
            .filter(|(p, _)| !wanted.contains_key(Path::new(p)))
            .collect();
        let notes = foreign_notes(&self.root, &foreign);
        if failed || (foreign.is_empty() && outcomes.iter().all(|o| o.action == Action::Unchanged)) {
            return Ok(ApplyReport { outcomes, notes });
        }
        if let Err((path, e)) = self.stage_and_swap(tree.as_ref(), &wanted) {
            let _ = fsat::remove_tree(self.root_fd()?.as_fd(), STAGE);
            let msg = format!("{}: {e}", path.display());
            for o in &mut outcomes {
                o.action = Action::Failed;
                o.message = msg.clone();
            }
        }
        Ok(ApplyReport { outcomes, notes })
    }

    fn stage_and_swap(&self, tree: Option<&OwnedFd>, wanted: &BTreeMap<PathBuf, &[u8]>) -> Result<(), (PathBuf, io::Error)> {
        let root = self.root_fd().map_err(|e| (self.root.clone(), io::Error::other(e.to_string())))?.as_fd();
        let at = |p: &str| {
            let p = self.root.join(p);
            move |e| (p, e)
        };
        fsat::remove_tree(root, STAGE).map_err(at(STAGE))?;
        fsat::mkdir_new(root, STAGE).map_err(at(STAGE))?;
        let stage = fsat::open_dir(root, STAGE).map_err(at(STAGE))?;
        fsat::mkdir_new(stage.as_fd(), TREE).map_err(at(STAGE))?;
        let stage_tree = fsat::open_dir(stage.as_fd(), TREE).map_err(at(STAGE))?;
        // Keep the current files the bundle lacks (only prune removes them), but only
        // those the agent could have written.
        if let Some(tree) = tree {
            for entry in fsat::walk(tree.as_fd(), false).map_err(at(TREE))? {
                let rel = Path::new(TREE).join(entry.comps.join("/"));
                if entry.foreign.is_some() || wanted.contains_key(&rel) {
                    continue;
                }
                let refs: Vec<&str> = entry.comps.iter().map(String::as_str).collect();
                let (name, parents) = refs.split_last().expect("a file has a name");
                let from = fsat::open_path(tree.as_fd(), parents).map_err(at(TREE))?;
                let to = fsat::ensure_path(stage_tree.as_fd(), parents).map_err(at(STAGE))?;
                fsat::link(from.as_fd(), to.as_fd(), name).map_err(at(rel.to_str().unwrap_or(TREE)))?;
            }
        }
        for (rel, data) in wanted {
            let c = comps(rel);
            let (name, parents) = c.split_last().expect("safe_rel has a file name");
            let dir = fsat::ensure_path(stage_tree.as_fd(), parents).map_err(at(STAGE))?;
            fsat::write_new(dir.as_fd(), name, data).map_err(|e| (self.root.join(STAGE).join(rel), e))?;
        }
        if tree.is_some() {
            fsat::rename(root, TREE, root, OLD).map_err(at(TREE))?;
        }
        fsat::rename(stage.as_fd(), TREE, root, TREE).map_err(at(TREE))?;
        let _ = fsat::remove_tree(root, OLD);
        let _ = fsat::remove_tree(root, STAGE);
        Ok(())
    }

    fn prune_sync(&self, req: &PruneRequest) -> Result<PruneReport, TargetError> {
        self.recover()?;
        let tree = self.tree_fd()?;
        let mut outcomes = Vec::new();
        for id in &req.delete {
            outcomes.push(self.prune_one(tree.as_ref(), id, &req.source));
        }
        Ok(PruneReport { outcomes })
    }

    /// The file prune may delete for `id`, or the outcome that says why not.
    fn prune_verdict(&self, tree: Option<&OwnedFd>, id: &ObjectRef, source: &str) -> Result<PathBuf, (Action, String)> {
        let Some(rel) = Self::safe_rel(&id.bundle_path()) else {
            return Err((Action::Refused, "unsafe path".into()));
        };
        let data = match self.current(tree, &rel, MAX_READ) {
            Ok(Found::Ours(d)) => d,
            Ok(Found::Missing) => return Err((Action::Kept, "already gone".into())),
            Ok(Found::TooLarge) => return Err((Action::Refused, format!("larger than {MAX_READ} bytes: not a file the agent wrote")),),
            Ok(Found::Foreign(why)) => return Err((Action::Refused, format!("{why}: not a file the agent wrote; left alone"))),
            Err(e) => return Err((Action::Failed, format!("{}: {e}", self.root.join(&rel).display()))),
        };
        if let Ok(v) = drover_proto::bundle::parse_single_object(&data) {
            let ann = |k: &str| v.pointer("/metadata/annotations").and_then(|a| a.get(k)).and_then(|x| x.as_str()).map(str::to_string);
            if ann(media::ANN_OBJ_PRUNE).as_deref() == Some("disabled") {
                return Err((Action::Kept, format!("annotated {}: disabled", media::ANN_OBJ_PRUNE)));
            }
            if let Some(owner) = ann(media::ANN_OBJ_SOURCE) {
                if owner != source {
                    return Err((Action::Refused, format!("owned by source {owner}")));
                }
            }
        }
        Ok(rel)
    }

    fn prune_one(&self, tree: Option<&OwnedFd>, id: &ObjectRef, source: &str) -> ObjectOutcome {
        let rel = match self.prune_verdict(tree, id, source) {
            Ok(f) => f,
            Err((action, message)) => return ObjectOutcome::with(id.clone(), action, message),
        };
        let tree = tree.expect("a file was read from the tree");
        let c = comps(&rel);
        let (name, parents) = c.split_last().expect("safe_rel has a file name");
        let removed = fsat::open_path(tree.as_fd(), parents).and_then(|d| fsat::remove_file(d.as_fd(), name));
        match removed {
            Ok(()) => {
                remove_empty_parents(tree, parents);
                ObjectOutcome::new(id.clone(), Action::Deleted)
            }
            Err(e) => ObjectOutcome::with(id.clone(), Action::Failed, format!("{}: {e}", self.root.join(&rel).display())),
        }
    }
}

/// The attempt's notes about files in the tree the agent did not write (the first few
/// named).
fn foreign_notes(root: &Path, foreign: &[(String, String)]) -> Vec<String> {
    if foreign.is_empty() {
        return Vec::new();
    }
    let named: Vec<String> = foreign.iter().take(5).map(|(p, why)| format!("{} ({why})", root.join(p).display())).collect();
    let more = foreign.len().saturating_sub(named.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let note = format!(
        "{} file(s) in the target that the agent did not write, not trusted and left out of the applied tree: {}{more}",
        foreign.len(),
        named.join(", ")
    );
    tracing::warn!("{note}");
    vec![note]
}

impl DirTarget {
    /// `plan`: per object, what apply would do to its file (an update with the changed
    /// fields of the parsed YAML; a file that does not parse is replaced as a whole).
    fn plan_apply_sync(&self, req: &ApplyRequest) -> Vec<ObjectPlan> {
        let mut out = Vec::new();
        let tree = self.tree_fd().ok().flatten();
        for obj in req.objects() {
            let id = obj.id.clone();
            let Some(rel) = Self::safe_rel(&obj.path) else {
                out.push(ObjectPlan::with(id, PlanAction::Failed, format!("unsafe path {:?}", obj.path)));
                continue;
            };
            let file = self.root.join(&rel);
            let entry = match self.current(tree.as_ref(), &rel, MAX_READ.max(obj.yaml.len() as u64)) {
                Ok(Found::Ours(cur)) if cur == obj.yaml.as_slice() => ObjectPlan::with(id, PlanAction::Unchanged, ""),
                Ok(Found::Foreign(why)) => ObjectPlan::with(id, PlanAction::Update, format!("{why} is there: replaced by the bundle's file")),
                Ok(Found::TooLarge) => ObjectPlan::with(id, PlanAction::Update, format!("a file larger than {MAX_READ} bytes is there: replaced")),
                Ok(Found::Ours(cur)) => {
                    let parse = |b: &[u8]| drover_proto::bundle::parse_single_object(b).ok();
                    let diff = match (parse(&cur), parse(&obj.yaml)) {
                        (Some(b), Some(a)) => crate::diff::diff(&b, &a),
                        (b, a) => {
                            // A file that does not parse is shown whole, unless it is to
                            // become a Secret (it may hold the old values).
                            let raw = if a.as_ref().is_some_and(redact::holds_secret) { redact::REDACTED.into() } else { String::from_utf8_lossy(&cur).into() };
                            let before = b.map(|v| redact::redact_object(&v)).or(Some(raw));
                            vec![crate::diff::FieldChange { path: String::new(), before, after: a.map(|v| redact::redact_object(&v)) }]
                        }
                    };
                    let message = if diff.is_empty() { "same fields, different bytes (formatting)".to_string() } else { String::new() };
                    ObjectPlan { object: id, action: PlanAction::Update, message, diff }
                }
                Ok(Found::Missing) => ObjectPlan::with(id, PlanAction::Create, ""),
                Err(e) => ObjectPlan::with(id, PlanAction::Failed, format!("{}: {e}", file.display())),
            };
            out.push(entry);
        }
        out
    }

    /// `plan`: per object, what prune would do.
    fn plan_prune_sync(&self, req: &PruneRequest) -> Vec<ObjectPlan> {
        let tree = self.tree_fd().ok().flatten();
        req.delete
            .iter()
            .map(|id| match self.prune_verdict(tree.as_ref(), id, &req.source) {
                Ok(_) => ObjectPlan::with(id.clone(), PlanAction::Prune, ""),
                Err((_, m)) if m == "already gone" => ObjectPlan::with(id.clone(), PlanAction::Unchanged, m),
                Err((Action::Failed, m)) => ObjectPlan::with(id.clone(), PlanAction::Failed, m),
                Err((_, m)) => ObjectPlan::with(id.clone(), PlanAction::PruneRefused, m),
            })
            .collect()
    }
}

/// Removes the now empty directories `parents` (deepest first) under `tree`.
fn remove_empty_parents(tree: &OwnedFd, parents: &[&str]) {
    for n in (1..=parents.len()).rev() {
        let Ok(dir) = fsat::open_path(tree.as_fd(), &parents[..n - 1]) else { return };
        if fsat::remove_empty_dir(dir.as_fd(), parents[n - 1]).is_err() {
            return;
        }
    }
}

impl Target for DirTarget {
    fn describe(&self) -> String {
        format!("dir:{}", self.root.display())
    }

    fn apply<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<ApplyReport, TargetError>> {
        Box::pin(async move { self.apply_sync(req) })
    }

    fn wait<'a>(&'a self, _req: &'a ApplyRequest, _timeout: Duration) -> BoxFuture<'a, HealthReport> {
        // Files are complete once renamed into place.
        Box::pin(async move { HealthReport::healthy() })
    }

    fn prune<'a>(&'a self, req: &'a PruneRequest) -> BoxFuture<'a, Result<PruneReport, TargetError>> {
        Box::pin(async move { self.prune_sync(req) })
    }

    fn plan_apply<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        Box::pin(async move { Ok(self.plan_apply_sync(req)) })
    }

    fn plan_prune<'a>(&'a self, req: &'a PruneRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        Box::pin(async move { Ok(self.plan_prune_sync(req)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_refused() {
        assert!(DirTarget::safe_rel("manifests/a/b.yaml").is_some());
        assert!(DirTarget::safe_rel("manifests/../x").is_none());
        assert!(DirTarget::safe_rel("/etc/passwd").is_none());
        assert!(DirTarget::safe_rel("other/x").is_none());
        assert!(DirTarget::safe_rel("manifests").is_none());
    }

    #[test]
    fn interrupted_swap_is_repaired() {
        use std::fs;
        let tmp = tempfile::tempdir().unwrap();
        // Crash after `manifests` -> `.drover-old`, before the stage was renamed in.
        fs::create_dir_all(tmp.path().join(OLD).join("a")).unwrap();
        fs::write(tmp.path().join(OLD).join("a/x.yaml"), "x").unwrap();
        fs::create_dir_all(tmp.path().join(STAGE).join(TREE)).unwrap();
        DirTarget::open(tmp.path()).unwrap();
        assert_eq!(fs::read_to_string(tmp.path().join("manifests/a/x.yaml")).unwrap(), "x");
        assert!(!tmp.path().join(OLD).exists() && !tmp.path().join(STAGE).exists());
    }
}
