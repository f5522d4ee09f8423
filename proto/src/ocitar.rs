//! OCI archives (`oci-archive:FILE`): a tar of an OCI image layout. Reading extracts
//! into a private temporary directory (with the same path checks as bundle content);
//! writing tars a layout deterministically (sorted, zeroed metadata).

use std::io::Read;
use std::path::Path;

use crate::archive::{self, Member, UnpackLimits};
use crate::error::StoreError;

fn io(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io { path: path.display().to_string(), message: e.to_string() }
}

/// Extracts an OCI archive into a new temporary directory. Links, devices, absolute
/// paths and `..` are refused; a truncated archive is an error; extension headers, names
/// and the entry count are bounded as in bundle layers ([`UnpackLimits::default`]).
pub fn extract(file: &Path) -> Result<tempfile::TempDir, StoreError> {
    let f = std::fs::File::open(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StoreError::NotFound(format!("OCI archive {}", file.display())),
        _ => io(file, e),
    })?;
    extract_from(std::io::BufReader::new(f), file)
}

/// [`extract`] from any reader; `file` names the archive in errors.
pub fn extract_from(reader: impl Read, file: &Path) -> Result<tempfile::TempDir, StoreError> {
    let tmp = tempfile::Builder::new().prefix("drover-archive-").tempdir().map_err(|e| io(file, e))?;
    let mut tarball = tar::Archive::new(reader);
    let bad = |m: String| StoreError::Malformed(format!("OCI archive {}: {m}", file.display()));
    for member in archive::members(&mut tarball, &UnpackLimits::default()).map_err(|e| bad(e.to_string()))? {
        let Member { path, mut entry } = member.map_err(|e| bad(e.to_string()))?;
        let path = String::from_utf8(path).map_err(|_| bad("non-UTF-8 entry name".into()))?;
        let rel = path.trim_start_matches("./").trim_end_matches('/');
        if rel.is_empty() {
            continue;
        }
        if path.starts_with('/') || rel.split('/').any(|c| c == ".." || c.is_empty()) {
            return Err(bad(format!("entry {path:?} has an unsafe path")));
        }
        let dest = tmp.path().join(rel);
        match entry.header().entry_type() {
            tar::EntryType::Directory => std::fs::create_dir_all(&dest).map_err(|e| io(&dest, e))?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
                }
                let mut out = std::fs::File::create(&dest).map_err(|e| io(&dest, e))?;
                let expected = entry.header().size().unwrap_or(0);
                let n = std::io::copy(&mut (&mut entry).take(expected), &mut out).map_err(|e| bad(format!("entry {path:?}: {e}")))?;
                if n != expected {
                    return Err(bad(format!("entry {path:?} is truncated ({n} of {expected} bytes)")));
                }
            }
            other => return Err(bad(format!("entry {path:?} is a {other:?}; only files and directories are allowed"))),
        }
    }
    Ok(tmp)
}

/// Writes the layout in `dir` as a deterministic tar to `file` (atomically).
pub fn write(dir: &Path, file: &Path) -> Result<(), StoreError> {
    let mut paths = Vec::new();
    collect(dir, dir, &mut paths)?;
    paths.sort();
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    let out = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
    let mut builder = tar::Builder::new(std::io::BufWriter::new(out));
    for (rel, is_dir) in &paths {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if *is_dir {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder.append_data(&mut header, format!("{rel}/"), std::io::empty()).map_err(|e| io(&tmp, e))?;
        } else {
            let src = dir.join(rel);
            let f = std::fs::File::open(&src).map_err(|e| io(&src, e))?;
            let len = f.metadata().map_err(|e| io(&src, e))?.len();
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_size(len);
            builder.append_data(&mut header, rel, f).map_err(|e| io(&tmp, e))?;
        }
    }
    let w = builder.into_inner().map_err(|e| io(&tmp, e))?;
    w.into_inner().map_err(|e| io(&tmp, e.error()))?.sync_all().map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, file).map_err(|e| io(file, e))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, bool)>) -> Result<(), StoreError> {
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
        if path.is_dir() {
            out.push((rel, true));
            collect(root, &path, out)?;
        } else {
            out.push((rel, false));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(name: &str, kind: tar::EntryType, size: u64) -> Vec<u8> {
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(kind);
        h.set_mode(0o755);
        h.set_size(size);
        h.set_cksum();
        h.as_bytes().to_vec()
    }

    #[test]
    fn extension_headers_over_the_limit_are_refused_before_they_are_read() {
        for (kind, what) in [(tar::EntryType::GNULongName, "GNU long name"), (tar::EntryType::XHeader, "PAX extended header")] {
            // Declares 1 GiB, holds nothing: the refusal comes from the declared size.
            let tar = block("././@LongLink", kind, 1 << 30);
            let e = extract_from(&tar[..], Path::new("hostile.tar")).unwrap_err().to_string();
            assert!(e.contains("hostile.tar") && e.contains(&format!("{what} of 1073741824 bytes, over the limit")), "{e}");
        }
    }

    #[test]
    fn the_entry_count_is_bounded() {
        let limit = UnpackLimits::default().max_entries;
        let tar: Vec<u8> = (0..=limit).flat_map(|_| block("a/", tar::EntryType::Directory, 0)).collect();
        let e = extract_from(&tar[..], Path::new("many.tar")).unwrap_err().to_string();
        assert!(e.contains("many.tar") && e.contains(&format!("entry count ({limit})")), "{e}");
    }
}
