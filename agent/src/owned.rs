//! Directories the agent owns — its state directory and the `dir:` target — by one rule:
//!
//! - created 0700 when missing;
//! - an existing one must belong to the agent's user and must not be writable by group or
//!   others (it is then made 0700);
//! - it must be reached only through directories nobody else can change, as ssh's
//!   StrictModes asks of a home directory: every directory on the way (links followed)
//!   belongs to root or the agent's user and is not writable by group or others unless
//!   sticky (as `/tmp`: an entry there can be renamed only by its owner, and the entry
//!   below is root's or the agent's); a symbolic link on the way belongs to root or the
//!   agent's user too. Whoever may write a directory on the way could swap what is below
//!   it for a link to a directory of their choosing, between two starts or while the agent
//!   runs.
//!
//! The directory itself is opened once without following a link ([`crate::fsat`]), and
//! everything in it is reached through that descriptor. A refusal names the path, its
//! owner and its mode, and says what to do.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::fsat;

/// Why a directory is not the agent's.
#[derive(Debug, thiserror::Error)]
pub enum OwnedError {
    /// The directory, or one on the way to it, breaks the rule.
    #[error("{path}: {message}")]
    Refused {
        /// The directory the agent was given.
        path: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path it failed on.
        path: String,
        /// The system's error.
        source: io::Error,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> OwnedError + '_ {
    move |source| OwnedError::Io { path: path.display().to_string(), source }
}

/// The agent's effective uid.
pub fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// True when a file of `uid` may be trusted by the agent: root's or its own.
pub fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == me()
}

/// Opens the directory `path` as the agent's `what` ("state directory", "target
/// directory"): created 0700 when missing, refused unless the rule of this module holds,
/// then made 0700. With `shared_parent`, the parent directory may be writable by others
/// (a volume's mount point only this pod sees, as a Kubernetes emptyDir: root-owned, 0777);
/// its owner is still checked, and so is everything else.
pub fn claim(path: &Path, what: &str, shared_parent: bool) -> Result<OwnedFd, OwnedError> {
    let abs = std::path::absolute(path).map_err(io_at(path))?;
    let refused = |message: String| OwnedError::Refused { path: path.display().to_string(), message };
    let shared = if shared_parent { abs.parent().map(Path::to_path_buf) } else { None };
    let check = |dir: &Path| way(dir, shared.as_deref()).map_err(|m| refused(format!("{m}; refusing it as the {what}")));
    if std::fs::symlink_metadata(&abs).is_err() {
        // Before anything is created: the existing part of the way must be safe.
        check(abs.ancestors().skip(1).find(|a| std::fs::symlink_metadata(a).is_ok()).unwrap_or(Path::new("/")))?;
        crate::private::create_dir_all(&abs).map_err(io_at(path))?;
    }
    if let Some(parent) = abs.parent() {
        check(parent)?;
    }
    let fd = fsat::open_root(&abs).map_err(|e| {
        let link = std::fs::symlink_metadata(&abs).is_ok_and(|m| m.file_type().is_symlink());
        match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) if link => refused(format!("is a symbolic link: give the {what} itself")),
            Some(libc::ENOTDIR) => refused("is not a directory".into()),
            _ => io_at(path)(e),
        }
    })?;
    own(fd.as_fd(), what).map_err(refused)?;
    Ok(fd)
}

/// Refuses an open directory unless the agent's user owns it and neither its group nor
/// others may write it; then makes it 0700.
pub fn own(fd: std::os::fd::BorrowedFd<'_>, what: &str) -> Result<(), String> {
    use rustix::fs::{self as rfs, Mode};
    let st = rfs::fstat(fd).map_err(|e| e.to_string())?;
    let me = me();
    let mode = st.st_mode & 0o7777;
    if st.st_uid != me || mode & 0o022 != 0 {
        let who = if st.st_uid != me { format!("it belongs to uid {}, not to the agent (uid {me})", st.st_uid) } else { "group or others may write it".to_string() };
        return Err(format!(
            "refusing a {what} owned by uid {} with mode {mode:o}: {who}, and whoever may write it can plant files or links the agent would trust. \
             Give a directory the agent's user owns with mode 0700 (chown {me} and chmod 0700), or a path that does not exist yet (the agent creates it 0700)",
            st.st_uid
        ));
    }
    if mode != crate::private::DIR_MODE {
        rfs::fchmod(fd, Mode::from_raw_mode(crate::private::DIR_MODE)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Checks `dir` and every directory above it (links on the way followed, after checking
/// who may re-point them). `shared` is a directory excused from the writability check.
fn way(dir: &Path, shared: Option<&Path>) -> Result<(), String> {
    let mut real = PathBuf::from("/");
    step(&real, shared)?;
    for comp in dir.components() {
        match comp {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                real.pop();
            }
            Component::Normal(name) => {
                let next = real.join(name);
                let md = std::fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?;
                if md.file_type().is_symlink() {
                    // The link is an entry of `real` (checked): its owner may re-point it.
                    if !trusted_owner(md.uid()) {
                        return Err(format!(
                            "{} is a symbolic link owned by uid {}: whoever owns a link on the way may point it at another directory",
                            next.display(),
                            md.uid()
                        ));
                    }
                    let target = std::fs::canonicalize(&next).map_err(|e| format!("{}: {e}", next.display()))?;
                    for a in target.ancestors().collect::<Vec<_>>().into_iter().rev() {
                        step(a, shared)?;
                    }
                    real = target;
                } else {
                    step(&next, shared)?;
                    real = next;
                }
            }
        }
    }
    Ok(())
}

/// One directory on the way: root's or the agent's, not writable by group or others
/// unless sticky (or excused as `shared`).
fn step(path: &Path, shared: Option<&Path>) -> Result<(), String> {
    let md = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (uid, mode) = (md.uid(), md.mode() & 0o7777);
    if !md.is_dir() {
        return Err(format!("{} is not a directory", path.display()));
    }
    if !trusted_owner(uid) {
        return Err(format!(
            "it is reached through {}, which belongs to uid {uid} (mode {mode:o}): whoever owns a directory on the way may replace what is below it \
             (with a link to a directory of their choosing). Use a path whose every directory belongs to root or to the agent's user (uid {})",
            path.display(),
            me()
        ));
    }
    let sticky = mode & 0o1000 != 0;
    if mode & 0o022 != 0 && !sticky && shared != Some(path) {
        return Err(format!(
            "it is reached through {} (uid {uid}, mode {mode:o}), which group or others may write and which is not sticky: \
             anyone who may write it can swap what is below it for a link. Use a path whose every directory is writable by its owner only (or sticky, as /tmp)",
            path.display()
        ));
    }
    Ok(())
}

/// Entries under the open directory `fd` (links not followed, directories entered) that
/// belong to neither root nor the agent: their paths (relative) and owners, the first few.
pub fn foreign_entries(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<Vec<(String, u32)>> {
    Ok(fsat::owners(fd)?.into_iter().filter(|(_, uid)| !trusted_owner(*uid)).take(5).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn sticky_and_private_ways_are_fine_writable_ones_are_not() {
        let tmp = tempfile::tempdir().unwrap();
        // A sticky world-writable directory (as /tmp) on the way is fine.
        let sticky = tmp.path().join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        mode(&sticky, 0o1777);
        claim(&sticky.join("a/b"), "state directory", false).unwrap();
        // A world-writable one without the sticky bit is not, unless excused as the parent.
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        mode(&open, 0o777);
        let e = claim(&open.join("state"), "state directory", false).unwrap_err().to_string();
        assert!(e.contains("not sticky") && e.contains("mode 777") && e.contains(&open.display().to_string()), "{e}");
        assert!(!open.join("state").exists(), "nothing created under it");
        claim(&open.join("state"), "state directory", true).unwrap();
        let e = claim(&open.join("state/deeper"), "state directory", true).unwrap_err().to_string();
        assert!(e.contains("not sticky"), "only the parent is excused: {e}");
        // A link on the way (the agent's own) is followed and its target checked.
        std::os::unix::fs::symlink(&open, tmp.path().join("link")).unwrap();
        let e = claim(&tmp.path().join("link/x"), "state directory", false).unwrap_err().to_string();
        assert!(e.contains("not sticky"), "{e}");
        // The directory itself must not be a link.
        std::os::unix::fs::symlink(sticky.join("a"), tmp.path().join("self")).unwrap();
        let e = claim(&tmp.path().join("self"), "state directory", false).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }
}
