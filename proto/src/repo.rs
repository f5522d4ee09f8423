//! One repository in any store — a registry repository, an OCI layout or an OCI
//! archive — with the bundle-level operations both programs use (push, fetch).

use std::sync::Arc;

use crate::bundle::Bundle;
use crate::config::BundleConfig;
use crate::digest::is_valid_digest;
use crate::error::StoreError;
use crate::layout::Layout;
use crate::manifest::{Descriptor, Manifest};
use crate::media;
use crate::reference::{Reference, RegistryRef};
use crate::registry::RegistryClient;

/// Size limits for fetching untrusted bundles (docs/design.md §5).
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    /// Maximum manifest size.
    pub manifest: u64,
    /// Maximum config blob size.
    pub config: u64,
    /// Maximum content layer size.
    pub layer: u64,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits { manifest: 4 << 20, config: 16 << 20, layer: 64 << 20 }
    }
}

/// A repository in a registry or on disk.
#[derive(Clone)]
pub enum Repo {
    /// A registry repository (`repo` has no tag or digest).
    Registry {
        /// The shared client.
        client: RegistryClient,
        /// The repository.
        repo: RegistryRef,
    },
    /// A repository inside an OCI layout: ref names are `prefix + tag`.
    Layout {
        /// The layout.
        layout: Layout,
        /// `""` for single-repository layouts, `"<repository>:"` in archives written by export.
        prefix: String,
        /// Keeps an extracted archive alive.
        _tmp: Option<Arc<tempfile::TempDir>>,
    },
}

impl Repo {
    /// The repository `repository` of the same layout (ref names `<repository>:<tag>`, as
    /// `drover export` writes them); a registry repository is itself.
    pub fn within(&self, repository: &str) -> Repo {
        match self {
            Repo::Layout { layout, _tmp, .. } => Repo::Layout { layout: layout.clone(), prefix: format!("{repository}:"), _tmp: _tmp.clone() },
            Repo::Registry { .. } => self.clone(),
        }
    }

    /// Opens the repository a reference points into; returns it with the tag or digest
    /// to look up (if any). Layouts are created when `create` is set.
    pub fn open(reference: &Reference, client: &RegistryClient, create: bool) -> Result<(Repo, Option<String>), StoreError> {
        match reference {
            Reference::Registry(r) => {
                let lookup = r.lookup().map(str::to_string);
                let repo = RegistryRef { tag: None, digest: None, ..r.clone() };
                Ok((Repo::Registry { client: client.clone(), repo }, lookup))
            }
            Reference::Layout { dir, name } => {
                let layout = if create { Layout::create(dir)? } else { Layout::open(dir)? };
                let (prefix, tag) = split_ref_name(name.as_deref());
                Ok((Repo::Layout { layout, prefix, _tmp: None }, tag))
            }
            Reference::Archive { file, name } => {
                if create {
                    return Err(StoreError::Malformed(format!(
                        "cannot write into oci-archive:{}; write an oci: layout or use `drover export`",
                        file.display()
                    )));
                }
                let tmp = crate::ocitar::extract(file)?;
                let layout = Layout::open(tmp.path())?;
                let (prefix, tag) = split_ref_name(name.as_deref());
                Ok((Repo::Layout { layout, prefix, _tmp: Some(Arc::new(tmp)) }, tag))
            }
        }
    }

    /// The repository path without host (registry) or the ref-name repository part (layout).
    pub fn repository_name(&self) -> String {
        match self {
            Repo::Registry { repo, .. } => repo.repository.clone(),
            Repo::Layout { prefix, .. } => prefix.trim_end_matches(':').to_string(),
        }
    }

    /// Human name of `lookup` in this repository, for messages.
    pub fn describe(&self, lookup: &str) -> String {
        match self {
            Repo::Registry { repo, .. } if is_valid_digest(lookup) => repo.with_digest(lookup).to_string(),
            Repo::Registry { repo, .. } => repo.with_tag(lookup).to_string(),
            Repo::Layout { layout, prefix, .. } if is_valid_digest(lookup) => match prefix.strip_suffix(':') {
                Some(repository) => format!("oci:{}:{repository}@{lookup}", layout.dir().display()),
                None => format!("oci:{}@{lookup}", layout.dir().display()),
            },
            Repo::Layout { layout, prefix, .. } => format!("oci:{}:{prefix}{lookup}", layout.dir().display()),
        }
    }

    /// The registry reference for `lookup`, when this is a registry repository.
    pub fn registry_ref(&self, lookup: &str) -> Option<RegistryRef> {
        match self {
            Repo::Registry { repo, .. } if is_valid_digest(lookup) => Some(repo.with_digest(lookup)),
            Repo::Registry { repo, .. } => Some(repo.with_tag(lookup)),
            _ => None,
        }
    }

    fn layout_desc(&self, layout: &Layout, prefix: &str, lookup: &str) -> Result<Option<Descriptor>, StoreError> {
        if is_valid_digest(lookup) {
            return Ok(layout.index()?.manifests.into_iter().find(|d| d.digest == lookup).or_else(|| {
                layout.has_blob(lookup).then(|| Descriptor {
                    media_type: media::OCI_MANIFEST.into(),
                    digest: lookup.into(),
                    size: 0,
                    artifact_type: None,
                    annotations: Default::default(),
                    data: None,
                })
            }));
        }
        layout.resolve(&format!("{prefix}{lookup}"))
    }

    /// Resolves a tag or digest to a manifest digest (`None`: not there). On a registry
    /// this is exactly one `HEAD` request.
    pub async fn resolve(&self, lookup: &str) -> Result<Option<String>, StoreError> {
        match self {
            Repo::Registry { client, .. } => client.head(&self.registry_ref(lookup).expect("registry")).await,
            Repo::Layout { layout, prefix, .. } => Ok(self.layout_desc(layout, prefix, lookup)?.map(|d| d.digest)),
        }
    }

    /// The tags of this repository (registry: the tag list; layout: the ref names under
    /// this repository's prefix).
    pub async fn tags(&self) -> Result<Vec<String>, StoreError> {
        match self {
            Repo::Registry { client, repo } => client.list_tags(repo).await,
            Repo::Layout { layout, prefix, .. } => Ok(layout
                .index()?
                .manifests
                .iter()
                .filter_map(|d| d.annotations.get(media::ANN_REF_NAME))
                .filter_map(|n| n.strip_prefix(prefix.as_str()))
                .filter(|t| !t.contains(':'))
                .map(str::to_string)
                .collect()),
        }
    }

    /// Fetches manifest bytes and digest by tag or digest (checked, at most `max` bytes).
    pub async fn manifest(&self, lookup: &str, max: u64) -> Result<(Vec<u8>, String), StoreError> {
        match self {
            Repo::Registry { client, .. } => client.manifest(&self.registry_ref(lookup).expect("registry"), max).await,
            Repo::Layout { layout, prefix, .. } => {
                let desc = self
                    .layout_desc(layout, prefix, lookup)?
                    .ok_or_else(|| StoreError::NotFound(format!("manifest {}", self.describe(lookup))))?;
                let data = layout.read_blob(&desc.digest, max)?;
                Ok((data, desc.digest))
            }
        }
    }

    /// Fetches a blob by digest (checked, at most `max` bytes).
    pub async fn blob(&self, digest: &str, max: u64) -> Result<Vec<u8>, StoreError> {
        match self {
            Repo::Registry { client, repo } => client.blob(repo, digest, max).await,
            Repo::Layout { layout, .. } => layout.read_blob(digest, max),
        }
    }

    /// True when the blob is present.
    pub async fn has_blob(&self, digest: &str) -> Result<bool, StoreError> {
        match self {
            Repo::Registry { client, repo } => client.blob_exists(repo, digest).await,
            Repo::Layout { layout, .. } => Ok(layout.has_blob(digest)),
        }
    }

    /// Stores a blob (skipped when present). Returns true when it was written.
    pub async fn put_blob(&self, digest: &str, data: Vec<u8>) -> Result<bool, StoreError> {
        match self {
            Repo::Registry { client, repo } => client.push_blob(repo, digest, data).await,
            Repo::Layout { layout, .. } => {
                let existed = layout.has_blob(digest);
                let written = layout.write_blob(&data)?;
                if written != digest {
                    return Err(StoreError::DigestMismatch { what: "blob to write".into(), expected: digest.into(), actual: written });
                }
                Ok(!existed)
            }
        }
    }

    /// Stores a blob that is new by construction without asking first whether it is
    /// present (on a registry: no `HEAD`, see [`RegistryClient::upload_blob`]).
    pub async fn put_new_blob(&self, digest: &str, data: Vec<u8>) -> Result<(), StoreError> {
        match self {
            Repo::Registry { client, repo } => client.upload_blob(repo, digest, data).await,
            Repo::Layout { .. } => self.put_blob(digest, data).await.map(|_| ()),
        }
    }

    /// Stores manifest bytes, tagged with `tag` when given. Returns the digest.
    pub async fn put_manifest(&self, bytes: Vec<u8>, media_type: &str, tag: Option<&str>) -> Result<String, StoreError> {
        match self {
            Repo::Registry { client, .. } => {
                let digest = crate::digest::sha256_digest(&bytes);
                let target = self.registry_ref(tag.unwrap_or(&digest)).expect("registry");
                client.push_manifest(&target, bytes, media_type).await
            }
            Repo::Layout { layout, prefix, .. } => {
                let artifact_type = serde_json::from_slice::<Manifest>(&bytes).ok().and_then(|m| m.artifact_type);
                let digest = layout.write_blob(&bytes)?;
                let mut desc = Descriptor::of(media_type, &bytes);
                desc.artifact_type = artifact_type;
                layout.set_ref(tag.map(|t| format!("{prefix}{t}")).as_deref(), desc)?;
                Ok(digest)
            }
        }
    }

    /// Pushes a bundle's blobs and manifest, then each tag in `tags` (the first push
    /// carries the manifest; further tags reuse it). Returns the digest.
    pub async fn push_bundle(&self, bundle: &Bundle, tags: &[&str]) -> Result<String, StoreError> {
        self.put_blob(&bundle.manifest_doc.config.digest, bundle.config.clone()).await?;
        self.put_blob(&bundle.manifest_doc.layers[0].digest, bundle.layer.clone()).await?;
        if tags.is_empty() {
            return self.put_manifest(bundle.manifest.clone(), media::OCI_MANIFEST, None).await;
        }
        for tag in tags {
            self.put_manifest(bundle.manifest.clone(), media::OCI_MANIFEST, Some(tag)).await?;
        }
        Ok(bundle.digest.clone())
    }

    /// Fetches a whole bundle by tag or digest: manifest, config and layer, every
    /// digest and size checked, the shape validated. Does NOT verify signatures.
    pub async fn fetch_bundle(&self, lookup: &str, limits: &FetchLimits) -> Result<FetchedBundle, StoreError> {
        let (manifest_bytes, digest) = self.manifest(lookup, limits.manifest).await?;
        let head = self.fetch_bundle_head(manifest_bytes, digest, limits).await?;
        self.fetch_layer(head, limits).await
    }

    /// Completes a bundle from [`Repo::fetch_bundle_head`] with its content layer (size
    /// from the descriptor checked against `limits.layer` before the download, streamed
    /// with that cap, digest and length checked).
    pub async fn fetch_layer(&self, head: FetchedBundle, limits: &FetchLimits) -> Result<FetchedBundle, StoreError> {
        let layer_desc = head.manifest.bundle_layer().map_err(StoreError::Malformed)?.clone();
        if layer_desc.size > limits.layer {
            return Err(StoreError::TooLarge { what: "content layer".into(), size: layer_desc.size, limit: limits.layer });
        }
        let layer = self.blob(&layer_desc.digest, limits.layer).await?;
        if layer.len() as u64 != layer_desc.size {
            return Err(StoreError::Malformed(format!(
                "content layer is {} bytes, its descriptor says {}",
                layer.len(),
                layer_desc.size
            )));
        }
        Ok(FetchedBundle { layer, ..head })
    }

    /// Like [`Repo::fetch_bundle`] from already fetched manifest bytes, without the layer
    /// (`layer` is left empty): enough to list what a bundle holds.
    pub async fn fetch_bundle_head(&self, manifest_bytes: Vec<u8>, digest: String, limits: &FetchLimits) -> Result<FetchedBundle, StoreError> {
        let manifest = Manifest::from_slice(&manifest_bytes).map_err(StoreError::Malformed)?;
        manifest.bundle_layer().map_err(|e| StoreError::Malformed(format!("{digest}: {e}")))?;
        if manifest.config.size > limits.config {
            return Err(StoreError::TooLarge { what: "bundle config".into(), size: manifest.config.size, limit: limits.config });
        }
        let config_bytes = self.blob(&manifest.config.digest, limits.config).await?;
        let config = BundleConfig::from_slice(&config_bytes).map_err(StoreError::Malformed)?;
        Ok(FetchedBundle { digest, manifest_bytes, manifest, config_bytes, config, layer: Vec::new() })
    }
}

/// A bundle fetched from a store, digests checked, signatures not yet verified.
#[derive(Debug, Clone)]
pub struct FetchedBundle {
    /// Manifest digest.
    pub digest: String,
    /// Manifest bytes.
    pub manifest_bytes: Vec<u8>,
    /// Parsed manifest.
    pub manifest: Manifest,
    /// Config bytes.
    pub config_bytes: Vec<u8>,
    /// Parsed config.
    pub config: BundleConfig,
    /// Content layer bytes (empty when only the head was fetched).
    pub layer: Vec<u8>,
}

/// Splits a layout ref name into (`"<repository>:"` prefix or `""`, tag or digest):
/// `TAG`, `REPOSITORY:TAG`, `sha256:HEX` or `REPOSITORY@sha256:HEX`.
fn split_ref_name(name: Option<&str>) -> (String, Option<String>) {
    if let Some(n) = name {
        if is_valid_digest(n) {
            return (String::new(), Some(n.to_string()));
        }
        if let Some((repo, d)) = n.rsplit_once('@').filter(|(_, d)| is_valid_digest(d)) {
            return (if repo.is_empty() { String::new() } else { format!("{repo}:") }, Some(d.to_string()));
        }
    }
    match name {
        None => (String::new(), None),
        Some(n) => match n.rsplit_once(':') {
            Some((repo, tag)) if !repo.is_empty() => (format!("{repo}:"), Some(tag.to_string())),
            _ => (String::new(), Some(n.to_string())),
        },
    }
}
