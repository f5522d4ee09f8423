//! Stage 2, fetch: the parts of one digest, each read only when the checks before it
//! passed (the order is [`crate::admit`]'s): the manifest (size-capped while streaming),
//! then the config, then the content layer; or all three from the local cache of
//! verified bundles. Size limits (manifest 4 MiB, config 16 MiB, layer 64 MiB) and every
//! digest are checked either way.

use drover_proto::config::BundleConfig;
use drover_proto::digest::verify_digest;
use drover_proto::manifest::Manifest;
use drover_proto::{FetchLimits, FetchedBundle, StoreError};

use crate::record::{CachedBundle, Store};
use crate::resolve::Source;
use crate::stage::StageError;

/// Limits used by the agent (docs/design.md §5).
pub fn limits() -> FetchLimits {
    FetchLimits { manifest: 4 << 20, config: 16 << 20, layer: 64 << 20 }
}

/// A store error while reading `what` as a stage error: transport trouble is
/// `Unreachable` (retried with backoff); bytes that do not hash to the digest that named
/// them are a `Failed` attempt, fetched again next poll (the digest is fixed, so what
/// arrived was damaged on the way, e.g. a flipped or cut body: nothing is applied, and
/// refusing the digest would block a good bundle until resync); anything else refuses
/// the bundle (`fetch`).
fn stage_error(what: &str, e: StoreError) -> StageError {
    match e {
        e @ StoreError::Transport { .. } => StageError::Unreachable(format!("fetching {what}: {e}")),
        e @ StoreError::DigestMismatch { .. } => StageError::Failed(format!("fetching {what}: {e} (damaged on the way; fetched again next poll)")),
        e => StageError::Rejected { reason: "fetch", message: format!("{what}: {e}") },
    }
}

/// The manifest bytes of `digest` (by digest, so its content is checked; at most
/// [`limits`]`.manifest` bytes). Nothing about it is trusted yet.
pub async fn manifest(source: &Source, digest: &str) -> Result<Vec<u8>, StageError> {
    let (bytes, _) = source.repo().manifest(digest, limits().manifest).await.map_err(|e| stage_error(&format!("manifest {digest}"), e))?;
    Ok(bytes)
}

/// Parses the manifest (its shape, its size claims) and reads the config blob it names:
/// a bundle without its layer (`layer` empty). Call only once the manifest digest's
/// signatures are verified: the manifest binds the config by digest.
pub async fn head(source: &Source, manifest_bytes: Vec<u8>, digest: &str) -> Result<FetchedBundle, StageError> {
    source
        .repo()
        .fetch_bundle_head(manifest_bytes, digest.to_string(), &limits())
        .await
        .map_err(|e| stage_error(&format!("bundle {digest}"), e))
}

/// Adds the content layer to a bundle from [`head`]. Call only once the signed config
/// was checked (cluster type, environment, anti-rollback).
pub async fn layer(source: &Source, head: FetchedBundle) -> Result<FetchedBundle, StageError> {
    let digest = head.digest.clone();
    source.repo().fetch_layer(head, &limits()).await.map_err(|e| stage_error(&format!("content layer of {digest}"), e))
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
