//! Assembling a bundle (config + content layer + manifest) from objects, and
//! reading one back: the single place that knows the artifact's shape (docs/design.md §3).

use std::collections::BTreeMap;

use crate::archive::{pack, unpack, ArchiveError, Packed, UnpackLimits};
use crate::config::{BundleConfig, ObjectEntry, SourceInfo, WorkloadProvenance, SCHEMA_VERSION};
use crate::digest::{sha256_digest, sha256_hex};
use crate::manifest::{Descriptor, Manifest};
use crate::media;
use crate::object::ObjectRef;

/// Everything about a bundle that is not its objects.
#[derive(Debug, Clone, Default)]
pub struct BundleMeta {
    /// Cluster type (may be empty for ad-hoc builds).
    pub cluster_type: String,
    /// Environment (may be empty for ad-hoc builds).
    pub environment: String,
    /// Sequence number (anti-rollback).
    pub sequence: u64,
    /// Source repository URL.
    pub source_repository: String,
    /// Source revision.
    pub revision: String,
    /// RFC 3339 creation time; only written when given (reproducibility).
    pub created: Option<String>,
    /// Opt in to large prunes (see [`BundleConfig::allow_mass_prune`]).
    pub allow_mass_prune: bool,
    /// How the workloads were rendered (see [`BundleConfig::workloads`]; empty: not recorded).
    pub workloads: Vec<WorkloadProvenance>,
    /// Health rules for the bundle's objects ([`BundleConfig::health_checks`]), already
    /// checked ([`crate::health::normalized`]).
    pub health_checks: Vec<crate::health::HealthRule>,
    /// `--min-agent-version`: raises the config's `minAgentVersion` above what its fields
    /// need ([`crate::compat::stamp`]).
    pub min_agent_version: Option<crate::compat::Version>,
}

impl BundleMeta {
    /// The `minAgentVersion` [`assemble`] writes for this meta: what its fields need,
    /// raised by [`BundleMeta::min_agent_version`] ([`crate::compat::stamp`]).
    pub fn stamped_min_agent_version(&self) -> Option<String> {
        match serde_json::to_value(config_of(self, Vec::new())).expect("config serializes") {
            serde_json::Value::Object(fields) => crate::compat::stamp(&fields, self.min_agent_version.as_ref()),
            _ => unreachable!("a config serializes to an object"),
        }
    }
}

/// The config of `meta` with `objects` (no `minAgentVersion` yet).
fn config_of(meta: &BundleMeta, objects: Vec<ObjectEntry>) -> BundleConfig {
    BundleConfig {
        schema_version: SCHEMA_VERSION,
        min_agent_version: None,
        ignorable: Vec::new(),
        cluster_type: meta.cluster_type.clone(),
        environment: meta.environment.clone(),
        sequence: meta.sequence,
        source: SourceInfo { repository: meta.source_repository.clone(), revision: meta.revision.clone() },
        allow_mass_prune: meta.allow_mass_prune,
        workloads: meta.workloads.clone(),
        health_checks: meta.health_checks.clone(),
        objects,
    }
}

/// A fully assembled bundle, ready to push or write to a layout.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Canonical manifest bytes.
    pub manifest: Vec<u8>,
    /// Digest of `manifest`.
    pub digest: String,
    /// Config blob bytes.
    pub config: Vec<u8>,
    /// Content layer (tar.gz) bytes.
    pub layer: Vec<u8>,
    /// The parsed config.
    pub config_doc: BundleConfig,
    /// The parsed manifest.
    pub manifest_doc: Manifest,
}

/// Assembles a bundle from objects (identity → YAML bytes of exactly that object).
pub fn assemble(objects: &BTreeMap<ObjectRef, Vec<u8>>, meta: &BundleMeta) -> Bundle {
    assemble_packed(objects, meta, &pack_content(objects))
}

/// Packs the content layer of `objects` (what [`assemble`] packs): it depends on the
/// objects only, not on the [`BundleMeta`], so one packing serves any sequence.
pub fn pack_content(objects: &BTreeMap<ObjectRef, Vec<u8>>) -> Packed {
    pack(&objects.iter().map(|(obj, yaml)| (obj.bundle_path(), yaml.clone())).collect())
}

/// [`assemble`] with the content layer already packed by [`pack_content`] from the same
/// `objects` (`drover publish` packs every cluster type once to compare, then assembles
/// only the changed ones without packing again).
pub fn assemble_packed(objects: &BTreeMap<ObjectRef, Vec<u8>>, meta: &BundleMeta, packed: &Packed) -> Bundle {
    let mut entries = Vec::with_capacity(objects.len());
    for (obj, yaml) in objects {
        entries.push(ObjectEntry {
            api_version: obj.api_version.clone(),
            kind: obj.kind.clone(),
            namespace: obj.namespace.clone(),
            name: obj.name.clone(),
            path: obj.bundle_path(),
            sha256: sha256_hex(yaml),
        });
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut config_doc = config_of(meta, entries);
    config_doc.min_agent_version = meta.stamped_min_agent_version();
    let config = serde_json::to_vec(&config_doc).expect("config serializes");
    let mut layer_desc = Descriptor::of(media::BUNDLE_LAYER, &packed.gz);
    layer_desc.annotations.insert(media::ANN_TITLE.into(), "manifests".into());
    layer_desc.annotations.insert(media::ANN_ORAS_UNPACK.into(), "true".into());
    layer_desc.annotations.insert(media::ANN_ORAS_DIGEST.into(), packed.tar_digest.clone());
    let mut annotations = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        if !v.is_empty() {
            annotations.insert(k.to_string(), v.to_string());
        }
    };
    put(media::ANN_SOURCE, &meta.source_repository);
    put(media::ANN_REVISION, &meta.revision);
    put(media::ANN_CREATED, meta.created.as_deref().unwrap_or(""));
    put(media::ANN_CLUSTER_TYPE, &meta.cluster_type);
    put(media::ANN_ENVIRONMENT, &meta.environment);
    put(media::ANN_SEQUENCE, &meta.sequence.to_string());
    put(media::ANN_MIN_AGENT_VERSION, config_doc.min_agent_version.as_deref().unwrap_or(""));
    let manifest_doc = Manifest {
        schema_version: 2,
        media_type: Some(media::OCI_MANIFEST.into()),
        artifact_type: Some(media::BUNDLE_ARTIFACT_TYPE.into()),
        config: Descriptor::of(media::BUNDLE_CONFIG, &config),
        layers: vec![layer_desc],
        annotations,
    };
    let manifest = manifest_doc.to_bytes();
    Bundle { digest: sha256_digest(&manifest), manifest, config, layer: packed.gz.clone(), config_doc, manifest_doc }
}

/// Why bundle content was refused when opened.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    /// The archive itself is unsafe or malformed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// A file is not under `manifests/`.
    #[error("content file {0:?} is outside manifests/")]
    OutsideManifests(String),
    /// A file is not listed in the config index.
    #[error("content file {0:?} is not in the bundle config index")]
    NotIndexed(String),
    /// An indexed file is missing from the layer.
    #[error("object {0} is in the config index but its file {1:?} is missing from the layer")]
    Missing(String, String),
    /// A file's hash differs from the index.
    #[error("content file {path:?} has sha256 {actual}, the signed config index says {expected}")]
    HashMismatch {
        /// File path.
        path: String,
        /// Hash in the config.
        expected: String,
        /// Hash of the file.
        actual: String,
    },
    /// A file does not hold exactly one object matching the index.
    #[error("content file {path:?}: {reason}")]
    BadObject {
        /// File path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The index lists a path that does not follow the naming rule for its object.
    #[error("config index entry for {object} has path {path:?}, expected {expected:?}")]
    PathMismatch {
        /// The object.
        object: String,
        /// The path given.
        path: String,
        /// The path the naming rule gives.
        expected: String,
    },
}

/// One verified object from a bundle.
#[derive(Debug, Clone)]
pub struct BundleObject {
    /// Identity, as in the index.
    pub id: ObjectRef,
    /// Path in the layer.
    pub path: String,
    /// Original YAML bytes.
    pub yaml: Vec<u8>,
    /// The parsed object.
    pub value: serde_json::Value,
}

/// Unpacks a content layer and checks it against the (already verified) config index:
/// every file indexed, every hash equal, each file exactly one object with the indexed identity.
pub fn open_content(config: &BundleConfig, layer: &[u8], limits: &UnpackLimits) -> Result<Vec<BundleObject>, ContentError> {
    open_content_with(config, layer, limits, |o| o)
}

/// Like [`open_content`] with the same checks, handing each object to `keep` as soon as it
/// is checked (the agent drops parsed values it does not need, keeping memory flat).
pub fn open_content_with<T>(
    config: &BundleConfig,
    layer: &[u8],
    limits: &UnpackLimits,
    mut keep: impl FnMut(BundleObject) -> T,
) -> Result<Vec<T>, ContentError> {
    let mut files = unpack(layer, limits)?;
    for path in files.keys() {
        if !path.starts_with("manifests/") {
            return Err(ContentError::OutsideManifests(path.clone()));
        }
    }
    let mut out = Vec::with_capacity(config.objects.len());
    for entry in &config.objects {
        let id = entry.object_ref();
        let expected_path = id.bundle_path();
        if entry.path != expected_path {
            return Err(ContentError::PathMismatch { object: id.to_string(), path: entry.path.clone(), expected: expected_path });
        }
        let yaml = files.remove(&entry.path).ok_or_else(|| ContentError::Missing(id.to_string(), entry.path.clone()))?;
        let actual = sha256_hex(&yaml);
        if actual != entry.sha256 {
            return Err(ContentError::HashMismatch { path: entry.path.clone(), expected: entry.sha256.clone(), actual });
        }
        let value = parse_single_object(&yaml).map_err(|reason| ContentError::BadObject { path: entry.path.clone(), reason })?;
        let found = ObjectRef::from_value(&value).map_err(|reason| ContentError::BadObject { path: entry.path.clone(), reason })?;
        if found != id {
            return Err(ContentError::BadObject {
                path: entry.path.clone(),
                reason: format!("holds {found}, the index says {id}"),
            });
        }
        out.push(keep(BundleObject { id, path: entry.path.clone(), yaml, value }));
    }
    if let Some(extra) = files.into_keys().next() {
        return Err(ContentError::NotIndexed(extra));
    }
    Ok(out)
}

/// Parses YAML bytes that must hold exactly one mapping document (aliases bounded, see
/// [`crate::yaml`]).
pub fn parse_single_object(yaml: &[u8]) -> Result<serde_json::Value, String> {
    let text = std::str::from_utf8(yaml).map_err(|_| "not UTF-8".to_string())?;
    let mut docs = Vec::new();
    for doc in crate::yaml::json_documents(text) {
        let v = doc.map_err(|e| format!("invalid YAML: {e}"))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    match docs.len() {
        1 if docs[0].is_object() => Ok(docs.pop().unwrap()),
        1 => Err("the document is not a mapping".into()),
        0 => Err("no object in file".into()),
        n => Err(format!("{n} objects in one file; exactly one is allowed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objs() -> BTreeMap<ObjectRef, Vec<u8>> {
        let mut m = BTreeMap::new();
        let id = ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("a".into()), name: "c".into() };
        m.insert(id, b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: a\n".to_vec());
        m
    }

    #[test]
    fn assemble_open_roundtrip() {
        let meta = BundleMeta { sequence: 7, cluster_type: "edge".into(), ..Default::default() };
        let b = assemble(&objs(), &meta);
        assert_eq!(b.digest, assemble(&objs(), &meta).digest);
        let m = Manifest::from_slice(&b.manifest).unwrap();
        assert!(m.is_bundle());
        m.bundle_layer().unwrap();
        let got = open_content(&b.config_doc, &b.layer, &UnpackLimits::default()).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, "manifests/a/ConfigMap.core.c.yaml");
    }

    #[test]
    fn tampered_index_is_refused() {
        let b = assemble(&objs(), &BundleMeta::default());
        let mut cfg = b.config_doc.clone();
        cfg.objects[0].sha256 = "0".repeat(64);
        assert!(matches!(open_content(&cfg, &b.layer, &UnpackLimits::default()), Err(ContentError::HashMismatch { .. })));
    }

    #[test]
    fn single_object_rule() {
        assert!(parse_single_object(b"a: 1\n---\nb: 2\n").is_err());
        assert!(parse_single_object(b"- 1\n").is_err());
        assert!(parse_single_object(b"---\na: 1\n---\n").is_ok());
    }
}
