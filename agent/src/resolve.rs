//! Stage 1, resolve: the source reference to a manifest digest. On a registry this is
//! exactly one `HEAD` request per poll; nothing else happens when the digest is unchanged.

use drover_proto::{Reference, RegistryClient, Repo, StoreError};

use crate::stage::StageError;

/// The polled source: where it lives and the tag or digest to look up.
pub struct Source {
    /// The reference text as configured (state key, `drover.dev/source`).
    pub name: String,
    reference: Reference,
    client: RegistryClient,
    repo: Repo,
    /// Tag or digest to resolve.
    pub lookup: String,
}

impl Source {
    /// Opens the source. Layouts and archives are re-read on every poll
    /// (see [`Source::refresh`]); registries need nothing.
    pub fn open(name: &str, reference: &Reference, client: &RegistryClient) -> Result<Self, StoreError> {
        let (repo, lookup) = Repo::open(reference, client, false)?;
        let lookup = lookup.ok_or_else(|| StoreError::Config(format!("source {name} names no tag or digest")))?;
        Ok(Source { name: name.to_string(), reference: reference.clone(), client: client.clone(), repo, lookup })
    }

    /// The repository (for fetch and signature verification).
    pub fn repo(&self) -> &Repo {
        &self.repo
    }

    /// Re-opens an `oci:` / `oci-archive:` source so a replaced layout or archive is seen.
    pub fn refresh(&mut self) -> Result<(), StoreError> {
        if !matches!(self.reference, Reference::Registry(_)) {
            let (repo, _) = Repo::open(&self.reference, &self.client, false)?;
            self.repo = repo;
        }
        Ok(())
    }
}

/// Resolves the source's tag to a digest (one `HEAD` on a registry).
pub async fn resolve(source: &mut Source) -> Result<String, StageError> {
    source.refresh().map_err(|e| StageError::Unreachable(format!("opening {}: {e}", source.name)))?;
    match source.repo.resolve(&source.lookup).await {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(StageError::Unreachable(format!("{} not found", source.repo.describe(&source.lookup)))),
        Err(e) => Err(StageError::Unreachable(format!("resolving {}: {e}", source.name))),
    }
}
