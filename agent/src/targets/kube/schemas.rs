//! The schema each kind of a group is managed with, for the resync's compare
//! ([`super::compare`]): a built-in kind's from drover-ssa's table; a custom resource's
//! from its CRD — the bundle's own copy when the bundle defines the kind, else the
//! cluster's (one GET per CRD per group), else deduced (every map granular, every list
//! atomic: a keyed list then never compares equal, which costs a write, never a miss).

use std::collections::HashMap;

use drover_ssa::{crd, Schema};
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;

use super::cluster::KubeTarget;
use super::discovery::{ResolveError, Resolved};
use crate::targets::{ApplyRequest, OrderGroup};

/// Schema per (apiVersion, kind).
pub(super) type Schemas = HashMap<(String, String), Schema>;

/// The schema of (`api_version`, `kind`) in `schemas`, deduced when it has none.
pub(super) fn of(schemas: &Schemas, api_version: &str, kind: &str) -> Schema {
    schemas.get(&(api_version.to_string(), kind.to_string())).cloned().unwrap_or_else(Schema::deduced)
}

/// The schemas of the kinds of `group`.
pub(super) async fn for_group(
    t: &KubeTarget,
    req: &ApplyRequest,
    group: &OrderGroup,
    resolved: &HashMap<(String, String), Result<Resolved, ResolveError>>,
) -> Schemas {
    let mut out = Schemas::new();
    for o in &group.objects {
        let key = (o.id.api_version.clone(), o.id.kind.clone());
        if out.contains_key(&key) {
            continue;
        }
        let schema = match Schema::builtin(&key.0, &key.1) {
            Some(s) => s,
            None => custom(t, req, &key.0, &key.1, resolved.get(&key)).await,
        };
        out.insert(key, schema);
    }
    out
}

async fn custom(t: &KubeTarget, req: &ApplyRequest, api_version: &str, kind: &str, res: Option<&Result<Resolved, ResolveError>>) -> Schema {
    let version = api_version.split_once('/').map(|(_, v)| v).unwrap_or(api_version);
    let in_bundle = req.groups.iter().flat_map(|g| &g.objects).filter(|o| o.id.kind == "CustomResourceDefinition").find_map(|o| {
        let v = o.value().ok()?;
        crd::defines(&v, api_version, kind).then_some(v)
    });
    let crd_obj = match in_bundle {
        Some(v) => Some(v),
        None => match res {
            Some(Ok(r)) => from_cluster(t, &r.resource).await,
            _ => None,
        },
    };
    crd_obj.and_then(|c| crd::schema_for(&c, version)).unwrap_or_else(Schema::deduced)
}

async fn from_cluster(t: &KubeTarget, res: &ApiResource) -> Option<Value> {
    let crds = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(t.client.clone(), &crds);
    match api.get_opt(&format!("{}.{}", res.plural, res.group)).await {
        Ok(o) => o.and_then(|o| serde_json::to_value(o).ok()),
        Err(e) => {
            tracing::debug!(kind = %res.kind, error = %e, "reading the CRD for the compare failed; comparing without its schema");
            None
        }
    }
}
