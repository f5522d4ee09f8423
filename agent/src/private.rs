//! Private files: bundles carry Secrets, so everything the agent writes — the state
//! directory (sled's files included) and the `dir:` target's tree — is readable by the
//! agent's user only: directories 0700, files 0600, whatever umask the agent starts with.
//!
//! Three parts: [`restrict_umask`] (first thing in `main`) covers files that libraries
//! create (sled's snapshots and blobs); [`create_dir_all`] and [`write_file`] set the modes
//! explicitly where the agent creates directories and files itself; [`tighten`] repairs
//! a tree written by an older agent (or a directory an operator created) when it is opened.

use std::fs;
use std::io;
use std::path::Path;

/// Mode of every directory the agent writes.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the agent writes.
pub const FILE_MODE: u32 = 0o600;

/// Sets the process umask to 077: whatever a library creates is private too.
pub fn restrict_umask() {
    #[cfg(unix)]
    // SAFETY: umask only swaps the process's file mode creation mask.
    unsafe {
        libc::umask(0o077);
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// Creates `dir` and its missing parents with mode 0700, and sets `dir` itself to 0700.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, DIR_MODE);
    b.create(dir)?;
    set_mode(dir, DIR_MODE)
}

/// Sets the directory `dir` (not its contents) to 0700.
pub fn tighten_dir(dir: &Path) -> io::Result<()> {
    set_mode(dir, DIR_MODE)
}

/// Writes `data` to a new (or truncated) file with mode 0600.
pub fn write_file(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut o = fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, FILE_MODE);
    let mut f = o.open(path)?;
    f.write_all(data)?;
    drop(f);
    set_mode(path, FILE_MODE)
}

/// Sets every directory under `root` (itself included) to 0700 and every file to 0600.
/// Symbolic links are neither followed nor changed.
pub fn tighten(root: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut todo = vec![root.to_path_buf()];
        while let Some(p) = todo.pop() {
            let md = fs::symlink_metadata(&p)?;
            let want = if md.is_dir() {
                DIR_MODE
            } else if md.is_file() {
                FILE_MODE
            } else {
                continue;
            };
            if md.permissions().mode() & 0o7777 != want {
                set_mode(&p, want)?;
            }
            if md.is_dir() {
                for e in fs::read_dir(&p)? {
                    todo.push(e?.path());
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = root;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn modes_are_explicit_and_repaired() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("a/b");
        create_dir_all(&d).unwrap();
        assert_eq!((mode(&tmp.path().join("a")), mode(&d)), (DIR_MODE, DIR_MODE));
        write_file(&d.join("f"), b"x").unwrap();
        assert_eq!(mode(&d.join("f")), FILE_MODE);
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(d.join("f"), fs::Permissions::from_mode(0o644)).unwrap();
        tighten(&tmp.path().join("a")).unwrap();
        assert_eq!((mode(&d), mode(&d.join("f"))), (DIR_MODE, FILE_MODE));
    }
}
