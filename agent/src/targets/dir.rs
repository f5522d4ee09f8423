//! The `dir:PATH` target: keeps `PATH/manifests/` equal to the applied bundle's tree, for
//! non-Kubernetes consumers and for trying drover without a cluster.
//!
//! Apply builds the complete new tree in `PATH/.drover-stage/manifests` (new files written,
//! files of the current tree the bundle lacks hard-linked so that only prune removes them),
//! then swaps it in with two renames (`manifests` → `.drover-old`, stage → `manifests`).
//! A crash between the renames is repaired when the target is opened again. Nothing is
//! ever written outside PATH: every path is checked to be a plain relative `manifests/...`.
//! Bundles carry Secrets: the tree is private (directories 0700, files 0600, see
//! [`crate::private`]), and so is PATH when the target creates it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use drover_proto::media;
use drover_proto::object::ObjectRef;
use drover_proto::text::redact;

use crate::private;

use super::{
    Action, ApplyReport, ApplyRequest, BoxFuture, HealthReport, ObjectOutcome, ObjectPlan, PlanAction, PruneReport, PruneRequest, Target,
    TargetError,
};

const TREE: &str = "manifests";
const STAGE: &str = ".drover-stage";
const OLD: &str = ".drover-old";

/// The directory target.
#[derive(Debug, Clone)]
pub struct DirTarget {
    root: PathBuf,
}

fn io_err(path: &Path, e: io::Error) -> TargetError {
    TargetError::Io { path: path.display().to_string(), message: e.to_string() }
}

impl DirTarget {
    /// Opens (creating, private) the directory, repairs an interrupted swap and makes a
    /// tree written by an older agent private.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, TargetError> {
        let root = root.into();
        if !root.is_dir() {
            private::create_dir_all(&root).map_err(|e| io_err(&root, e))?;
        }
        let t = DirTarget { root };
        t.recover()?;
        let tree = t.tree();
        if tree.is_dir() {
            private::tighten(&tree).map_err(|e| io_err(&tree, e))?;
        }
        Ok(t)
    }

    /// The directory as it is, for reading only (`drover-agent plan`): nothing is
    /// created, repaired or tightened.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        DirTarget { root: root.into() }
    }

    fn tree(&self) -> PathBuf {
        self.root.join(TREE)
    }

    /// Finishes or undoes a swap interrupted by a crash, and drops a stale stage.
    fn recover(&self) -> Result<(), TargetError> {
        let tree = self.tree();
        let old = self.root.join(OLD);
        if !tree.exists() && old.exists() {
            fs::rename(&old, &tree).map_err(|e| io_err(&old, e))?;
        }
        for leftover in [old, self.root.join(STAGE)] {
            if leftover.exists() {
                fs::remove_dir_all(&leftover).map_err(|e| io_err(&leftover, e))?;
            }
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
        if !comps.clone().all(|c| matches!(c, Component::Normal(_))) || comps.next().is_none() {
            return None;
        }
        Some(p.to_path_buf())
    }

    fn apply_sync(&self, req: &ApplyRequest) -> Result<ApplyReport, TargetError> {
        self.recover()?;
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
            let action = match fs::read(self.root.join(&rel)) {
                Ok(cur) if cur == obj.yaml.as_slice() => Action::Unchanged,
                Ok(_) => Action::Configured,
                Err(_) => Action::Created,
            };
            outcomes.push(ObjectOutcome::new(obj.id.clone(), action));
            wanted.insert(rel, obj.yaml.as_slice());
        }
        if failed || outcomes.iter().all(|o| o.action == Action::Unchanged) {
            return Ok(ApplyReport { outcomes });
        }
        if let Err((path, e)) = self.stage_and_swap(&wanted) {
            let _ = fs::remove_dir_all(self.root.join(STAGE));
            let msg = format!("{}: {e}", path.display());
            for o in &mut outcomes {
                o.action = Action::Failed;
                o.message = msg.clone();
            }
        }
        Ok(ApplyReport { outcomes })
    }

    fn stage_and_swap(&self, wanted: &BTreeMap<PathBuf, &[u8]>) -> Result<(), (PathBuf, io::Error)> {
        let stage_root = self.root.join(STAGE);
        let ctx = |p: &Path| {
            let p = p.to_path_buf();
            move |e| (p, e)
        };
        if stage_root.exists() {
            fs::remove_dir_all(&stage_root).map_err(ctx(&stage_root))?;
        }
        private::create_dir_all(&stage_root.join(TREE)).map_err(ctx(&stage_root))?;
        // Keep the current files the bundle lacks: only prune removes them.
        let tree = self.tree();
        if tree.is_dir() {
            for file in walk(&tree).map_err(ctx(&tree))? {
                let rel = Path::new(TREE).join(file.strip_prefix(&tree).expect("under tree"));
                if wanted.contains_key(&rel) {
                    continue;
                }
                let dst = stage_root.join(&rel);
                if let Some(parent) = dst.parent() {
                    private::create_dir_all(parent).map_err(ctx(parent))?;
                }
                if fs::hard_link(&file, &dst).is_err() {
                    fs::copy(&file, &dst).map_err(ctx(&file))?;
                }
            }
        }
        for (rel, data) in wanted {
            let dst = stage_root.join(rel);
            if let Some(parent) = dst.parent() {
                private::create_dir_all(parent).map_err(ctx(parent))?;
            }
            private::write_file(&dst, data).map_err(ctx(&dst))?;
        }
        let old = self.root.join(OLD);
        if tree.exists() {
            fs::rename(&tree, &old).map_err(ctx(&tree))?;
        }
        fs::rename(stage_root.join(TREE), &tree).map_err(ctx(&tree))?;
        let _ = fs::remove_dir_all(&old);
        let _ = fs::remove_dir_all(&stage_root);
        Ok(())
    }

    fn prune_sync(&self, req: &PruneRequest) -> Result<PruneReport, TargetError> {
        self.recover()?;
        let mut outcomes = Vec::new();
        for id in &req.delete {
            outcomes.push(self.prune_one(id, &req.source));
        }
        Ok(PruneReport { outcomes })
    }

    /// The file prune may delete for `id`, or the outcome that says why not.
    fn prune_verdict(&self, id: &ObjectRef, source: &str) -> Result<PathBuf, (Action, String)> {
        let Some(rel) = Self::safe_rel(&id.bundle_path()) else {
            return Err((Action::Refused, "unsafe path".into()));
        };
        let file = self.root.join(&rel);
        let data = match fs::read(&file) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err((Action::Kept, "already gone".into()));
            }
            Err(e) => return Err((Action::Failed, format!("{}: {e}", file.display()))),
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
        Ok(file)
    }

    fn prune_one(&self, id: &ObjectRef, source: &str) -> ObjectOutcome {
        let file = match self.prune_verdict(id, source) {
            Ok(f) => f,
            Err((action, message)) => return ObjectOutcome::with(id.clone(), action, message),
        };
        match fs::remove_file(&file) {
            Ok(()) => {
                remove_empty_parents(&file, &self.tree());
                ObjectOutcome::new(id.clone(), Action::Deleted)
            }
            Err(e) => ObjectOutcome::with(id.clone(), Action::Failed, format!("{}: {e}", file.display())),
        }
    }
}

impl DirTarget {
    /// `plan`: per object, what apply would do to its file (an update with the changed
    /// fields of the parsed YAML; a file that does not parse is replaced as a whole).
    fn plan_apply_sync(&self, req: &ApplyRequest) -> Vec<ObjectPlan> {
        let mut out = Vec::new();
        for obj in req.objects() {
            let id = obj.id.clone();
            let Some(rel) = Self::safe_rel(&obj.path) else {
                out.push(ObjectPlan::with(id, PlanAction::Failed, format!("unsafe path {:?}", obj.path)));
                continue;
            };
            let file = self.root.join(&rel);
            let entry = match fs::read(&file) {
                Ok(cur) if cur == obj.yaml.as_slice() => ObjectPlan::with(id, PlanAction::Unchanged, ""),
                Ok(cur) => {
                    let parse = |b: &[u8]| drover_proto::bundle::parse_single_object(b).ok();
                    let diff = match (parse(&cur), parse(&obj.yaml)) {
                        (Some(b), Some(a)) => crate::diff::diff(&b, &a),
                        (b, a) => {
                            // A file that does not parse is shown whole, unless it is to
                            // become a Secret (it may hold the old values).
                            let raw = if a.as_ref().is_some_and(redact::is_secret) { redact::REDACTED.into() } else { String::from_utf8_lossy(&cur).into() };
                            let before = b.map(|v| redact::redact_object(&v)).or(Some(raw));
                            vec![crate::diff::FieldChange { path: String::new(), before, after: a.map(|v| redact::redact_object(&v)) }]
                        }
                    };
                    let message = if diff.is_empty() { "same fields, different bytes (formatting)".to_string() } else { String::new() };
                    ObjectPlan { object: id, action: PlanAction::Update, message, diff }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => ObjectPlan::with(id, PlanAction::Create, ""),
                Err(e) => ObjectPlan::with(id, PlanAction::Failed, format!("{}: {e}", file.display())),
            };
            out.push(entry);
        }
        out
    }

    /// `plan`: per object, what prune would do.
    fn plan_prune_sync(&self, req: &PruneRequest) -> Vec<ObjectPlan> {
        req.delete
            .iter()
            .map(|id| match self.prune_verdict(id, &req.source) {
                Ok(_) => ObjectPlan::with(id.clone(), PlanAction::Prune, ""),
                Err((_, m)) if m == "already gone" => ObjectPlan::with(id.clone(), PlanAction::Unchanged, m),
                Err((Action::Failed, m)) => ObjectPlan::with(id.clone(), PlanAction::Failed, m),
                Err((_, m)) => ObjectPlan::with(id.clone(), PlanAction::PruneRefused, m),
            })
            .collect()
    }
}

/// Every regular file under `dir` (no symlinks followed).
fn walk(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            if ft.is_dir() {
                todo.push(entry.path());
            } else if ft.is_file() {
                out.push(entry.path());
            }
        }
    }
    Ok(out)
}

fn remove_empty_parents(file: &Path, stop: &Path) {
    let mut cur = file.parent();
    while let Some(d) = cur {
        if d == stop || !d.starts_with(stop) || fs::remove_dir(d).is_err() {
            break;
        }
        cur = d.parent();
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
