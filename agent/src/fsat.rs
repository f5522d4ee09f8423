//! File access relative to an open directory — the `dir:` target's and the state
//! directory's ([`crate::owned`]) — never following a symbolic link (`openat` with
//! `O_NOFOLLOW`, `mkdirat`, `renameat`, `unlinkat`, via rustix): once the directory is
//! open, nothing that replaces one of its entries by a link (to `/dev/zero`, to a file
//! outside it) can make the agent read or write anywhere else, and a FIFO there cannot
//! block it (`O_NONBLOCK`). Reads are bounded; files are created new (`O_EXCL`), private
//! (0600).

use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};

/// Mode of every directory the target creates.
const DIR_MODE: u32 = 0o700;
/// Mode of every file the target creates.
const FILE_MODE: u32 = 0o600;

fn io(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// Opens the directory `path` itself (not through a link at its last component).
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    rfs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()).map_err(io)
}

/// Opens the subdirectory `name` of `dir` (a link there is an error, `ELOOP`/`ENOTDIR`).
pub fn open_dir(dir: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    rfs::openat(dir, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()).map_err(io)
}

/// Opens the directory at `comps` under `dir`, one component at a time.
pub fn open_path(dir: BorrowedFd<'_>, comps: &[&str]) -> io::Result<OwnedFd> {
    let mut cur = rfs::openat(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).map_err(io)?;
    for c in comps {
        cur = open_dir(cur.as_fd(), c)?;
    }
    Ok(cur)
}

/// Creates (0700, when missing) and opens the directories `comps` under `dir`.
pub fn ensure_path(dir: BorrowedFd<'_>, comps: &[&str]) -> io::Result<OwnedFd> {
    let mut cur = open_path(dir, &[])?;
    for c in comps {
        match rfs::mkdirat(cur.as_fd(), *c, Mode::from_raw_mode(DIR_MODE)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(io(e)),
        }
        cur = open_dir(cur.as_fd(), c)?;
    }
    Ok(cur)
}

/// Creates the directory `name` in `dir` (0700); an error when anything is there already.
pub fn mkdir_new(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    rfs::mkdirat(dir, name, Mode::from_raw_mode(DIR_MODE)).map_err(io)
}

/// What is at a name, as far as the target is concerned.
#[derive(Debug)]
pub enum Found {
    /// Nothing.
    Missing,
    /// A regular file of this user with one link, at most the asked size: its bytes.
    Ours(Vec<u8>),
    /// A regular file of this user with one link, larger than the asked size (not read).
    TooLarge,
    /// Anything the agent did not write: a symbolic link, a device, a FIFO, a directory,
    /// another user's file, or a file with more than one link (what it is, for messages).
    Foreign(String),
}

/// Why an entry is not one the agent wrote, from its status (`None`: it could be).
fn foreign(st: &rfs::Stat) -> Option<String> {
    foreign_unless(st, |uid| uid == rustix::process::geteuid().as_raw())
}

/// Why an entry is not a plain file of an owner `owner_ok` accepts (`None`: it is).
fn foreign_unless(st: &rfs::Stat, owner_ok: impl Fn(u32) -> bool) -> Option<String> {
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft != FileType::RegularFile {
        return Some(format!("a {}", kind(ft)));
    }
    if !owner_ok(st.st_uid) {
        return Some(format!("a file owned by uid {} (mode {:o})", st.st_uid, st.st_mode & 0o7777));
    }
    if st.st_nlink > 1 {
        return Some(format!("a file with {} hard links", st.st_nlink));
    }
    None
}

fn kind(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "special file",
    }
}

/// Reads `name` in `dir` when it is a file the agent could have written, at most `max`
/// bytes; never through a link, never blocking on a FIFO.
pub fn read(dir: BorrowedFd<'_>, name: &str, max: u64) -> io::Result<Found> {
    read_from(dir, name, max, |uid| uid == rustix::process::geteuid().as_raw())
}

/// [`read`] of a file whose owner `owner_ok` accepts (for the state directory: the
/// agent's user or root, who may run `drover-agent hold`).
pub fn read_from(dir: BorrowedFd<'_>, name: &str, max: u64, owner_ok: impl Fn(u32) -> bool) -> io::Result<Found> {
    let fd = match rfs::openat(dir, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(Found::Missing),
        Err(rustix::io::Errno::LOOP) => return Ok(Found::Foreign("a symbolic link".into())),
        Err(e) => return Err(io(e)),
    };
    let st = rfs::fstat(&fd).map_err(io)?;
    if let Some(why) = foreign_unless(&st, owner_ok) {
        return Ok(Found::Foreign(why));
    }
    if st.st_size as u64 > max {
        return Ok(Found::TooLarge);
    }
    let mut data = Vec::with_capacity(st.st_size as usize);
    std::fs::File::from(fd).take(max + 1).read_to_end(&mut data)?;
    if data.len() as u64 > max {
        return Ok(Found::TooLarge);
    }
    Ok(Found::Ours(data))
}

/// Reads the file at `comps` (directories, then the file name) under `dir`, as [`read`];
/// a link or non-directory on the way is [`Found::Foreign`].
pub fn read_path(dir: BorrowedFd<'_>, comps: &[&str], max: u64) -> io::Result<Found> {
    let Some((name, parents)) = comps.split_last() else { return Ok(Found::Missing) };
    match open_path(dir, parents) {
        Ok(d) => read(d.as_fd(), name, max),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Found::Missing),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => Ok(Found::Foreign("a path through a link".into())),
        Err(e) => Err(e),
    }
}

/// Writes a new file `name` in `dir` (0600); an error when anything is there already.
pub fn write_new(dir: BorrowedFd<'_>, name: &str, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let fd = rfs::openat(dir, name, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::from_raw_mode(FILE_MODE))
        .map_err(io)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(data)?;
    f.sync_all()
}

/// Hard-links `name` of `from` as `name` in `to` (the link itself, never what it points to).
pub fn link(from: BorrowedFd<'_>, to: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    rfs::linkat(from, name, to, name, AtFlags::empty()).map_err(io)
}

/// Renames `from` in `dir_from` to `to` in `dir_to`.
pub fn rename(dir_from: BorrowedFd<'_>, from: &str, dir_to: BorrowedFd<'_>, to: &str) -> io::Result<()> {
    rfs::renameat(dir_from, from, dir_to, to).map_err(io)
}

/// Removes `name` from `dir`: a file or link itself, or a directory with everything in
/// it (entered without following links). Missing: nothing to do.
pub fn remove_tree(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    match rfs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(rustix::io::Errno::ISDIR) | Err(rustix::io::Errno::PERM) => {}
        Err(e) => return Err(io(e)),
    }
    let sub = open_dir(dir, name)?;
    for (entry, _) in entries(sub.as_fd())? {
        remove_tree(sub.as_fd(), &entry)?;
    }
    rfs::unlinkat(dir, name, AtFlags::REMOVEDIR).map_err(io)
}

/// Removes the file `name` from `dir` (the entry itself).
pub fn remove_file(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    rfs::unlinkat(dir, name, AtFlags::empty()).map_err(io)
}

/// Removes the empty directory `name` from `dir`.
pub fn remove_empty_dir(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    rfs::unlinkat(dir, name, AtFlags::REMOVEDIR).map_err(io)
}

/// The entries of `dir` (names and types, without `.` and `..`).
fn entries(dir: BorrowedFd<'_>) -> io::Result<Vec<(String, FileType)>> {
    let mut out = Vec::new();
    for e in rfs::Dir::read_from(dir).map_err(io)? {
        let e = e.map_err(io)?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "." && name != ".." {
            out.push((name, e.file_type()));
        }
    }
    Ok(out)
}

/// One entry of a tree that is not a directory.
#[derive(Debug)]
pub struct Entry {
    /// Path components below the walked directory.
    pub comps: Vec<String>,
    /// Why the agent did not write it (`None`: a regular file of this user, one link).
    pub foreign: Option<String>,
}

/// Every entry under `dir` that is not a directory, directories entered without
/// following links; with `tighten`, directories are made 0700 and the agent's files 0600.
pub fn walk(dir: BorrowedFd<'_>, tighten: bool) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut todo: Vec<(OwnedFd, Vec<String>)> = vec![(open_path(dir, &[])?, Vec::new())];
    while let Some((fd, at)) = todo.pop() {
        if tighten {
            rfs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE)).map_err(io)?;
        }
        for (name, _) in entries(fd.as_fd())? {
            let st = rfs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(io)?;
            let mut comps = at.clone();
            comps.push(name.clone());
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                todo.push((open_dir(fd.as_fd(), &name)?, comps));
                continue;
            }
            let foreign = foreign(&st);
            if tighten && foreign.is_none() && st.st_mode & 0o7777 != FILE_MODE {
                let f = rfs::openat(&fd, name.as_str(), OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty()).map_err(io)?;
                rfs::fchmod(&f, Mode::from_raw_mode(FILE_MODE)).map_err(io)?;
            }
            out.push(Entry { comps, foreign });
        }
    }
    Ok(out)
}

/// Every entry under `dir` (directories entered without following links) with its
/// owner: relative path and uid.
pub fn owners(dir: BorrowedFd<'_>) -> io::Result<Vec<(String, u32)>> {
    let mut out = Vec::new();
    let mut todo: Vec<(OwnedFd, String)> = vec![(open_path(dir, &[])?, String::new())];
    while let Some((fd, at)) = todo.pop() {
        for (name, _) in entries(fd.as_fd())? {
            let st = rfs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(io)?;
            let rel = if at.is_empty() { name.clone() } else { format!("{at}/{name}") };
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                todo.push((open_dir(fd.as_fd(), &name)?, rel.clone()));
            }
            out.push((rel, st.st_uid));
        }
    }
    Ok(out)
}

/// What kind of entry `name` in `dir` is, and its owner (`None`: nothing is there).
pub fn entry(dir: BorrowedFd<'_>, name: &str) -> io::Result<Option<(FileType, u32)>> {
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some((FileType::from_raw_mode(st.st_mode), st.st_uid))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(io(e)),
    }
}
