//! The deterministic archive codec of the content layer: pack a file map into a
//! reproducible tar.gz, and unpack one in memory under strict limits.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use flate2::{read::GzDecoder, Compression, GzBuilder};

use crate::digest::sha256_digest;

/// Limits applied when unpacking untrusted content.
#[derive(Debug, Clone, Copy)]
pub struct UnpackLimits {
    /// Maximum total uncompressed bytes of all files.
    pub max_total_bytes: u64,
    /// Maximum number of tar entries.
    pub max_entries: usize,
    /// Maximum number of path components.
    pub max_depth: usize,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits { max_total_bytes: 256 * 1024 * 1024, max_entries: 100_000, max_depth: 8 }
    }
}

/// Why an archive was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArchiveError {
    /// The gzip or tar stream is malformed.
    #[error("archive is malformed: {0}")]
    Malformed(String),
    /// An entry is not a regular file or directory.
    #[error("archive entry {path:?} is a {kind}; only regular files are allowed")]
    ForbiddenEntry {
        /// Entry path.
        path: String,
        /// What it is (symlink, hard link, device, ...).
        kind: String,
    },
    /// An entry path is absolute, climbs with `..` or is not UTF-8.
    #[error("archive entry {path:?} has an unsafe path: {reason}")]
    UnsafePath {
        /// Entry path.
        path: String,
        /// Why it is unsafe.
        reason: String,
    },
    /// A limit was exceeded.
    #[error("archive exceeds the limit on {what} ({limit})")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// The limit's value.
        limit: u64,
    },
    /// The same path appears twice.
    #[error("archive entry {0:?} appears twice")]
    Duplicate(String),
}

/// A packed content layer.
#[derive(Debug, Clone)]
pub struct Packed {
    /// The tar.gz bytes.
    pub gz: Vec<u8>,
    /// Digest of the uncompressed tar (for `io.deis.oras.content.digest`).
    pub tar_digest: String,
}

/// Packs `files` (path → bytes) into a reproducible tar.gz: entries sorted by path,
/// mode 0644, mtime/uid/gid 0, no user names, gzip header without name or time, level 6.
pub fn pack(files: &BTreeMap<String, Vec<u8>>) -> Packed {
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(data.len() as u64);
        builder
            .append_data(&mut header, path, data.as_slice())
            .expect("writing a tar entry to memory cannot fail for a relative path");
    }
    let tar = builder.into_inner().expect("finishing an in-memory tar cannot fail");
    let tar_digest = sha256_digest(&tar);
    let mut enc = GzBuilder::new().mtime(0).write(Vec::with_capacity(tar.len() / 4), Compression::new(6));
    enc.write_all(&tar).expect("in-memory gzip");
    Packed { gz: enc.finish().expect("in-memory gzip"), tar_digest }
}

/// Unpacks a tar.gz in memory, refusing links, devices, absolute paths, `..`,
/// non-UTF-8 names, duplicates and anything over `limits`. Directories are skipped.
pub fn unpack(gz: &[u8], limits: &UnpackLimits) -> Result<BTreeMap<String, Vec<u8>>, ArchiveError> {
    let mut archive = tar::Archive::new(GzDecoder::new(gz));
    let mut out = BTreeMap::new();
    let mut total: u64 = 0;
    let entries = archive.entries().map_err(|e| ArchiveError::Malformed(e.to_string()))?;
    for (i, entry) in entries.enumerate() {
        if i >= limits.max_entries {
            return Err(ArchiveError::LimitExceeded { what: "entry count", limit: limits.max_entries as u64 });
        }
        let mut entry = entry.map_err(|e| ArchiveError::Malformed(e.to_string()))?;
        let raw = entry.path_bytes().into_owned();
        let path = String::from_utf8(raw)
            .map_err(|_| ArchiveError::UnsafePath { path: "<non-utf8>".into(), reason: "not UTF-8".into() })?;
        let kind = entry.header().entry_type();
        let kind_name = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => None,
            tar::EntryType::Directory => {
                check_path(&path, limits)?;
                continue;
            }
            tar::EntryType::Symlink => Some("symbolic link"),
            tar::EntryType::Link => Some("hard link"),
            tar::EntryType::Char => Some("character device"),
            tar::EntryType::Block => Some("block device"),
            tar::EntryType::Fifo => Some("fifo"),
            _ => Some("special entry"),
        };
        if let Some(k) = kind_name {
            return Err(ArchiveError::ForbiddenEntry { path, kind: k.into() });
        }
        let path = check_path(&path, limits)?;
        let remaining = limits.max_total_bytes - total;
        let mut data = Vec::new();
        (&mut entry)
            .take(remaining + 1)
            .read_to_end(&mut data)
            .map_err(|e| ArchiveError::Malformed(e.to_string()))?;
        total += data.len() as u64;
        if total > limits.max_total_bytes {
            return Err(ArchiveError::LimitExceeded { what: "total uncompressed bytes", limit: limits.max_total_bytes });
        }
        if out.insert(path.clone(), data).is_some() {
            return Err(ArchiveError::Duplicate(path));
        }
    }
    Ok(out)
}

/// Normalizes and checks one entry path; returns it without a leading `./` or trailing `/`.
fn check_path(path: &str, limits: &UnpackLimits) -> Result<String, ArchiveError> {
    let unsafe_path = |reason: &str| ArchiveError::UnsafePath { path: path.to_string(), reason: reason.into() };
    if path.starts_with('/') || path.starts_with('\\') {
        return Err(unsafe_path("absolute path"));
    }
    let trimmed = path.trim_start_matches("./").trim_end_matches('/');
    let mut depth = 0;
    for comp in trimmed.split('/') {
        match comp {
            ".." => return Err(unsafe_path("'..' component")),
            "" | "." => return Err(unsafe_path("empty or '.' component")),
            c if c.contains('\\') || c.contains('\0') => return Err(unsafe_path("backslash or NUL in name")),
            _ => depth += 1,
        }
    }
    if depth > limits.max_depth {
        return Err(ArchiveError::LimitExceeded { what: "path depth", limit: limits.max_depth as u64 });
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> BTreeMap<String, Vec<u8>> {
        let mut m = BTreeMap::new();
        m.insert("manifests/a/x.yaml".to_string(), b"a: 1\n".to_vec());
        m.insert("manifests/_cluster/y.yaml".to_string(), b"b: 2\n".to_vec());
        m
    }

    #[test]
    fn roundtrip_and_deterministic() {
        let p1 = pack(&files());
        let p2 = pack(&files());
        assert_eq!(p1.gz, p2.gz);
        assert_eq!(unpack(&p1.gz, &UnpackLimits::default()).unwrap(), files());
    }

    #[test]
    fn limits() {
        let p = pack(&files());
        let small = UnpackLimits { max_total_bytes: 6, ..Default::default() };
        assert!(matches!(unpack(&p.gz, &small), Err(ArchiveError::LimitExceeded { .. })));
        let few = UnpackLimits { max_entries: 1, ..Default::default() };
        assert!(matches!(unpack(&p.gz, &few), Err(ArchiveError::LimitExceeded { .. })));
        let shallow = UnpackLimits { max_depth: 2, ..Default::default() };
        assert!(matches!(unpack(&p.gz, &shallow), Err(ArchiveError::LimitExceeded { .. })));
    }

    fn raw_tar(name: &[u8], kind: tar::EntryType, link: Option<&str>) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_size(if kind == tar::EntryType::Regular { 2 } else { 0 });
        if let Some(l) = link {
            h.set_link_name(l).unwrap();
        }
        h.set_cksum();
        let data: &[u8] = if kind == tar::EntryType::Regular { b"x\n" } else { b"" };
        b.append(&h, data).unwrap();
        let tar = b.into_inner().unwrap();
        let mut e = GzBuilder::new().write(Vec::new(), Compression::new(6));
        e.write_all(&tar).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn hostile_entries() {
        let l = UnpackLimits::default();
        assert!(matches!(unpack(&raw_tar(b"../x.yaml", tar::EntryType::Regular, None), &l), Err(ArchiveError::UnsafePath { .. })));
        assert!(matches!(unpack(&raw_tar(b"/etc/x", tar::EntryType::Regular, None), &l), Err(ArchiveError::UnsafePath { .. })));
        assert!(matches!(unpack(&raw_tar(b"m/l", tar::EntryType::Symlink, Some("/etc")), &l), Err(ArchiveError::ForbiddenEntry { .. })));
        assert!(matches!(unpack(&raw_tar(b"m/h", tar::EntryType::Link, Some("m/x")), &l), Err(ArchiveError::ForbiddenEntry { .. })));
        assert!(matches!(unpack(&raw_tar(b"m/d", tar::EntryType::Char, None), &l), Err(ArchiveError::ForbiddenEntry { .. })));
        assert!(unpack(b"not gzip", &l).is_err());
    }
}
