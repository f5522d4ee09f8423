//! The state directory (`--state-dir`): the agent's database (`db/`, sled), its hold file
//! (`hold.json`), its report key (`report-key.pem`) and its local socket (`agent.sock`,
//! [`crate::local`]). It belongs to the agent by the rule of [`crate::owned`] (created
//! 0700, refused when another user made it or may write it or a directory on the way to
//! it), checked when the agent starts, together with every entry in it: nothing in it may
//! belong to another user. The files in it are opened relative to the directory, without
//! following links, non-blocking (a FIFO cannot stall the agent), regular files only, and
//! read with a bound ([`crate::fsat`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::fsat::{self, Found};
use crate::owned::{self, OwnedError};

/// The database directory inside a state directory.
pub const DB: &str = "db";

/// An open state directory.
#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl StateDir {
    /// The agent's start: opens (creating, private) the state directory `path`, refused
    /// unless it is the agent's ([`crate::owned`]) and holds nothing of another user, and
    /// unless its database (when there is one) is a directory. `shared_parent`: its
    /// parent is a volume's mount point that only this pod sees (`--shared-state-parent`).
    pub fn claim(path: &Path, shared_parent: bool) -> Result<StateDir, OwnedError> {
        let fd = owned::claim(path, "state directory", shared_parent)?;
        check_contents(path, &fd)?;
        Ok(StateDir { path: path.to_path_buf(), fd })
    }

    /// An existing state directory a command reads the database of (`plan`), by the rule
    /// the agent starts by: the directory root's or the agent's user's, nothing of another
    /// user in it, its database (when there is one) a directory. Nothing is created or
    /// changed.
    pub fn for_reading(path: &Path) -> Result<StateDir, OwnedError> {
        let io_err = |source| OwnedError::Io { path: path.display().to_string(), source };
        let dir = StateDir::existing(path).map_err(io_err)?;
        let (uid, _) = dir.owner_and_mode().map_err(io_err)?;
        if !owned::trusted_owner(uid) {
            return Err(OwnedError::Refused {
                path: path.display().to_string(),
                message: format!("it belongs to uid {uid}, not to the agent's user: another user's database is never read"),
            });
        }
        check_contents(path, &dir.fd)?;
        Ok(dir)
    }

    /// An existing state directory, opened for the command line (`hold`, `status`) or a
    /// file of the running agent: not created, not changed; the directory itself must not
    /// be a link.
    pub fn existing(path: &Path) -> io::Result<StateDir> {
        Ok(StateDir { path: path.to_path_buf(), fd: fsat::open_root(path)? })
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Reads the file `name`, at most `max` bytes, when it is a regular file of the
    /// agent's user or root with one link ([`Found::Foreign`] says what else it is).
    pub fn read(&self, name: &str, max: u64) -> io::Result<Found> {
        fsat::read_from(self.fd(), name, max, owned::trusted_owner)
    }

    /// Writes the new file `name` (0600); an error when anything is there already.
    pub fn create_new(&self, name: &str, data: &[u8]) -> io::Result<()> {
        fsat::write_new(self.fd(), name, data)
    }

    /// Replaces the file `name` with `data` at once: written to a new temporary file in
    /// the directory, then renamed over it.
    pub fn replace(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let tmp = format!(".{name}.{}", std::process::id());
        let _ = fsat::remove_file(self.fd(), &tmp);
        fsat::write_new(self.fd(), &tmp, data)?;
        fsat::rename(self.fd(), &tmp, self.fd(), name).inspect_err(|_| {
            let _ = fsat::remove_file(self.fd(), &tmp);
        })
    }

    /// Removes the entry `name` itself (never what a link points to); false when there
    /// was none.
    pub fn remove(&self, name: &str) -> io::Result<bool> {
        match fsat::remove_file(self.fd(), name) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A path to `name` in this very directory, however long its own path is and whatever
    /// happens to that path: through `/proc/self/fd` (Linux), else the path it was opened
    /// at. For what needs a path (binding or connecting a Unix socket: at most 107 bytes).
    pub fn at(&self, name: &str) -> PathBuf {
        let via = PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()));
        if via.is_dir() {
            via.join(name)
        } else {
            self.path.join(name)
        }
    }

    /// The uid that owns the directory and its mode bits.
    pub fn owner_and_mode(&self) -> io::Result<(u32, u32)> {
        let st = rustix::fs::fstat(self.fd()).map_err(|e| io::Error::from_raw_os_error(e.raw_os_error()))?;
        Ok((st.st_uid, st.st_mode & 0o7777))
    }
}

/// Nothing in the state directory `fd` (at `path`) belongs to another user, and its
/// database, when there is one, is a directory.
fn check_contents(path: &Path, fd: &OwnedFd) -> Result<(), OwnedError> {
    let refused = |message: String| OwnedError::Refused { path: path.display().to_string(), message };
    let io_err = |source| OwnedError::Io { path: path.display().to_string(), source };
    let foreign = owned::foreign_entries(fd.as_fd()).map_err(io_err)?;
    if let Some((first, uid)) = foreign.first() {
        return Err(refused(format!(
            "{first} in it belongs to uid {uid}, not to the agent: another user's files (a database, a report key) are never used. \
             Move the state directory aside and start again (the agent makes a new one)"
        )));
    }
    if let Some((kind, _)) = fsat::entry(fd.as_fd(), DB).map_err(io_err)? {
        if kind != rustix::fs::FileType::Directory {
            return Err(refused(format!("{DB} in it is not a directory (a link or a file): move it aside")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_inside_are_read_bounded_without_links_or_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::claim(&tmp.path().join("state"), false).unwrap();
        dir.replace("hold.json", b"{}").unwrap();
        assert!(matches!(dir.read("hold.json", 64).unwrap(), Found::Ours(d) if d == b"{}"));
        assert!(matches!(dir.read("hold.json", 1).unwrap(), Found::TooLarge));
        dir.remove("hold.json").unwrap();
        std::os::unix::fs::symlink("/dev/zero", tmp.path().join("state/hold.json")).unwrap();
        assert!(matches!(dir.read("hold.json", 64).unwrap(), Found::Foreign(w) if w.contains("symbolic link")));
        dir.remove("hold.json").unwrap();
        assert!(std::process::Command::new("mkfifo").arg(tmp.path().join("state/hold.json")).status().unwrap().success());
        assert!(matches!(dir.read("hold.json", 64).unwrap(), Found::Foreign(w) if w.contains("FIFO")));
        assert!(!dir.remove("nothing").unwrap());
    }
}
