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
    /// The lowest agent version that understands every field of this config
    /// ([`crate::compat`]); absent when every agent does (older agents refuse the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_agent_version: Option<String>,
    /// Top-level fields an agent that does not know them may drop ([`crate::compat`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignorable: Vec<String>,
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
    /// How each workload's objects were produced, when a platform workload was rendered by a
    /// command (`spec.render` in `workload.yaml`); absent otherwise (every object came from
    /// templates or a `drover build` directory), so such bundles keep the digest they had
    /// before this field existed. Sorted by workload name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadProvenance>,
    /// Health rules in CEL for the bundle's objects ([`crate::health`]), sorted by
    /// apiVersion and kind; they win over the agent's own `healthChecks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<crate::health::HealthRule>,
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

/// How a workload of a platform was rendered (docs/platform.md, "Bring your own renderer").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadProvenance {
    /// The workload's name (its directory under `workloads/`).
    pub name: String,
    /// [`RENDERER_TEMPLATES`] or [`RENDERER_COMMAND`].
    pub renderer: String,
    /// The renderer's command line as `workload.yaml` gives it (`spec.render.command`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// `spec.render.versionCommand`, when given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub version_command: Vec<String>,
    /// What `versionCommand` printed (trimmed, control characters removed, bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// [`WorkloadProvenance::renderer`] of a workload rendered from `templates/`.
pub const RENDERER_TEMPLATES: &str = "templates";
/// [`WorkloadProvenance::renderer`] of a workload rendered by `spec.render.command`.
pub const RENDERER_COMMAND: &str = "command";

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
    /// Parses a config blob and checks its schema version. Fields the writer marked
    /// `ignorable` that this build does not know are dropped; a config that needs a newer
    /// agent than this build is read for what this build knows (its `minAgentVersion`
    /// tells the reader; the agent refuses it, [`crate::compat::check`]); any other
    /// unknown field is an error.
    pub fn from_slice(data: &[u8]) -> Result<Self, String> {
        let invalid = |e: String| format!("bundle config is not valid: {e}");
        let mut raw: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(data).map_err(|e| invalid(e.to_string()))?;
        let min = crate::compat::prepare(&mut raw).map_err(invalid)?;
        let c: BundleConfig = serde_json::from_value(serde_json::Value::Object(raw)).map_err(|e| match &min {
            Some(m) => invalid(format!("{e} (it is written for drover {m} or newer; this is {})", crate::compat::THIS)),
            None => invalid(e.to_string()),
        })?;
        if c.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "bundle config schemaVersion {} is not supported (this drover reads {SCHEMA_VERSION})",
                c.schema_version
            ));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Vec<u8> {
        format!(r#"{{"schemaVersion":1,{extra}"clusterType":"edge","environment":"prod","sequence":7,"source":{{}},"objects":[]}}"#).into_bytes()
    }

    #[test]
    fn unknown_fields_are_refused_unless_marked_ignorable_or_newer() {
        let e = BundleConfig::from_slice(&config(r#""futureNote":"x","#)).unwrap_err();
        assert!(e.contains("unknown field `futureNote`"), "{e}");
        let c = BundleConfig::from_slice(&config(r#""ignorable":["futureNote"],"futureNote":"x","#)).unwrap();
        assert_eq!(c.ignorable, ["futureNote"]);
        // A config for a newer agent is read for what this build knows: its version tells.
        let c = BundleConfig::from_slice(&config(r#""minAgentVersion":"99.0.0","futureRule":{"a":1},"#)).unwrap();
        assert_eq!(c.min_agent_version.as_deref(), Some("99.0.0"));
        let e = BundleConfig::from_slice(&config(r#""minAgentVersion":"soon","#)).unwrap_err();
        assert!(e.contains("not a version"), "{e}");
    }
}
