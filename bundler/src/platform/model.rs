//! The platform definition files (`fleet.yaml`, `cluster-types/`, `environments/`,
//! `overrides/`, `namespace/`, `workloads/`) as typed documents: unknown fields are
//! errors that name the file and the field.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::selector::LabelSelector;

/// The only `apiVersion` platform files may have.
pub const API_VERSION: &str = "drover.dev/v1";

/// `metadata` of a platform document.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The object's name (must match its file or directory name).
    #[serde(default)]
    pub name: Option<String>,
    /// Labels (the capabilities of a cluster type).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Free-form annotations (ignored by drover).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// `fleet.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetDoc {
    /// Always `drover.dev/v1`.
    pub api_version: String,
    /// Always `Fleet`.
    pub kind: String,
    /// Optional metadata.
    #[serde(default)]
    pub metadata: Metadata,
    /// The fleet's settings.
    pub spec: FleetSpec,
}

/// `fleet.yaml` `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetSpec {
    /// Environments in promotion order.
    pub environments: Vec<String>,
    /// Extra kinds to treat as cluster-scoped (besides the built-in table and CRDs).
    #[serde(default)]
    pub cluster_scoped_kinds: Vec<String>,
    /// Declared membership: every cluster of the fleet, reviewed like the rest of the
    /// platform (docs/fleet.md, "Declared membership"; checked by
    /// `super::membership::check_clusters`).
    #[serde(default)]
    pub clusters: Vec<ClusterEntry>,
    /// Health rules in CEL for every cluster type's bundle (docs/platform.md).
    #[serde(default)]
    pub health_checks: Vec<drover_proto::health::HealthRule>,
}

/// `fleet.yaml` `spec.clusters[]`: one declared cluster.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterEntry {
    /// `TYPE.NAME`, as its report tag.
    pub name: String,
    /// The environment its agent expects.
    pub environment: String,
    /// The channel (tag) its agent follows.
    pub channel: String,
    /// The full SHA-256 fingerprint of its report key (64 hex digits).
    pub report_key: String,
}

/// `cluster-types/<name>.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterTypeDoc {
    /// Always `drover.dev/v1`.
    pub api_version: String,
    /// Always `ClusterType`.
    pub kind: String,
    /// Name and labels (capabilities).
    pub metadata: Metadata,
    /// Values for every workload.
    #[serde(default)]
    pub values: Value,
    /// Values for one workload each.
    #[serde(default)]
    pub workloads: BTreeMap<String, Value>,
    /// Health rules in CEL for this cluster type's bundles (docs/platform.md).
    #[serde(default)]
    pub health_checks: Vec<drover_proto::health::HealthRule>,
}

/// `environments/<env>.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EnvironmentDoc {
    /// Always `drover.dev/v1`.
    pub api_version: String,
    /// Always `Environment`.
    pub kind: String,
    /// Name.
    pub metadata: Metadata,
    /// Values for every workload.
    #[serde(default)]
    pub values: Value,
    /// Values for one workload each.
    #[serde(default)]
    pub workloads: BTreeMap<String, Value>,
}

/// `overrides/<env>/<cluster-type>.yaml` (`apiVersion`/`kind: Override` optional).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OverrideDoc {
    /// `drover.dev/v1` when given.
    #[serde(default)]
    pub api_version: Option<String>,
    /// `Override` when given.
    #[serde(default)]
    pub kind: Option<String>,
    /// Optional metadata (ignored).
    #[serde(default)]
    pub metadata: Metadata,
    /// Values for every workload.
    #[serde(default)]
    pub values: Value,
    /// Values for one workload each.
    #[serde(default)]
    pub workloads: BTreeMap<String, Value>,
}

/// `workloads/<name>/workload.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadDoc {
    /// Always `drover.dev/v1`.
    pub api_version: String,
    /// Always `Workload`.
    pub kind: String,
    /// Name (optional; must match the directory name).
    #[serde(default)]
    pub metadata: Metadata,
    /// Where and into which namespace it goes.
    pub spec: WorkloadSpec,
    /// Default values.
    #[serde(default)]
    pub values: Value,
}

/// `workload.yaml` `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// The namespace every namespaced object of the workload lives in.
    pub namespace: String,
    /// Environments it is deployed to (default: all).
    #[serde(default)]
    pub environments: Option<Vec<String>>,
    /// Label selector over cluster-type labels (`{}` selects all).
    pub selector: LabelSelector,
    /// Render with a command instead of `templates/` (docs/platform.md, "Bring your own
    /// renderer").
    #[serde(default)]
    pub render: Option<RenderSpec>,
    /// Health rules in CEL for the bundles this workload is in (docs/platform.md).
    #[serde(default)]
    pub health_checks: Vec<drover_proto::health::HealthRule>,
}

/// `workload.yaml` `spec.render`: the command that renders the workload.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RenderSpec {
    /// Program and arguments (no shell), run in the workload's directory.
    pub command: Vec<String>,
    /// How long one run may take (`60s` when absent; humantime: `90s`, `2m`).
    #[serde(default)]
    pub timeout: Option<String>,
    /// A command whose output names the renderer's version (recorded in the bundle config).
    #[serde(default)]
    pub version_command: Option<Vec<String>>,
}
