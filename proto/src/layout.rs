//! OCI image layout directories (`oci-layout`, `index.json`, `blobs/sha256/...`):
//! read by ref name, write blobs and ref names atomically.

use std::path::{Path, PathBuf};

use crate::digest::{digest_hex, sha256_digest, verify_digest};
use crate::error::StoreError;
use crate::manifest::{Descriptor, Index};
use crate::media;

const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

/// An OCI image layout on disk.
#[derive(Debug, Clone)]
pub struct Layout {
    dir: PathBuf,
}

fn io(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io { path: path.display().to_string(), message: e.to_string() }
}

/// Writes `data` to `path` via a temporary file and rename (no torn files).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, data).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))
}

impl Layout {
    /// Opens an existing layout; it must have an `oci-layout` file.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let marker = dir.join("oci-layout");
        if !marker.is_file() {
            return Err(StoreError::NotFound(format!("OCI layout {} (no oci-layout file)", dir.display())));
        }
        Ok(Layout { dir: dir.to_path_buf() })
    }

    /// Opens a layout, creating an empty one when the directory has none.
    pub fn create(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir.join("blobs/sha256")).map_err(|e| io(dir, e))?;
        if !dir.join("oci-layout").is_file() {
            write_atomic(&dir.join("oci-layout"), OCI_LAYOUT)?;
        }
        if !dir.join("index.json").is_file() {
            write_atomic(&dir.join("index.json"), &serde_json::to_vec(&Index::default()).expect("index"))?;
        }
        Ok(Layout { dir: dir.to_path_buf() })
    }

    /// The layout directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads `index.json`.
    pub fn index(&self) -> Result<Index, StoreError> {
        let p = self.dir.join("index.json");
        let data = std::fs::read(&p).map_err(|e| io(&p, e))?;
        serde_json::from_slice(&data).map_err(|e| StoreError::Malformed(format!("{} is not an OCI index: {e}", p.display())))
    }

    fn write_index(&self, index: &mut Index) -> Result<(), StoreError> {
        index.manifests.sort_by(|a, b| {
            let ra = a.annotations.get(media::ANN_REF_NAME);
            let rb = b.annotations.get(media::ANN_REF_NAME);
            ra.cmp(&rb).then_with(|| a.digest.cmp(&b.digest))
        });
        write_atomic(&self.dir.join("index.json"), &serde_json::to_vec(index).expect("index"))
    }

    /// Finds the manifest descriptor with ref name `name`.
    pub fn resolve(&self, name: &str) -> Result<Option<Descriptor>, StoreError> {
        Ok(self.index()?.manifests.into_iter().find(|d| d.annotations.get(media::ANN_REF_NAME).map(String::as_str) == Some(name)))
    }

    fn blob_path(&self, digest: &str) -> Result<PathBuf, StoreError> {
        let hex = digest_hex(digest).ok_or_else(|| StoreError::Malformed(format!("invalid digest {digest:?}")))?;
        Ok(self.dir.join("blobs/sha256").join(hex))
    }

    /// True when the blob exists.
    pub fn has_blob(&self, digest: &str) -> bool {
        self.blob_path(digest).map(|p| p.is_file()).unwrap_or(false)
    }

    /// Reads a blob, refusing more than `max` bytes, and checks its digest.
    pub fn read_blob(&self, digest: &str, max: u64) -> Result<Vec<u8>, StoreError> {
        let p = self.blob_path(digest)?;
        let meta = std::fs::metadata(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => StoreError::NotFound(format!("blob {digest} in layout {}", self.dir.display())),
            _ => io(&p, e),
        })?;
        if meta.len() > max {
            return Err(StoreError::TooLarge { what: format!("blob {digest}"), size: meta.len(), limit: max });
        }
        let data = std::fs::read(&p).map_err(|e| io(&p, e))?;
        verify_digest(&data, digest).map_err(|actual| StoreError::DigestMismatch {
            what: format!("blob {} in layout {}", digest, self.dir.display()),
            expected: digest.to_string(),
            actual,
        })?;
        Ok(data)
    }

    /// Writes a blob (atomically, skipped when present). Returns its digest.
    pub fn write_blob(&self, data: &[u8]) -> Result<String, StoreError> {
        let digest = sha256_digest(data);
        let p = self.blob_path(&digest)?;
        if !p.is_file() {
            write_atomic(&p, data)?;
        }
        Ok(digest)
    }

    /// Points ref name `name` at `desc` (replacing an entry with the same name);
    /// with `name` `None`, records `desc` without a name unless already present.
    pub fn set_ref(&self, name: Option<&str>, mut desc: Descriptor) -> Result<(), StoreError> {
        let mut index = self.index()?;
        match name {
            Some(n) => {
                index.manifests.retain(|d| d.annotations.get(media::ANN_REF_NAME).map(String::as_str) != Some(n));
                desc.annotations.insert(media::ANN_REF_NAME.into(), n.into());
            }
            None => {
                if index.manifests.iter().any(|d| d.digest == desc.digest) {
                    return Ok(());
                }
            }
        }
        index.manifests.push(desc);
        self.write_index(&mut index)
    }
}
