//! Stage 5, plan: the policy, object by object (allowed namespaces and cluster-scoped kinds, denied kinds;
//! which kinds are cluster-scoped is learnt from the built-in table, the bundle's own CRDs
//! and the target, see [`cluster_kinds`]), then the objects grouped in apply order ([`crate::order`]: Namespaces + CRDs, RBAC,
//! ServiceAccounts, ConfigMaps/Secrets, the rest, webhooks last). The output is the
//! [`ApplyRequest`] a target receives.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_proto::bundle::parse_single_object;
use drover_proto::object::{ObjectRef, BUILTIN_CLUSTER_SCOPED};

use crate::order::{apply_stage, ApplyStage};
use crate::stage::StageError;
use crate::targets::{Action, ApplyRequest, ObjectOutcome, OrderGroup, PlannedObject, Target};
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

/// Kinds `(group, kind)` known to be cluster-scoped beyond the built-in table.
pub type ClusterKinds = BTreeSet<(String, String)>;

/// True when `id` is cluster-scoped: it has no namespace, or its kind is cluster-scoped
/// (built-in table, or `known`). A namespace given to such an object is dropped when it is
/// applied (the API server ignores it), so it does not confine the object.
pub fn cluster_scoped(id: &ObjectRef, known: &ClusterKinds) -> bool {
    id.namespace.is_none()
        || BUILTIN_CLUSTER_SCOPED.contains(&id.kind.as_str())
        || known.contains(&(id.group().to_string(), id.kind.clone()))
}

/// With an allow list: which kinds of the bundle's objects that claim a namespace are in
/// fact cluster-scoped — from the bundle's own CRDs (`spec.scope: Cluster`) and from the target ([`Target::cluster_scoped`]: the kube
/// target asks discovery). Without an allow list nothing is looked up. Fails closed: when
/// the target cannot be asked, the attempt fails (and is retried) rather than guess.
pub async fn cluster_kinds(target: &dyn Target, u: &Unpacked, policy: &Policy) -> Result<ClusterKinds, StageError> {
    let mut known = ClusterKinds::new();
    if policy.allowed_namespaces.is_empty() {
        return Ok(known);
    }
    for o in u.objects.iter().filter(|o| o.id.kind == "CustomResourceDefinition") {
        let Ok(value) = parse_single_object(&o.yaml) else { continue };
        let spec = &value["spec"];
        if let (Some("Cluster"), Some(group), Some(kind)) = (spec["scope"].as_str(), spec["group"].as_str(), spec["names"]["kind"].as_str()) {
            known.insert((group.to_string(), kind.to_string()));
        }
    }
    let unsure: BTreeMap<(&str, &str), &ObjectRef> =
        u.objects.iter().filter(|o| !cluster_scoped(&o.id, &known)).map(|o| ((o.id.api_version.as_str(), o.id.kind.as_str()), &o.id)).collect();
    for ((api_version, kind), id) in unsure {
        let scoped = target.cluster_scoped(api_version, kind).await.map_err(|e| {
            StageError::Failed(format!("cannot tell whether {kind} in {api_version} is cluster-scoped (--allow-namespace needs to know): {e}"))
        })?;
        if scoped == Some(true) {
            known.insert((id.group().to_string(), id.kind.clone()));
        }
    }
    Ok(known)
}

/// Checks one object against the policy (`known`: from [`cluster_kinds`]).
pub fn check(policy: &Policy, known: &ClusterKinds, id: &ObjectRef) -> Result<(), String> {
    if policy.denied_kinds.iter().any(|k| k == &id.kind) {
        return Err(format!("{id}: kind {} is denied by this agent's policy (--deny-kind)", id.kind));
    }
    let allowed = &policy.allowed_namespaces;
    if allowed.is_empty() || (id.kind == "Namespace" && allowed.contains(&id.name)) {
        return Ok(());
    }
    let list = allowed.join(", ");
    if cluster_scoped(id, known) {
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

/// Checks each object against the policy (`known`: from [`cluster_kinds`]) and orders
/// the allowed ones. An object the policy refuses is left out and returned as a
/// [`Action::Refused`] outcome naming it and the rule: the rest of the bundle is applied
/// (one tenant's stray object never blocks its other objects), the refused ones never
/// reach the target.
pub fn plan(u: Unpacked, policy: &Policy, known: &ClusterKinds, source: &str, field_manager: &str) -> Result<(ApplyRequest, Vec<ObjectOutcome>), StageError> {
    // Each group's list is allocated once at its final size (grown by doubling, 10,000
    // objects briefly took twice their room).
    let mut sizes: BTreeMap<ApplyStage, usize> = BTreeMap::new();
    for o in &u.objects {
        *sizes.entry(apply_stage(&o.id)).or_default() += 1;
    }
    let mut groups: BTreeMap<ApplyStage, Vec<PlannedObject>> = sizes.into_iter().map(|(s, n)| (s, Vec::with_capacity(n))).collect();
    let mut refused = Vec::new();
    for o in u.objects {
        if let Err(m) = check(policy, known, &o.id) {
            refused.push(ObjectOutcome::with(o.id, Action::Refused, format!("refused by policy: {m}")));
            continue;
        }
        let po = PlannedObject { id: o.id, path: o.path, yaml: Arc::new(o.yaml) };
        groups.entry(apply_stage(&po.id)).or_default().push(po);
    }
    groups.retain(|_, objects| !objects.is_empty());
    let req = ApplyRequest {
        source: source.to_string(),
        digest: u.digest,
        sequence: u.sequence,
        field_manager: field_manager.to_string(),
        groups: groups.into_iter().map(|(stage, objects)| OrderGroup { stage, objects }).collect(),
        health: Default::default(),
    };
    Ok((req, refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str, ns: Option<&str>) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: kind.into(), namespace: ns.map(Into::into), name: "x".into() }
    }

    #[test]
    fn policy() {
        let k = ClusterKinds::from([("example.com".to_string(), "Gadget".to_string())]);
        let check = |p: &Policy, id: &ObjectRef| check(p, &k, id);
        let p = Policy { allowed_namespaces: vec!["a".into()], denied_kinds: vec!["Secret".into()], ..Default::default() };
        assert!(check(&p, &id("ConfigMap", Some("a"))).is_ok());
        assert!(check(&p, &id("ConfigMap", Some("b"))).is_err());
        assert!(check(&p, &id("Secret", Some("a"))).is_err());
        let crb = check(&p, &id("ClusterRoleBinding", None)).unwrap_err();
        assert!(crb.contains("--allow-cluster-kind ClusterRoleBinding"), "{crb}");
        assert!(check(&p, &id("ClusterRoleBinding", Some("a"))).is_err(), "a namespace does not confine a cluster-scoped kind");
        assert!(check(&p, &id("Gadget", None)).is_err());
        let gadget = ObjectRef { api_version: "example.com/v1".into(), kind: "Gadget".into(), namespace: Some("a".into()), name: "g".into() };
        assert!(check(&p, &gadget).is_err(), "a kind known to be cluster-scoped is not confined by a namespace");
        assert!(check(&p, &ObjectRef { api_version: "other.com/v1".into(), ..gadget }).is_ok());
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
