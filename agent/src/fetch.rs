//! Stage 2, fetch: the manifest, config and content layer of one digest, from the local
//! cache of verified bundles when present, else from the source. Size limits (manifest
//! 4 MiB, layer 64 MiB) and every digest are checked either way.

use drover_proto::config::BundleConfig;
use drover_proto::digest::verify_digest;
use drover_proto::manifest::Manifest;
use drover_proto::{FetchLimits, FetchedBundle, StoreError};

use crate::stage::StageError;
use crate::record::{CachedBundle, Store};
use crate::resolve::Source;

/// A fetched bundle and where it came from.
pub struct Fetched {
    /// The bundle, digests checked, signatures NOT verified.
    pub bundle: FetchedBundle,
    /// True when read from the local cache (it was verified before it was cached).
    pub from_cache: bool,
}

/// Limits used by the agent (docs/design.md §5).
pub fn limits() -> FetchLimits {
    FetchLimits { manifest: 4 << 20, config: 16 << 20, layer: 64 << 20 }
}

/// Fetches `digest`: from the cache when it holds it, else from the source.
pub async fn fetch(source: &Source, store: &Store, digest: &str) -> Result<Fetched, StageError> {
    match from_cache(store, &source.name, digest) {
        Ok(Some(bundle)) => return Ok(Fetched { bundle, from_cache: true }),
        Ok(None) => {}
        Err(e) => tracing::warn!("{e}"),
    }
    match source.repo().fetch_bundle(digest, &limits()).await {
        Ok(bundle) => Ok(Fetched { bundle, from_cache: false }),
        Err(e @ StoreError::Transport { .. }) => Err(StageError::Unreachable(format!("fetching {digest}: {e}"))),
        Err(e) => Err(StageError::Rejected { reason: "fetch", message: format!("bundle {digest}: {e}") }),
    }
}

/// Reads a cached bundle, re-checking every digest.
pub fn from_cache(store: &Store, source: &str, digest: &str) -> Result<Option<FetchedBundle>, StageError> {
    let cached = store.cache_get(source, digest).map_err(|e| StageError::Failed(e.to_string()))?;
    let Some(CachedBundle { digest, manifest: manifest_bytes, config: config_bytes, layer }) = cached else {
        return Ok(None);
    };
    let corrupt = |m: String| StageError::Failed(format!("cached bundle {digest} is corrupt ({m}); it will be fetched again"));
    let manifest = Manifest::from_slice(&manifest_bytes).map_err(corrupt)?;
    verify_digest(&config_bytes, &manifest.config.digest).map_err(corrupt)?;
    let layer_desc = manifest.bundle_layer().map_err(corrupt)?;
    verify_digest(&layer, &layer_desc.digest).map_err(corrupt)?;
    let config = BundleConfig::from_slice(&config_bytes).map_err(corrupt)?;
    Ok(Some(FetchedBundle { digest, manifest_bytes, manifest, config_bytes, config, layer }))
}

/// Puts a verified bundle in the cache.
pub fn cache(store: &Store, source: &str, b: &FetchedBundle) -> Result<(), StageError> {
    let c = CachedBundle { digest: b.digest.clone(), manifest: b.manifest_bytes.clone(), config: b.config_bytes.clone(), layer: b.layer.clone() };
    store.cache_put(source, &c).map_err(|e| StageError::Failed(e.to_string()))
}
