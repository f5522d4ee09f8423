//! Stage 5, plan: the policy (allowed namespaces, denied kinds) and the apply order
//! (DESIGN §5): Namespaces + CRDs, RBAC, ServiceAccounts, ConfigMaps/Secrets, the rest,
//! webhooks last. The output is the [`ApplyRequest`] a target receives.

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_proto::object::ObjectRef;

use crate::stage::StageError;
use crate::targets::{ApplyRequest, OrderGroup, PlannedObject, Stage};
use crate::unpack::Unpacked;

/// What bundles may contain.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Namespaces objects may live in (and Namespaces that may be created); empty = any.
    pub allowed_namespaces: Vec<String>,
    /// Kinds that are refused.
    pub denied_kinds: Vec<String>,
}

/// The apply stage of an object.
pub fn stage_of(id: &ObjectRef) -> Stage {
    match id.kind.as_str() {
        "Namespace" | "CustomResourceDefinition" => Stage::Definitions,
        "MutatingWebhookConfiguration"
        | "ValidatingWebhookConfiguration"
        | "ValidatingAdmissionPolicy"
        | "ValidatingAdmissionPolicyBinding"
        | "MutatingAdmissionPolicy"
        | "MutatingAdmissionPolicyBinding" => Stage::Webhooks,
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => Stage::ClusterRbac,
        "ServiceAccount" => Stage::ServiceAccounts,
        "ConfigMap" | "Secret" => Stage::Config,
        _ if id.namespace.is_none() => Stage::ClusterRbac,
        _ => Stage::Workloads,
    }
}

/// Checks one object against the policy.
pub fn check(policy: &Policy, id: &ObjectRef) -> Result<(), String> {
    if policy.denied_kinds.iter().any(|k| k == &id.kind) {
        return Err(format!("{id}: kind {} is denied by this agent's policy", id.kind));
    }
    if !policy.allowed_namespaces.is_empty() {
        let ns = match (&id.namespace, id.kind.as_str()) {
            (Some(ns), _) => Some(ns),
            (None, "Namespace") => Some(&id.name),
            _ => None,
        };
        if let Some(ns) = ns {
            if !policy.allowed_namespaces.contains(ns) {
                return Err(format!("{id}: namespace {ns:?} is not allowed (allowed: {})", policy.allowed_namespaces.join(", ")));
            }
        }
    }
    Ok(())
}

/// Checks the policy and orders the objects.
pub fn plan(u: Unpacked, policy: &Policy, source: &str, field_manager: &str) -> Result<ApplyRequest, StageError> {
    let mut groups: BTreeMap<Stage, Vec<PlannedObject>> = BTreeMap::new();
    for o in u.objects {
        check(policy, &o.id).map_err(|m| StageError::Rejected { reason: "policy", message: format!("{}: {m}", u.digest) })?;
        let po = PlannedObject { id: o.id, path: o.path, yaml: Arc::new(o.yaml), value: Arc::new(o.value) };
        groups.entry(stage_of(&po.id)).or_default().push(po);
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
    fn order_and_policy() {
        assert_eq!(stage_of(&id("Namespace", None)), Stage::Definitions);
        assert_eq!(stage_of(&id("ValidatingWebhookConfiguration", None)), Stage::Webhooks);
        assert_eq!(stage_of(&id("Deployment", Some("a"))), Stage::Workloads);
        assert!(Stage::Definitions < Stage::Webhooks);
        let p = Policy { allowed_namespaces: vec!["a".into()], denied_kinds: vec!["ClusterRoleBinding".into()] };
        assert!(check(&p, &id("ConfigMap", Some("a"))).is_ok());
        assert!(check(&p, &id("ConfigMap", Some("b"))).is_err());
        assert!(check(&p, &id("ClusterRoleBinding", None)).is_err());
    }
}
