//! The resource types the FAKE API server serves: a fixed table of built-in resources
//! (those the Kubernetes minor it plays serves, by drover-ssa's table of the published
//! specs) plus the resources that Established CustomResourceDefinitions add.

use serde_json::Value;

/// One served resource in one group/version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group (`""` for the core group).
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource name used in URLs, e.g. `deployments`.
    pub plural: String,
    /// Singular name, e.g. `deployment`.
    pub singular: String,
    /// Namespaced (true) or cluster-scoped (false).
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Whether it has a `status` subresource.
    pub status_subresource: bool,
    /// Whether a CRD defines it.
    pub custom: bool,
}

impl ResourceInfo {
    /// Whether it has a `scale` subresource (`autoscaling/v1` Scale over `spec.replicas`):
    /// the built-in Deployments, StatefulSets and ReplicaSets.
    pub fn scalable(&self) -> bool {
        !self.custom && self.group == "apps" && matches!(self.plural.as_str(), "deployments" | "statefulsets" | "replicasets")
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `Deployment.apps` (or `ConfigMap` in the core group): the group kind that 422
    /// messages name.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// `deployments.apps` (or `configmaps` in the core group), as error messages name it.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// The verbs every resource of this fake supports.
pub const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One built-in resource: (group, version, kind, plural, namespaced, short names, status subresource).
type BuiltinRow = (&'static str, &'static str, &'static str, &'static str, bool, &'static [&'static str], bool);

/// Table of built-in resources (see [`BuiltinRow`]).
const BUILTIN: &[BuiltinRow] = &[
    ("", "v1", "Namespace", "namespaces", false, &["ns"], true),
    ("", "v1", "ConfigMap", "configmaps", true, &["cm"], false),
    ("", "v1", "Secret", "secrets", true, &[], false),
    (
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
    ),
    ("", "v1", "Service", "services", true, &["svc"], true),
    ("", "v1", "Pod", "pods", true, &["po"], true),
    (
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        true,
        &["quota"],
        true,
    ),
    (
        "",
        "v1",
        "LimitRange",
        "limitranges",
        true,
        &["limits"],
        false,
    ),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
        true,
    ),
    (
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        false,
        &["pv"],
        true,
    ),
    ("", "v1", "Endpoints", "endpoints", true, &["ep"], false),
    ("", "v1", "Event", "events", true, &["ev"], false),
    ("", "v1", "Node", "nodes", false, &["no"], true),
    // The same objects as core/v1 Events, converted (events.rs).
    ("events.k8s.io", "v1", "Event", "events", true, &["ev"], false),
    (
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
    ),
    (
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        true,
        &["sts"],
        true,
    ),
    ("apps", "v1", "DaemonSet", "daemonsets", true, &["ds"], true),
    (
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        true,
    ),
    (
        "apps",
        "v1",
        "ControllerRevision",
        "controllerrevisions",
        true,
        &[],
        false,
    ),
    ("batch", "v1", "Job", "jobs", true, &[], true),
    ("batch", "v1", "CronJob", "cronjobs", true, &["cj"], true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
        &["netpol"],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        true,
        &["ing"],
        true,
    ),
    (
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        false,
        &[],
        false,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        true,
    ),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
        &["hpa"],
        true,
    ),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
        &["sc"],
        false,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
        &["pc"],
        false,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        true,
        &[],
        false,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        true,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
        &[],
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
        &[],
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
        &[],
        true,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
        &[],
        false,
    ),
    (
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        false,
        &[],
        true,
    ),
    // Dynamic resource allocation, GA in 1.34.
    ("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", false, &[], false),
    ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", true, &[], true),
    ("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", true, &[], false),
    ("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", false, &[], false),
];

/// The built-in resources a server of 1.`minor` serves.
pub fn builtin(minor: u8) -> Vec<ResourceInfo> {
    BUILTIN
        .iter()
        .filter(|(g, v, k, ..)| {
            let av = if g.is_empty() { v.to_string() } else { format!("{g}/{v}") };
            drover_ssa::builtin::kind_type(minor, &av, k).is_some()
        })
        .map(|(g, v, k, p, ns, short, st)| ResourceInfo {
            group: g.to_string(),
            version: v.to_string(),
            kind: k.to_string(),
            plural: p.to_string(),
            singular: k.to_lowercase(),
            namespaced: *ns,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            status_subresource: *st,
            custom: false,
        })
        .collect()
}

/// The resources a CRD object defines (one per served version).
pub fn from_crd(crd: &Value) -> Vec<ResourceInfo> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Vec::new();
    }
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let short_names: Vec<String> = names["shortNames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    spec["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["served"].as_bool().unwrap_or(true))
                .filter_map(|v| {
                    Some(ResourceInfo {
                        group: group.to_string(),
                        version: v["name"].as_str()?.to_string(),
                        kind: kind.to_string(),
                        plural: plural.to_string(),
                        singular: singular.clone(),
                        namespaced,
                        short_names: short_names.clone(),
                        status_subresource: v["subresources"]["status"].is_object(),
                        custom: true,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}
