//! The bundler's side of keys and references: loading the private signing key with the
//! CLI password rule, and opening the repository a reference names. Signatures themselves
//! are made by `drover_proto::trust::sign`, called only from the channel module.

use std::path::Path;

use anyhow::Context;
use drover_proto::keys::{password_from_env, PrivateKey};
use drover_proto::Repo;

/// Loads a private signing key with the CLI password rule
/// (`DROVER_KEY_PASSWORD`, else `COSIGN_PASSWORD`, else empty).
pub fn load_signing_key(path: &Path) -> anyhow::Result<PrivateKey> {
    PrivateKey::from_file(path, &password_from_env()).with_context(|| format!("loading signing key {}", path.display()))
}

/// Opens the repository a reference string points into, with its tag or digest.
/// `writable` refuses `oci-archive:` (writes would land in a temporary extraction).
pub fn open_reference(
    reference: &str,
    client: &drover_proto::RegistryClient,
    writable: bool,
) -> anyhow::Result<(Repo, Option<String>, drover_proto::Reference)> {
    let parsed = drover_proto::Reference::parse(reference)?;
    if let (true, drover_proto::Reference::Archive { file, name }) = (writable, &parsed) {
        let (file, name) = (file.display(), name.as_deref().unwrap_or("REPOSITORY:TAG"));
        anyhow::bail!(
            "{reference}: an oci-archive cannot be changed in place. Extract it into a layout and work there: \
             `mkdir DIR && tar -xf {file} -C DIR`, then use oci:DIR:{name} (`drover export oci:DIR:{name} --out {file}` \
             writes the archive again); or import it into a registry first (`drover import {file} --to REGISTRY/PREFIX --trust-key PUB`)"
        );
    }
    let (repo, lookup) = Repo::open(&parsed, client, false).with_context(|| format!("opening {reference}"))?;
    Ok((repo, lookup, parsed))
}

/// Resolves `lookup` (tag or digest) in `repo` to a manifest digest; a clear error
/// naming the reference when it does not exist.
pub async fn resolve_digest(repo: &Repo, lookup: Option<&str>, reference: &str) -> anyhow::Result<String> {
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{reference} names no tag or digest (add :TAG or @sha256:...)"))?;
    repo.resolve(lookup)
        .await
        .with_context(|| format!("looking up {reference}"))?
        .ok_or_else(|| anyhow::anyhow!("{reference} does not exist"))
}
