//! Stage 5, plan: the policy (allowed namespaces and cluster-scoped kinds, denied kinds),
//! then the objects grouped in apply order ([`crate::order`]: Namespaces + CRDs, RBAC,
//! ServiceAccounts, ConfigMaps/Secrets, the rest, webhooks last). The output is the
//! [`ApplyRequest`] a target receives.

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_proto::object::{ObjectRef, BUILTIN_CLUSTER_SCOPED};

use crate::order::{apply_stage, ApplyStage};
use crate::stage::StageError;
use crate::targets::{ApplyRequest, OrderGroup, PlannedObject};
use crate::unpack::Unpacked;

/// What bundles may contain.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Namespaces objects may live in (and Namespaces that may be created); empty = any.
    /// When set, cluster-scoped objects are refused unless their kind is in
    /// `allowed_cluster_kinds`.
    pub allowed_namespaces: Vec<String>,
    /// Cluster-scoped kinds allowed despite `allowed_namespaces`.
    pub allowed_cluster_kinds: Vec<String>,
    /// Kinds that are refused.
    pub denied_kinds: Vec<String>,
}

/// True when `id` is cluster-scoped: it has no namespace, or its kind is cluster-scoped in
/// every cluster (a namespace given to such an object is dropped by the API server, so
/// it does not confine it).
pub fn cluster_scoped(id: &ObjectRef) -> bool {
    id.namespace.is_none() || BUILTIN_CLUSTER_SCOPED.contains(&id.kind.as_str())
}

/// Checks one object against the policy.
pub fn check(policy: &Policy, id: &ObjectRef) -> Result<(), String> {
    if policy.denied_kinds.iter().any(|k| k == &id.kind) {
        return Err(format!("{id}: kind {} is denied by this agent's policy (--deny-kind)", id.kind));
    }
    let allowed = &policy.allowed_namespaces;
    if allowed.is_empty() || (id.kind == "Namespace" && allowed.contains(&id.name)) {
        return Ok(());
    }
    let list = allowed.join(", ");
    if cluster_scoped(id) {
        if policy.allowed_cluster_kinds.contains(&id.kind) {
            return Ok(());
        }
        if id.kind == "Namespace" {
            return Err(format!("{id}: namespace {:?} is not allowed (--allow-namespace: {list})", id.name));
        }
        return Err(format!(
            "{id}: cluster-scoped objects are refused while --allow-namespace limits this agent to {list}; to allow this kind, pass --allow-cluster-kind {} (config allowedClusterKinds)",
            id.kind
        ));
    }
    match &id.namespace {
        Some(ns) if !allowed.contains(ns) => Err(format!("{id}: namespace {ns:?} is not allowed (--allow-namespace: {list})")),
        _ => Ok(()),
    }
}

/// Checks the policy and orders the objects.
pub fn plan(u: Unpacked, policy: &Policy, source: &str, field_manager: &str) -> Result<ApplyRequest, StageError> {
    let mut groups: BTreeMap<ApplyStage, Vec<PlannedObject>> = BTreeMap::new();
    for o in u.objects {
        check(policy, &o.id).map_err(|m| StageError::Rejected { reason: "policy", message: format!("{}: {m}", u.digest) })?;
        let po = PlannedObject { id: o.id, path: o.path, yaml: Arc::new(o.yaml), value: Arc::new(o.value) };
        groups.entry(apply_stage(&po.id)).or_default().push(po);
    }
    Ok(ApplyRequest {
        source: source.to_string(),
        digest: u.digest,
        sequence: u.config.sequence,
        field_manager: field_manager.to_string(),
        groups: groups.into_iter().map(|(stage, objects)| OrderGroup { stage, objects }).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str, ns: Option<&str>) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: kind.into(), namespace: ns.map(Into::into), name: "x".into() }
    }

    #[test]
    fn policy() {
        let p = Policy { allowed_namespaces: vec!["a".into()], denied_kinds: vec!["Secret".into()], ..Default::default() };
        assert!(check(&p, &id("ConfigMap", Some("a"))).is_ok());
        assert!(check(&p, &id("ConfigMap", Some("b"))).is_err());
        assert!(check(&p, &id("Secret", Some("a"))).is_err());
        let crb = check(&p, &id("ClusterRoleBinding", None)).unwrap_err();
        assert!(crb.contains("--allow-cluster-kind ClusterRoleBinding"), "{crb}");
        assert!(check(&p, &id("ClusterRoleBinding", Some("a"))).is_err(), "a namespace does not confine a cluster-scoped kind");
        assert!(check(&p, &id("Gadget", None)).is_err());
        let ns = |name: &str| ObjectRef { api_version: "v1".into(), kind: "Namespace".into(), namespace: None, name: name.into() };
        assert!(check(&p, &ns("a")).is_ok());
        assert!(check(&p, &ns("b")).is_err());
        let p = Policy { allowed_cluster_kinds: vec!["ClusterRoleBinding".into()], ..p };
        assert!(check(&p, &id("ClusterRoleBinding", None)).is_ok());
        assert!(check(&p, &id("ClusterRole", None)).is_err());
        let p = Policy { allowed_cluster_kinds: vec!["ConfigMap".into()], ..p };
        assert!(check(&p, &id("ConfigMap", Some("b"))).is_err(), "a namespaced kind is not freed by --allow-cluster-kind");
        let open = Policy::default();
        assert!(check(&open, &id("ClusterRoleBinding", None)).is_ok());
    }
}
