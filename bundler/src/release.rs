//! Release records and the promotion gate (docs/design.md §7). Every `drover publish` of
//! environment E at revision R leaves a small signed OCI artifact in
//! `PREFIX/drover-releases` (tags `E-R` and `E`); publishing the next environment in
//! `fleet.yaml` order at R requires a verified record `<previous env>-R`.

use std::collections::BTreeMap;

use drover_proto::keys::PrivateKey;
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::trust::{self, TrustPolicy};
use drover_proto::{media, Repo, StoreError};
use serde::{Deserialize, Serialize};

/// The current time as RFC 3339 (UTC, whole seconds), for release records.
pub use drover_proto::time::now_rfc3339;

/// The repository (under the publish prefix) holding release records.
pub const RELEASES_REPOSITORY: &str = crate::platform::RESERVED_CLUSTER_TYPE;
/// Schema version of [`ReleaseRecord`].
pub const RECORD_SCHEMA_VERSION: u32 = 1;
const MAX_RECORD: u64 = 4 << 20;

/// The content of a release record (the config blob, `application/vnd.drover.release.v1+json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseRecord {
    /// Always [`RECORD_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The environment published.
    pub environment: String,
    /// The platform revision published.
    pub revision: String,
    /// When (RFC 3339, UTC).
    pub time: String,
    /// True when `--skip-promotion-gate` was used.
    pub gate_skipped: bool,
    /// Every cluster type's bundle.
    pub cluster_types: BTreeMap<String, ReleasedBundle>,
}

/// One cluster type's bundle in a release record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleasedBundle {
    /// `PREFIX/<type>:<env>` at publish time.
    pub reference: String,
    /// The bundle's manifest digest.
    pub digest: String,
}

impl ReleaseRecord {
    /// True when both records describe the same release (everything but the time).
    pub fn same_release(&self, other: &ReleaseRecord) -> bool {
        self.environment == other.environment
            && self.revision == other.revision
            && self.gate_skipped == other.gate_skipped
            && self.cluster_types == other.cluster_types
    }
}

/// Why a release record could not be read, verified or written, or the gate refused.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// The promotion gate refused.
    #[error("{0}")]
    Gate(String),
    /// A record exists but is malformed.
    #[error("release record {reference}: {reason}")]
    Malformed {
        /// Where it is.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// Registry access failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing or signing the record failed.
    #[error("writing release record: {0}")]
    Sign(drover_proto::channel::ChannelError),
}

/// The tag of the record of `env` at `revision`: `<env>-<revision>`.
pub fn record_tag(env: &str, revision: &str) -> String {
    format!("{env}-{revision}")
}

/// The manifest and config bytes of a record (config = the record JSON, one empty layer).
pub fn record_manifest(record: &ReleaseRecord) -> (Vec<u8>, Vec<u8>) {
    let config = serde_json::to_vec(record).expect("record serializes");
    let mut annotations = BTreeMap::new();
    annotations.insert(media::ANN_ENVIRONMENT.to_string(), record.environment.clone());
    annotations.insert(media::ANN_REVISION.to_string(), record.revision.clone());
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(media::OCI_MANIFEST.into()),
        artifact_type: Some(media::RELEASE_RECORD.into()),
        config: Descriptor::of(media::RELEASE_RECORD, &config),
        layers: vec![Descriptor::of(media::OCI_EMPTY, b"{}")],
        annotations,
    };
    (manifest.to_bytes(), config)
}

/// Reads the record at `tag` (`None` when the tag does not exist) WITHOUT verifying it.
pub async fn fetch(repo: &Repo, tag: &str) -> Result<Option<(String, ReleaseRecord)>, ReleaseError> {
    let reference = repo.describe(tag);
    let (bytes, digest) = match repo.manifest(tag, MAX_RECORD).await {
        Ok(x) => x,
        Err(StoreError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let malformed = |reason: String| ReleaseError::Malformed { reference: reference.clone(), reason };
    let manifest = Manifest::from_slice(&bytes).map_err(malformed)?;
    if manifest.config.media_type != media::RELEASE_RECORD {
        return Err(malformed(format!("config media type is {:?}, not {:?}", manifest.config.media_type, media::RELEASE_RECORD)));
    }
    if manifest.config.size > MAX_RECORD {
        return Err(malformed(format!("config is {} bytes, over {MAX_RECORD}", manifest.config.size)));
    }
    let config = repo.blob(&manifest.config.digest, MAX_RECORD).await?;
    let record: ReleaseRecord = serde_json::from_slice(&config).map_err(|e| malformed(format!("not a release record: {e}")))?;
    Ok(Some((digest, record)))
}

/// Reads the record at `tag` and verifies its signature against `policy` (fail closed).
/// `Ok(None)`: no such tag. A record that exists but does not verify is an error.
pub async fn fetch_verified(repo: &Repo, tag: &str, policy: &TrustPolicy) -> Result<Option<(String, ReleaseRecord)>, ReleaseError> {
    let Some((digest, record)) = fetch(repo, tag).await? else { return Ok(None) };
    trust::verify(repo, &digest, policy).await.map_err(|e| ReleaseError::Gate(format!(
        "release record {} exists but is not verified with the trusted key(s): {e}",
        repo.describe(tag)
    )))?;
    Ok(Some((digest, record)))
}

/// What the promotion gate decided.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateOutcome {
    /// The environment that had to be published first (`None` for the first environment).
    pub previous: Option<String>,
    /// The verified record of the previous environment.
    pub record: Option<String>,
}

/// The promotion gate: `env` at `revision` may be published when it is the first
/// environment in `order`, or when a verified record `<previous env>-<revision>` exists
/// and says so.
pub async fn check_gate(repo: &Repo, order: &[String], env: &str, revision: &str, policy: &TrustPolicy) -> Result<GateOutcome, ReleaseError> {
    let idx = order.iter().position(|e| e == env).ok_or_else(|| ReleaseError::Gate(format!("{env:?} is not in {order:?}")))?;
    if idx == 0 {
        return Ok(GateOutcome { previous: None, record: None });
    }
    let prev = &order[idx - 1];
    let tag = record_tag(prev, revision);
    match fetch_verified(repo, &tag, policy).await? {
        None => Err(ReleaseError::Gate(format!(
            "promotion gate: refusing to publish {env} at revision {revision}: publish {prev} at this revision first \
             (environments go {}; no release record {}). In an emergency, --skip-promotion-gate publishes anyway and is recorded",
            order.join(" -> "),
            repo.describe(&tag)
        ))),
        Some((digest, r)) if r.environment != *prev || r.revision != revision => Err(ReleaseError::Gate(format!(
            "promotion gate: release record {} ({digest}) is for {} at {}, not {prev} at {revision}; refusing to publish {env}",
            repo.describe(&tag),
            r.environment,
            r.revision
        ))),
        Some((digest, _)) => Ok(GateOutcome { previous: Some(prev.clone()), record: Some(format!("{}@{digest}", repo.describe(&tag))) }),
    }
}

/// What [`publish_record`] did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordResult {
    /// `PREFIX/drover-releases:<env>-<revision>`.
    pub reference: String,
    /// Manifest digest of the record.
    pub digest: String,
    /// False when an identical, verified record was already there (nothing written).
    pub pushed: bool,
}

/// Pushes `record` (tag `<env>-<revision>`), signs it, then moves tag `<env>`. When a
/// verified record of the same release is already at `<env>-<revision>`, nothing is
/// pushed (only the `<env>` tag is moved back to it if it points elsewhere).
pub async fn publish_record(repo: &Repo, record: &ReleaseRecord, key: &PrivateKey, policy: &TrustPolicy) -> Result<RecordResult, ReleaseError> {
    let tag = record_tag(&record.environment, &record.revision);
    let reference = repo.describe(&tag);
    if let Ok(Some((digest, existing))) = fetch_verified(repo, &tag, policy).await {
        if existing.same_release(record) {
            if repo.resolve(&record.environment).await? != Some(digest.clone()) {
                let (bytes, _) = repo.manifest(&digest, MAX_RECORD).await?;
                repo.put_manifest(bytes, media::OCI_MANIFEST, Some(&record.environment)).await?;
            }
            return Ok(RecordResult { reference, digest, pushed: false });
        }
    }
    // Our own bytes, in the channel write order: blobs, manifest, signature, then tags.
    let (manifest, config) = record_manifest(record);
    let digest = drover_proto::digest::sha256_digest(&manifest);
    drover_proto::channel::write::write_signed(repo, &manifest, vec![config, b"{}".to_vec()], Some(key), None, &[&tag, &record.environment])
        .await
        .map_err(ReleaseError::Sign)?;
    Ok(RecordResult { reference, digest, pushed: true })
}
