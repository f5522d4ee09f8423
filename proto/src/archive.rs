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
    /// Maximum number of tar entries (extension headers included).
    pub max_entries: usize,
    /// Maximum number of path components.
    pub max_depth: usize,
    /// Maximum length of an entry name in bytes (a GNU long name or a PAX `path` too).
    pub max_name_bytes: usize,
    /// Maximum size of one PAX extended header.
    pub max_header_bytes: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_total_bytes: 256 * 1024 * 1024,
            max_entries: 100_000,
            max_depth: 8,
            max_name_bytes: 4096,
            max_header_bytes: 64 * 1024,
        }
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
    /// A GNU long-name/long-link or PAX extended header is over its limit (refused
    /// before it is read).
    #[error("archive has a {what} of {size} bytes, over the limit of {limit} bytes")]
    HeaderTooLarge {
        /// Which header.
        what: &'static str,
        /// Its declared size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The same path appears twice.
    #[error("archive entry {0:?} appears twice")]
    Duplicate(String),
}

/// Tars at least this large are hashed on a second thread while they are compressed.
const PARALLEL_HASH_FROM: usize = 1 << 20;

/// The gzip level of the content layer.
const LEVEL: u32 = 6;

/// Tars larger than this are compressed in independent [`SEGMENT`]-sized deflate segments
/// on every core (layer encoding 2, docs/bundle.md); up to it, in one stream exactly as
/// drover always has, so the digests of bundles up to this size never changed.
pub const SEGMENTED_FROM: usize = 4 << 20;

/// Uncompressed bytes per deflate segment of a segmented layer. Part of the format: a
/// different size gives different bytes.
pub const SEGMENT: usize = 1 << 20;

/// A packed content layer.
#[derive(Debug, Clone)]
pub struct Packed {
    /// The tar.gz bytes.
    pub gz: Vec<u8>,
    /// Digest of the uncompressed tar (for `io.deis.oras.content.digest`).
    pub tar_digest: String,
}

/// Packs `files` (path → bytes) into a reproducible tar.gz: entries sorted by path,
/// mode 0644, mtime/uid/gid 0, no user names, compressed by [`gzip`].
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
    // The tar's digest is computed on a second thread while the main one compresses (the
    // bytes are the same either way; a large layer's hash no longer adds to the gzip time).
    std::thread::scope(|s| {
        let digest = (tar.len() > PARALLEL_HASH_FROM).then(|| s.spawn(|| sha256_digest(&tar)));
        let gz = gzip(&tar);
        let tar_digest = match digest {
            Some(h) => h.join().expect("hashing thread"),
            None => sha256_digest(&tar),
        };
        Packed { gz, tar_digest }
    })
}

/// The deterministic gzip of a layer's tar: one deflate stream (miniz_oxide, level 6,
/// no name, mtime 0) up to [`SEGMENTED_FROM`] bytes; above it, the same header followed by
/// independent deflate segments of [`SEGMENT`] bytes each (every segment but the last ends
/// with a sync flush, so their concatenation is one valid deflate stream that any gzip
/// reader decodes), compressed on every core. The bytes depend only on the input, never
/// on the number of threads.
pub fn gzip(tar: &[u8]) -> Vec<u8> {
    gzip_on(tar, std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// [`gzip`] on `threads` threads.
fn gzip_on(tar: &[u8], threads: usize) -> Vec<u8> {
    if tar.len() <= SEGMENTED_FROM {
        let mut enc = GzBuilder::new().mtime(0).write(Vec::with_capacity(tar.len() / 4), Compression::new(LEVEL));
        enc.write_all(tar).expect("in-memory gzip");
        return enc.finish().expect("in-memory gzip");
    }
    let segments: Vec<&[u8]> = tar.chunks(SEGMENT).collect();
    let last = segments.len() - 1;
    let threads = threads.clamp(1, segments.len());
    let mut parts: Vec<Option<(Vec<u8>, crc32fast::Hasher)>> = (0..segments.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|k| {
                let segments = &segments;
                s.spawn(move || {
                    (k..segments.len()).step_by(threads).map(|i| (i, deflate_segment(segments[i], i == last))).collect::<Vec<_>>()
                })
            })
            .collect();
        for w in workers {
            for (i, part) in w.join().expect("gzip worker panicked") {
                parts[i] = Some(part);
            }
        }
    });
    // The header flate2's GzBuilder writes for level 6 without name or time: no flags,
    // mtime 0, XFL 0, OS 255 (unknown).
    let mut gz = Vec::with_capacity(tar.len() / 4);
    gz.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
    let mut crc = crc32fast::Hasher::new();
    for (deflated, segment_crc) in parts.into_iter().map(|p| p.expect("every segment compressed")) {
        gz.extend_from_slice(&deflated);
        crc.combine(&segment_crc);
    }
    gz.extend_from_slice(&crc.finalize().to_le_bytes());
    gz.extend_from_slice(&(tar.len() as u32).to_le_bytes());
    gz
}

/// One raw deflate segment (level 6) and the CRC-32 of its input; `last` ends the stream,
/// any other segment ends with a sync flush (byte-aligned, not final).
fn deflate_segment(input: &[u8], last: bool) -> (Vec<u8>, crc32fast::Hasher) {
    use flate2::{Compress, FlushCompress, Status};
    let mut crc = crc32fast::Hasher::new();
    crc.update(input);
    let mut c = Compress::new(Compression::new(LEVEL), false);
    let mut out = Vec::with_capacity(input.len() / 2 + 1024);
    let flush = if last { FlushCompress::Finish } else { FlushCompress::Sync };
    loop {
        let consumed = c.total_in() as usize;
        let status = c.compress_vec(&input[consumed..], &mut out, flush).expect("in-memory deflate");
        let done = c.total_in() as usize == input.len() && out.len() < out.capacity();
        if status == Status::StreamEnd || (!last && done) {
            return (out, crc);
        }
        out.reserve(64 * 1024);
    }
}

/// Unpacks a tar.gz in memory, refusing links, devices, absolute paths, `..`,
/// non-UTF-8 names, duplicates and anything over `limits`. Directories are skipped.
pub fn unpack(gz: &[u8], limits: &UnpackLimits) -> Result<BTreeMap<String, Vec<u8>>, ArchiveError> {
    let mut archive = tar::Archive::new(GzDecoder::new(gz));
    let mut out = BTreeMap::new();
    let mut total: u64 = 0;
    for member in members(&mut archive, limits)? {
        let Member { path, mut entry } = member?;
        let path = String::from_utf8(path)
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
        // Sized from the header (capped by the limit): grown by doubling, many small
        // files took up to twice their bytes.
        let size = entry.header().size().unwrap_or(0).min(remaining + 1);
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
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

/// One member of a tar stream, its extension headers applied: what [`members`] yields.
pub(crate) struct Member<'a, R: Read> {
    /// The name: a GNU long name, else a PAX `path`, else the header's (as the tar crate
    /// and GNU tar read them).
    pub path: Vec<u8>,
    /// The member's header and data.
    pub entry: tar::Entry<'a, R>,
}

/// Iterates the members of a tar stream with GNU long-name/long-link and PAX extended
/// headers read here, each size checked against `limits` BEFORE it is read (the tar crate
/// reads them whole into memory, however large). Also enforces the entry count (extension
/// headers included) and the name length, and refuses a PAX `size` that disagrees with
/// the header and PAX sparse files. The one tar reader for untrusted archives (bundle
/// layers, OCI archives).
pub(crate) fn members<'a, R: Read>(
    archive: &'a mut tar::Archive<R>,
    limits: &UnpackLimits,
) -> Result<impl Iterator<Item = Result<Member<'a, R>, ArchiveError>>, ArchiveError> {
    let entries = archive.entries().map_err(|e| ArchiveError::Malformed(e.to_string()))?.raw(true);
    Ok(Members { entries, limits: *limits, count: 0 })
}

struct Members<'a, R: Read> {
    entries: tar::Entries<'a, R>,
    limits: UnpackLimits,
    count: usize,
}

/// Extension headers seen before the member they describe.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: bool,
    pax: Option<Vec<u8>>,
}

impl<'a, R: Read> Iterator for Members<'a, R> {
    type Item = Result<Member<'a, R>, ArchiveError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut pending = Pending::default();
        loop {
            let entry = match self.entries.next() {
                None if pending.long_name.is_some() || pending.long_link || pending.pax.is_some() => {
                    return Some(Err(malformed("an extension header (GNU long name/link or PAX) describes no entry")))
                }
                None => return None,
                Some(Err(e)) => return Some(Err(ArchiveError::Malformed(e.to_string()))),
                Some(Ok(e)) => e,
            };
            self.count += 1;
            if self.count > self.limits.max_entries {
                return Some(Err(ArchiveError::LimitExceeded { what: "entry count", limit: self.limits.max_entries as u64 }));
            }
            match self.extension(entry, &mut pending) {
                Ok(None) => continue,
                Ok(Some(member)) => return Some(Ok(member)),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl<'a, R: Read> Members<'a, R> {
    /// Reads `entry` into `pending` when it is an extension header (`None`), else applies
    /// `pending` to it and returns it.
    fn extension(&self, mut entry: tar::Entry<'a, R>, pending: &mut Pending) -> Result<Option<Member<'a, R>>, ArchiveError> {
        let kind = entry.header().entry_type();
        let name_limit = self.limits.max_name_bytes as u64 + 1; // + the trailing NUL
        let (what, limit, already) = if kind.is_gnu_longname() {
            ("GNU long name", name_limit, pending.long_name.is_some())
        } else if kind.is_gnu_longlink() {
            ("GNU long link", name_limit, pending.long_link)
        } else if kind.is_pax_local_extensions() {
            ("PAX extended header", self.limits.max_header_bytes, pending.pax.is_some())
        } else {
            return self.apply(entry, pending).map(Some);
        };
        if already {
            return Err(malformed(&format!("two {what} headers describe one entry")));
        }
        let size = entry.header().entry_size().map_err(|e| ArchiveError::Malformed(e.to_string()))?;
        if size > limit {
            return Err(ArchiveError::HeaderTooLarge { what, size, limit });
        }
        let mut data = Vec::with_capacity(size as usize);
        (&mut entry).take(size).read_to_end(&mut data).map_err(|e| ArchiveError::Malformed(e.to_string()))?;
        if data.len() as u64 != size {
            return Err(malformed(&format!("the {what} is truncated")));
        }
        if kind.is_gnu_longname() {
            if data.last() == Some(&0) {
                data.pop();
            }
            pending.long_name = Some(data);
        } else if kind.is_gnu_longlink() {
            pending.long_link = true;
        } else {
            pending.pax = Some(data);
        }
        Ok(None)
    }

    /// Applies the pending extension headers to a member: its name, and checks on PAX records.
    fn apply(&self, entry: tar::Entry<'a, R>, pending: &mut Pending) -> Result<Member<'a, R>, ArchiveError> {
        let mut pax_path = None;
        if let Some(pax) = &pending.pax {
            for record in tar::PaxExtensions::new(pax) {
                let record = record.map_err(|e| malformed(&format!("PAX extended header: {e}")))?;
                match record.key_bytes() {
                    b"path" => pax_path = Some(record.value_bytes().to_vec()),
                    b"size" => {
                        let header = entry.header().entry_size().map_err(|e| ArchiveError::Malformed(e.to_string()))?;
                        if record.value().ok().and_then(|v| v.parse::<u64>().ok()) != Some(header) {
                            return Err(malformed("a PAX size record disagrees with the entry's header size"));
                        }
                    }
                    k if k.starts_with(b"GNU.sparse.") => return Err(malformed("PAX sparse files are not supported")),
                    _ => {}
                }
            }
        }
        let path = match (pending.long_name.take(), pax_path) {
            (Some(long), _) => long,
            (None, Some(pax)) => pax,
            (None, None) => entry.path_bytes().into_owned(),
        };
        if path.len() > self.limits.max_name_bytes {
            return Err(ArchiveError::LimitExceeded { what: "name length", limit: self.limits.max_name_bytes as u64 });
        }
        Ok(Member { path, entry })
    }
}

fn malformed(m: &str) -> ArchiveError {
    ArchiveError::Malformed(m.to_string())
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

    /// Incompressible-ish text (a hash chain in hex) of `n` bytes.
    fn text(n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 64);
        let mut h = sha256_digest(b"seed");
        while out.len() < n {
            h = sha256_digest(h.as_bytes());
            out.extend_from_slice(h.as_bytes());
            out.push(b'\n');
        }
        out.truncate(n);
        out
    }

    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        GzDecoder::new(gz).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn up_to_the_segmented_size_the_layer_is_one_stream_as_before() {
        let tar = text(SEGMENTED_FROM);
        let mut enc = GzBuilder::new().mtime(0).write(Vec::new(), Compression::new(6));
        enc.write_all(&tar).unwrap();
        assert_eq!(gzip_on(&tar, 2), enc.finish().unwrap());
    }

    #[test]
    fn a_segmented_layer_is_one_gzip_member_the_same_on_any_number_of_threads() {
        for n in [SEGMENTED_FROM + 1, 5 * SEGMENT + 12_345, 9 * SEGMENT] {
            let tar = text(n);
            let one = gzip_on(&tar, 1);
            assert_eq!(one, gzip_on(&tar, 2), "{n} bytes");
            assert_eq!(one, gzip_on(&tar, 7), "{n} bytes");
            assert_eq!(gunzip(&one), tar, "{n} bytes");
            // one member: a multi-member reader and a single-member reader agree
            let mut single = Vec::new();
            flate2::read::GzDecoder::new(&one[..]).read_to_end(&mut single).unwrap();
            let mut multi = Vec::new();
            flate2::read::MultiGzDecoder::new(&one[..]).read_to_end(&mut multi).unwrap();
            assert_eq!(single, multi);
            assert!(one.len() < n, "{n} bytes compressed to {}", one.len());
        }
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

    /// A raw header block of `kind` named `name` declaring `size` bytes.
    fn block(name: &str, kind: tar::EntryType, size: u64) -> Vec<u8> {
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(size);
        h.set_cksum();
        h.as_bytes().to_vec()
    }

    /// `data` padded to whole blocks.
    fn padded(data: &[u8]) -> Vec<u8> {
        let mut v = data.to_vec();
        v.resize(data.len().div_ceil(512) * 512, 0);
        v
    }

    fn gz(parts: &[Vec<u8>]) -> Vec<u8> {
        let mut e = GzBuilder::new().write(Vec::new(), Compression::new(1));
        for p in parts {
            e.write_all(p).unwrap();
        }
        e.write_all(&[0; 1024]).unwrap();
        e.finish().unwrap()
    }

    fn file(name: &str, data: &[u8]) -> Vec<u8> {
        let mut v = block(name, tar::EntryType::Regular, data.len() as u64);
        v.extend(padded(data));
        v
    }

    fn pax(records: &[(&str, &str)]) -> Vec<u8> {
        let mut body = String::new();
        for (k, v) in records {
            let rest = format!(" {k}={v}\n");
            let mut len = rest.len() + 1;
            while format!("{len}{rest}").len() != len {
                len += 1;
            }
            body.push_str(&format!("{len}{rest}"));
        }
        let mut v = block("././@PaxHeader", tar::EntryType::XHeader, body.len() as u64);
        v.extend(padded(body.as_bytes()));
        v
    }

    #[test]
    fn extension_headers_are_checked_before_they_are_read() {
        let l = UnpackLimits::default();
        // Each declares 1 GiB but holds nothing: refused on the declared size, not read.
        for (kind, what) in [
            (tar::EntryType::GNULongName, "GNU long name"),
            (tar::EntryType::GNULongLink, "GNU long link"),
            (tar::EntryType::XHeader, "PAX extended header"),
        ] {
            let layer = gz(&[block("././@LongLink", kind, 1 << 30)]);
            let e = unpack(&layer, &l).unwrap_err();
            assert_eq!(e, ArchiveError::HeaderTooLarge { what, size: 1 << 30, limit: if what.starts_with("PAX") { 65536 } else { 4097 } });
            assert!(e.to_string().contains(what), "{e}");
        }
    }

    #[test]
    fn long_names_and_pax_paths_name_the_entry() {
        let l = UnpackLimits::default();
        let long = format!("manifests/{}.yaml", "n".repeat(200));
        let mut name = block("././@LongLink", tar::EntryType::GNULongName, long.len() as u64 + 1);
        name.extend(padded(format!("{long}\0").as_bytes()));
        let got = unpack(&gz(&[name, file("manifests/short", b"x")]), &l).unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), [&long]);

        let got = unpack(&gz(&[pax(&[("path", &long), ("mtime", "1.5")]), file("manifests/short", b"x")]), &l).unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), [&long]);
        // A PAX path over the name limit.
        let huge = format!("manifests/{}", "n".repeat(5000));
        let e = unpack(&gz(&[pax(&[("path", &huge)]), file("manifests/short", b"x")]), &l).unwrap_err();
        assert_eq!(e, ArchiveError::LimitExceeded { what: "name length", limit: 4096 });
    }

    #[test]
    fn malformed_extension_headers_are_refused() {
        let l = UnpackLimits::default();
        let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
            (vec![pax(&[("size", "5")]), file("manifests/a", b"x")], "PAX size record disagrees"),
            (vec![pax(&[("GNU.sparse.major", "1")]), file("manifests/a", b"x")], "sparse"),
            (vec![pax(&[("path", "manifests/b")])], "describes no entry"),
            (vec![pax(&[("path", "a")]), pax(&[("path", "b")]), file("manifests/a", b"x")], "two PAX extended header headers"),
            (vec![[block("././@PaxHeader", tar::EntryType::XHeader, 10), padded(b"12 broken\n")].concat(), file("manifests/a", b"x")], "PAX extended header: malformed"),
        ];
        for (parts, expect) in cases {
            let e = unpack(&gz(&parts), &l).unwrap_err().to_string();
            assert!(e.contains(expect), "{e:?} lacks {expect:?}");
        }
    }

    #[test]
    fn extension_headers_count_as_entries() {
        let few = UnpackLimits { max_entries: 2, ..Default::default() };
        let layer = gz(&[pax(&[("mtime", "1")]), file("manifests/a", b"x"), file("manifests/b", b"y")]);
        assert_eq!(unpack(&layer, &few).unwrap_err(), ArchiveError::LimitExceeded { what: "entry count", limit: 2 });
        assert_eq!(unpack(&layer, &UnpackLimits { max_entries: 3, ..few }).unwrap().len(), 2);
    }
}
