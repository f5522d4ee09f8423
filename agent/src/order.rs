//! The one home of object ordering (as fluxcd/pkg `ssa/sort.go`): the order objects are
//! applied in ([`ApplyStage`], docs/design.md §5, used by the plan stage) and the order they are
//! deleted in ([`DeletePhase`], used by the prune of every target that deletes).

use drover_proto::object::ObjectRef;

/// Apply order. The plan stage groups objects by it; groups are applied in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApplyStage {
    /// Namespaces and CustomResourceDefinitions (wait for CRDs to be Established after).
    Definitions,
    /// RBAC (ClusterRole/Binding, Role/Binding) and other cluster-scoped objects.
    ClusterRbac,
    /// ServiceAccounts.
    ServiceAccounts,
    /// ConfigMaps and Secrets.
    Config,
    /// Every other object (workloads, services, namespaced RBAC, custom resources).
    Workloads,
    /// Admission webhooks and policies, last so they never block the rest.
    Webhooks,
}

/// The apply stage of an object.
pub fn apply_stage(id: &ObjectRef) -> ApplyStage {
    match id.kind.as_str() {
        "Namespace" | "CustomResourceDefinition" => ApplyStage::Definitions,
        "MutatingWebhookConfiguration"
        | "ValidatingWebhookConfiguration"
        | "ValidatingAdmissionPolicy"
        | "ValidatingAdmissionPolicyBinding"
        | "MutatingAdmissionPolicy"
        | "MutatingAdmissionPolicyBinding" => ApplyStage::Webhooks,
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => ApplyStage::ClusterRbac,
        "ServiceAccount" => ApplyStage::ServiceAccounts,
        "ConfigMap" | "Secret" => ApplyStage::Config,
        _ if id.namespace.is_none() => ApplyStage::ClusterRbac,
        _ => ApplyStage::Workloads,
    }
}

/// Delete order: custom resources and other objects first, then the
/// CustomResourceDefinitions, then Namespaces (deleting those takes everything inside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeletePhase {
    /// Every object that is neither a CRD nor a Namespace.
    Objects,
    /// CustomResourceDefinitions (`apiextensions.k8s.io`).
    Definitions,
    /// Namespaces (core group).
    Namespaces,
}

impl DeletePhase {
    /// All phases in delete order.
    pub const ALL: [DeletePhase; 3] = [DeletePhase::Objects, DeletePhase::Definitions, DeletePhase::Namespaces];
}

/// The delete phase of an object.
pub fn delete_phase(id: &ObjectRef) -> DeletePhase {
    match (id.group(), id.kind.as_str()) {
        ("", "Namespace") => DeletePhase::Namespaces,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => DeletePhase::Definitions,
        _ => DeletePhase::Objects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(api_version: &str, kind: &str, ns: Option<&str>) -> ObjectRef {
        ObjectRef { api_version: api_version.into(), kind: kind.into(), namespace: ns.map(Into::into), name: "x".into() }
    }

    #[test]
    fn apply_order() {
        let mut ids = [
            id("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", None),
            id("apps/v1", "Deployment", Some("a")),
            id("v1", "ConfigMap", Some("a")),
            id("v1", "ServiceAccount", Some("a")),
            id("rbac.authorization.k8s.io/v1", "RoleBinding", Some("a")),
            id("storage.k8s.io/v1", "StorageClass", None),
            id("apiextensions.k8s.io/v1", "CustomResourceDefinition", None),
            id("v1", "Namespace", None),
        ];
        ids.sort_by_key(apply_stage);
        let kinds: Vec<&str> = ids.iter().map(|i| i.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "Namespace",
                "RoleBinding",
                "StorageClass",
                "ServiceAccount",
                "ConfigMap",
                "Deployment",
                "ValidatingWebhookConfiguration"
            ]
        );
        assert_eq!(apply_stage(&id("example.com/v1", "Widget", Some("a"))), ApplyStage::Workloads);
        assert_eq!(apply_stage(&id("example.com/v1", "ClusterWidget", None)), ApplyStage::ClusterRbac);
    }

    #[test]
    fn delete_order() {
        let mut ids = [
            id("v1", "Namespace", None),
            id("apiextensions.k8s.io/v1", "CustomResourceDefinition", None),
            id("example.com/v1", "Widget", Some("a")),
            id("apps/v1", "Deployment", Some("a")),
        ];
        ids.sort_by_key(delete_phase);
        let kinds: Vec<&str> = ids.iter().map(|i| i.kind.as_str()).collect();
        assert_eq!(kinds, ["Widget", "Deployment", "CustomResourceDefinition", "Namespace"]);
        // Only the real CRD and Namespace kinds go late: a look-alike in another group does not.
        assert_eq!(delete_phase(&id("example.com/v1", "Namespace", Some("a"))), DeletePhase::Objects);
        assert_eq!(delete_phase(&id("example.com/v1", "CustomResourceDefinition", None)), DeletePhase::Objects);
    }
}
