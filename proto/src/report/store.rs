//! A report as an OCI artifact (docs/fleet.md, "The report"): an image manifest with
//! `artifactType` [`media::REPORT_ARTIFACT_TYPE`], the report as its config (also embedded
//! in the descriptor's `data`, so a reader needs one request per cluster), no layers, and
//! the cluster's signature in two manifest annotations: its report public key
//! ([`media::ANN_REPORT_KEY`], base64 DER) and an ECDSA P-256 signature over the report
//! document ([`media::ANN_REPORT_SIGNATURE`], base64 DER). The signature covers the
//! document, which names the cluster; the manifest binds the document by digest.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::digest::{sha256_digest, verify_digest};
use crate::error::StoreError;
use crate::keys::{PrivateKey, PublicKey};
use crate::media;
use crate::repo::Repo;

use super::{Report, MAX_REPORT_BYTES};

/// Who signed a report, as far as the report itself can tell (whether that key counts is
/// the roster's question: [`super::roster::Roster::judge`]).
#[derive(Debug, Clone)]
pub enum Signer {
    /// No signature annotations: an agent before report keys, or not an agent at all.
    Unsigned,
    /// Annotations that do not make a valid signature over the document.
    Invalid(String),
    /// The document's signature verifies with this key.
    Key(PublicKey),
}

/// A report as read from a reports repository.
#[derive(Debug, Clone)]
pub struct Received {
    /// Where it was read: its tag, or its ref name in a layout (`<repository>:<tag>`).
    pub name: String,
    /// The document (free text cleaned and cut to the format's limits).
    pub report: Report,
    /// Who signed it.
    pub signer: Signer,
    /// What the reader cut to the format's limits; empty for a report within them.
    pub cut: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigDescriptor {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReportManifest {
    schema_version: u32,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    artifact_type: Option<String>,
    config: ConfigDescriptor,
    #[serde(default)]
    layers: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

/// The manifest bytes for a report document (`config` = the report bytes), signed with
/// `key` when given.
pub fn manifest_for(config: &[u8], reported_at: &str, key: Option<&PrivateKey>) -> Result<Vec<u8>, StoreError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut annotations = BTreeMap::from([(media::ANN_CREATED.to_string(), reported_at.to_string())]);
    if let Some(key) = key {
        let signature = key.sign(config).map_err(|e| StoreError::Config(format!("signing the report: {e}")))?;
        annotations.insert(media::ANN_REPORT_KEY.to_string(), b64.encode(key.public_key().spki_der()));
        annotations.insert(media::ANN_REPORT_SIGNATURE.to_string(), b64.encode(signature));
    }
    let m = ReportManifest {
        schema_version: 2,
        media_type: Some(media::OCI_MANIFEST.into()),
        artifact_type: Some(media::REPORT_ARTIFACT_TYPE.into()),
        config: ConfigDescriptor {
            media_type: media::REPORT_CONFIG.into(),
            digest: sha256_digest(config),
            size: config.len() as u64,
            data: Some(b64.encode(config)),
        },
        layers: Vec::new(),
        annotations,
    };
    Ok(serde_json::to_vec(&m).expect("manifest serializes"))
}

/// Writes `report` into `repo` under its tag, signed with the cluster's report `key`: the
/// config blob, then the manifest (on a registry three requests: the config is new on
/// every write, `reportedAt`, so nobody asks whether it is there). Returns the manifest
/// digest.
pub async fn push(repo: &Repo, report: &Report, key: &PrivateKey) -> Result<String, StoreError> {
    let config = report.to_bytes();
    if config.len() as u64 > MAX_REPORT_BYTES {
        return Err(StoreError::TooLarge { what: format!("report {}", report.tag()), size: config.len() as u64, limit: MAX_REPORT_BYTES });
    }
    let manifest = manifest_for(&config, &report.reported_at, Some(key))?;
    repo.put_new_blob(&sha256_digest(&config), config).await?;
    repo.put_manifest(manifest, media::OCI_MANIFEST, Some(&report.tag())).await
}

/// The signature of a report document from its manifest's annotations.
fn signer(annotations: &BTreeMap<String, String>, document: &[u8]) -> Signer {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (key, signature) = match (annotations.get(media::ANN_REPORT_KEY), annotations.get(media::ANN_REPORT_SIGNATURE)) {
        (None, None) => return Signer::Unsigned,
        (Some(k), Some(s)) => (k, s),
        _ => return Signer::Invalid("one of the two signature annotations is missing".into()),
    };
    let der = match b64.decode(key.trim()) {
        Ok(d) if d.len() <= 1024 => d,
        _ => return Signer::Invalid(format!("{} is not a base64 public key", media::ANN_REPORT_KEY)),
    };
    let key = match PublicKey::from_spki_der(der, "the report's key") {
        Ok(k) => k,
        Err(e) => return Signer::Invalid(format!("its report key is unusable: {e}")),
    };
    let Ok(signature) = b64.decode(signature.trim()) else {
        return Signer::Invalid(format!("{} is not base64", media::ANN_REPORT_SIGNATURE));
    };
    if key.verify(document, &signature) {
        Signer::Key(key)
    } else {
        Signer::Invalid(format!("the signature does not verify with the key it names ({})", key.fingerprint()))
    }
}

/// Is this manifest a report? `Ok(None)`: another artifact (a bundle, a signature, the
/// roster). `Ok(Some(..))` from the embedded data when it is there (digest-checked), else
/// from the config blob; the document bounded to the format's limits and its signature
/// checked against the key it names.
async fn decode(repo: &Repo, bytes: &[u8]) -> Result<Option<Received>, String> {
    let m: ReportManifest = match serde_json::from_slice(bytes) {
        Ok(m) => m,
        Err(_) => return Ok(None),
    };
    if m.artifact_type.as_deref() != Some(media::REPORT_ARTIFACT_TYPE) && m.config.media_type != media::REPORT_CONFIG {
        return Ok(None);
    }
    if m.config.media_type != media::REPORT_CONFIG {
        return Err(format!("config media type {:?}, expected {:?}", m.config.media_type, media::REPORT_CONFIG));
    }
    if m.config.size > MAX_REPORT_BYTES {
        return Err(format!("the report is {} bytes, over the limit of {MAX_REPORT_BYTES}", m.config.size));
    }
    let embedded = m.config.data.as_deref().and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
    let data = match embedded.filter(|d| verify_digest(d, &m.config.digest).is_ok()) {
        Some(d) => d,
        None => repo.blob(&m.config.digest, MAX_REPORT_BYTES).await.map_err(|e| e.to_string())?,
    };
    let (report, cut) = Report::read_bounded(&data)?;
    Ok(Some(Received { name: String::new(), report, signer: signer(&m.annotations, &data), cut }))
}

/// A tag in a reports repository that holds something unusable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unreadable {
    /// Where: the tag or the layout ref name.
    pub name: String,
    /// Why it was skipped.
    pub reason: String,
}

/// Everything a reports repository holds.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The reports, in tag order.
    pub reports: Vec<Received>,
    /// Tags that were skipped, and why.
    pub unreadable: Vec<Unreadable>,
}

/// Reads one cluster's report by tag (`Ok(None)`: there is none).
pub async fn read(repo: &Repo, tag: &str) -> Result<Option<Received>, StoreError> {
    let bytes = match repo.manifest(tag, MAX_REPORT_BYTES).await {
        Ok((b, _)) => b,
        Err(StoreError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    decode(repo, &bytes).await.map_err(|e| StoreError::Malformed(format!("{}: {e}", repo.describe(tag))))
}

/// The (name, lookup) of every manifest in `repo` that may be a report: on a registry
/// every tag but signatures and the roster; in a layout or archive every ref name under
/// the repository's prefix (all of them for an archive opened without a name, e.g. what
/// `drover export` wrote), skipping entries whose artifact type says they are not reports.
/// Sorted by name.
pub async fn candidates(repo: &Repo) -> Result<Vec<(String, String)>, StoreError> {
    let report_tag = |t: &str| !t.ends_with(".sig") && t != super::ROSTER_TAG;
    let mut out: Vec<(String, String)> = match repo {
        Repo::Registry { .. } => repo.tags().await?.into_iter().filter(|t| report_tag(t)).map(|t| (t.clone(), t)).collect(),
        Repo::Layout { layout, prefix, .. } => layout
            .index()?
            .manifests
            .into_iter()
            .filter(|d| d.artifact_type.as_deref().is_none_or(|t| t == media::REPORT_ARTIFACT_TYPE))
            .filter_map(|d| {
                let name = d.annotations.get(media::ANN_REF_NAME)?.strip_prefix(prefix.as_str())?.to_string();
                report_tag(name.rsplit(':').next().unwrap_or(&name)).then_some((name, d.digest))
            })
            .collect(),
    };
    out.sort();
    Ok(out)
}

/// One manifest of a reports repository, read: a report under its own tag, or why it is
/// unusable (names and reasons cleaned: they come from the registry).
pub type Outcome = Result<Received, Unreadable>;

/// Reads the manifests `names` (from [`candidates`]) of `repo`, `concurrency` at a time,
/// as they arrive (unordered: one slow answer must not hold back the requests behind it).
/// Manifests that are not reports (bundles, signatures) are left out; broken reports, and
/// reports whose tag is not `<clusterType>.<clusterName>` of their own content, come as
/// [`Unreadable`]. A reader that keeps little of each report stays small however many
/// there are ([`read_all`] keeps everything).
pub fn read_each(repo: &Repo, names: Vec<(String, String)>, concurrency: usize) -> impl futures::Stream<Item = Outcome> + '_ {
    use futures::StreamExt;
    futures::stream::iter(names.into_iter().map(move |(name, lookup)| async move {
        // In a layout the lookup is the manifest's digest: read its blob (digest-checked)
        // instead of searching the index again for every report.
        let fetched = match repo {
            Repo::Layout { .. } if crate::digest::is_valid_digest(&lookup) => repo.blob(&lookup, MAX_REPORT_BYTES).await,
            _ => repo.manifest(&lookup, MAX_REPORT_BYTES).await.map(|(bytes, _)| bytes),
        };
        let r = match fetched {
            Ok(bytes) => decode(repo, &bytes).await,
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.to_string()),
        };
        settle(name, r)
    }))
    .buffer_unordered(concurrency.max(1))
    .filter_map(|o| async move { o })
}

/// A manifest's outcome under `name`: `None` when it is not a report.
fn settle(name: String, r: Result<Option<Received>, String>) -> Option<Outcome> {
    // A layout ref name may be `<repository>:<tag>`: the tag is after the last ':'.
    let tag = name.rsplit(':').next().unwrap_or(&name).to_string();
    let name = crate::text::clean::bounded(&name, 200);
    match r {
        Ok(None) => None,
        Ok(Some(received)) if received.report.tag() == tag => Some(Ok(Received { name, ..received })),
        Ok(Some(received)) => Some(Err(Unreadable {
            reason: format!("holds the report of {}; a report counts only under its own tag", received.report.tag()),
            name,
        })),
        Err(reason) => Some(Err(Unreadable { name, reason: crate::text::clean::bounded(&reason, 400) })),
    }
}

/// Reads every report in `repo`, `concurrency` manifests at a time, into memory, in tag
/// order ([`read_each`] for what is left out and what is unusable).
pub async fn read_all(repo: &Repo, concurrency: usize) -> Result<Loaded, StoreError> {
    use futures::StreamExt;
    let names = candidates(repo).await?;
    let mut out = Loaded::default();
    let mut each = std::pin::pin!(read_each(repo, names, concurrency));
    while let Some(o) = each.next().await {
        match o {
            Ok(r) => out.reports.push(r),
            Err(u) => out.unreadable.push(u),
        }
    }
    out.reports.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    out.unreadable.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}
