//! The bundle config blob (`application/vnd.drover.bundle.config.v1+json`, docs/design.md §3).

use serde::{Deserialize, Serialize};

use crate::object::ObjectRef;

/// The schema version this build writes and accepts.
pub const SCHEMA_VERSION: u32 = 1;

/// The config blob: what the bundle is and every object it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleConfig {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The cluster type this bundle was rendered for.
    pub cluster_type: String,
    /// The environment this bundle was rendered for.
    pub environment: String,
    /// Strictly increasing per repository (anti-rollback).
    pub sequence: u64,
    /// Where the content came from.
    pub source: SourceInfo,
    /// Opt-in to deleting more than the agent's `maxPruneRatio` of the inventory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_mass_prune: bool,
    /// Every object with its path and content hash, sorted by path.
    pub objects: Vec<ObjectEntry>,
}

/// Source repository and revision of a bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceInfo {
    /// Source repository URL (may be empty).
    #[serde(default)]
    pub repository: String,
    /// Source revision (may be empty).
    #[serde(default)]
    pub revision: String,
}

/// One object in the bundle index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectEntry {
    /// `apiVersion` of the object.
    pub api_version: String,
    /// `kind` of the object.
    pub kind: String,
    /// Namespace, absent for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// Path inside the content layer (`manifests/...`).
    pub path: String,
    /// Lowercase hex sha256 of the file at `path`.
    pub sha256: String,
}

impl ObjectEntry {
    /// The object's identity.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

impl BundleConfig {
    /// Parses a config blob and checks its schema version.
    pub fn from_slice(data: &[u8]) -> Result<Self, String> {
        let c: BundleConfig = serde_json::from_slice(data).map_err(|e| format!("bundle config is not valid: {e}"))?;
        if c.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "bundle config schemaVersion {} is not supported (this drover reads {SCHEMA_VERSION})",
                c.schema_version
            ));
        }
        Ok(c)
    }
}
