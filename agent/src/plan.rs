//! Stage 5, plan: the policy (allowed namespaces, denied kinds), then the objects grouped
//! in apply order ([`crate::order`]: Namespaces + CRDs, RBAC, ServiceAccounts,
//! ConfigMaps/Secrets, the rest, webhooks last). The output is the [`ApplyRequest`] a
//! target receives.

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_proto::object::ObjectRef;

use crate::order::{apply_stage, ApplyStage};
use crate::stage::StageError;
use crate::targets::{ApplyRequest, OrderGroup, PlannedObject};
use crate::unpack::Unpacked;

/// What bundles may contain.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Namespaces objects may live in (and Namespaces that may be created); empty = any.
    pub allowed_namespaces: Vec<String>,
    /// Kinds that are refused.
    pub denied_kinds: Vec<String>,
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
        let p = Policy { allowed_namespaces: vec!["a".into()], denied_kinds: vec!["ClusterRoleBinding".into()] };
        assert!(check(&p, &id("ConfigMap", Some("a"))).is_ok());
        assert!(check(&p, &id("ConfigMap", Some("b"))).is_err());
        assert!(check(&p, &id("ClusterRoleBinding", None)).is_err());
    }
}
