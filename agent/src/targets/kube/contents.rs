//! What deleting a Namespace would take with it: every object inside, found the way the
//! namespace controller finds them (discovery of every namespaced kind the server serves
//! with `list` and `delete`, then one LIST per kind in the namespace), leaving out
//!
//! - objects with `ownerReferences`: derived from another object (Pods of a ReplicaSet,
//!   EndpointSlices of a Service), they go with their owner;
//! - Events;
//! - what every namespace holds: ServiceAccount `default`, ConfigMap `kube-root-ca.crt`,
//!   Secrets of type `kubernetes.io/service-account-token`;
//! - Endpoints named like a Service of the namespace (the controller's copy of it).
//!
//! The pipeline's prune stage holds a Namespace back when anything listed here is not in
//! the source's inventory, and counts the rest in the prune safety valve. The LISTs use the
//! target's identity (`--service-account`): a kind it may not list makes the contents
//! unknown, and the Namespace is kept.

use std::collections::BTreeSet;

use drover_proto::object::ObjectRef;
use futures::stream::{self, StreamExt};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{verbs, ApiResource, Discovery, Scope};

use super::cluster::KubeTarget;
use super::retry::with_retry;
use crate::targets::NamespaceContents;

/// The contents of each Namespace in `namespaces`.
pub(super) async fn namespace_contents(t: &KubeTarget, namespaces: &[ObjectRef]) -> Vec<NamespaceContents> {
    if namespaces.is_empty() {
        return Vec::new();
    }
    let kinds = match with_retry(&t.opts.retry, || Discovery::new(t.client.clone()).run()).await {
        Ok(d) => namespaced_kinds(&d),
        Err(f) => {
            let error = Some(format!("discovery of the served kinds failed: {f}"));
            return namespaces.iter().map(|n| NamespaceContents { namespace: n.clone(), objects: Vec::new(), error: error.clone() }).collect();
        }
    };
    let mut out = Vec::new();
    for ns in namespaces {
        out.push(contents_of(t, &kinds, ns).await);
    }
    out
}

fn namespaced_kinds(d: &Discovery) -> Vec<ApiResource> {
    d.groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(_, caps)| caps.scope == Scope::Namespaced && caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::DELETE))
        .filter(|(ar, _)| ar.kind != "Event")
        .map(|(ar, _)| ar)
        .collect()
}

async fn contents_of(t: &KubeTarget, kinds: &[ApiResource], ns: &ObjectRef) -> NamespaceContents {
    let params = ListParams::default();
    let params = &params;
    let lists = kinds.iter().map(|ar| async move {
        let api: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), &ns.name, ar);
        (ar, with_retry(&t.opts.retry, || api.list(params)).await)
    });
    let results: Vec<_> = stream::iter(lists).buffer_unordered(t.opts.concurrency.max(1)).collect().await;
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for (ar, result) in results {
        match result {
            Ok(list) => objects.extend(list.items.iter().filter(|o| !derived_or_default(ar, o)).filter_map(|o| {
                Some(ObjectRef { api_version: ar.api_version.clone(), kind: ar.kind.clone(), namespace: Some(ns.name.clone()), name: o.metadata.name.clone()? })
            })),
            Err(f) if f.not_found() => {}
            Err(f) => errors.push(format!("listing {} in {}: {f}", ar.plural, ns.name)),
        }
    }
    let services: BTreeSet<String> = objects.iter().filter(|o| o.kind == "Service" && o.group().is_empty()).map(|o| o.name.clone()).collect();
    objects.retain(|o| !(o.kind == "Endpoints" && o.group().is_empty() && services.contains(&o.name)));
    objects.sort();
    errors.sort();
    NamespaceContents { namespace: ns.clone(), objects, error: (!errors.is_empty()).then(|| errors.join("; ")) }
}

/// True for objects that go with something else, or that every namespace has.
fn derived_or_default(ar: &ApiResource, o: &DynamicObject) -> bool {
    if o.metadata.owner_references.as_ref().is_some_and(|r| !r.is_empty()) {
        return true;
    }
    let name = o.metadata.name.as_deref().unwrap_or_default();
    match (ar.group.as_str(), ar.kind.as_str()) {
        ("", "ServiceAccount") => name == "default",
        ("", "ConfigMap") => name == "kube-root-ca.crt",
        ("", "Secret") => o.data.get("type").and_then(|v| v.as_str()) == Some("kubernetes.io/service-account-token"),
        _ => false,
    }
}
