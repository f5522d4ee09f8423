//! Object identity (apiVersion, kind, namespace, name) and its path inside a bundle.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The identity of one Kubernetes-style object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `group/version` or `version` for the core group.
    pub api_version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectRef {
    /// The API group (`""` for core).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
    }

    /// The API version without group.
    pub fn version(&self) -> &str {
        self.api_version.rsplit_once('/').map(|(_, v)| v).unwrap_or(&self.api_version)
    }

    /// Path inside the bundle: `manifests/{namespace|_cluster}/{Kind}.{group|core}.{name}.yaml`.
    pub fn bundle_path(&self) -> String {
        let group = match self.group() {
            "" => "core",
            g => g,
        };
        format!(
            "manifests/{}/{}.{}.{}.yaml",
            self.namespace.as_deref().unwrap_or("_cluster"),
            self.kind,
            group,
            self.name
        )
    }

    /// Identity ignoring the version (two versions of one object are the same object).
    pub fn key(&self) -> (String, String, Option<String>, String) {
        (self.group().to_string(), self.kind.clone(), self.namespace.clone(), self.name.clone())
    }

    /// Reads the identity of a parsed object (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`).
    pub fn from_value(v: &serde_json::Value) -> Result<Self, String> {
        let s = |p: &str| v.pointer(p).and_then(|x| x.as_str()).filter(|x| !x.is_empty()).map(str::to_string);
        let api_version = s("/apiVersion").ok_or("missing apiVersion")?;
        let kind = s("/kind").ok_or("missing kind")?;
        let name = s("/metadata/name").ok_or("missing metadata.name")?;
        Ok(ObjectRef { api_version, kind, namespace: s("/metadata/namespace"), name })
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{} ({})", self.kind, ns, self.name, self.api_version),
            None => write!(f, "{} {} ({})", self.kind, self.name, self.api_version),
        }
    }
}

/// Kinds that are cluster-scoped in every Kubernetes cluster (the built-in table).
pub const BUILTIN_CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "StorageClass",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "PriorityClass",
    "RuntimeClass",
    "IngressClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "APIService",
    "CertificateSigningRequest",
    "FlowSchema",
    "PriorityLevelConfiguration",
    "ComponentStatus",
    "IPAddress",
    "ServiceCIDR",
    "DeviceClass",
];

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn paths() {
        let o = ObjectRef { api_version: "apps/v1".into(), kind: "Deployment".into(), namespace: Some("web".into()), name: "api".into() };
        assert_eq!(o.bundle_path(), "manifests/web/Deployment.apps.api.yaml");
        let o = ObjectRef { api_version: "v1".into(), kind: "Namespace".into(), namespace: None, name: "web".into() };
        assert_eq!(o.bundle_path(), "manifests/_cluster/Namespace.core.web.yaml");
        assert_eq!(o.group(), "");
    }
}
