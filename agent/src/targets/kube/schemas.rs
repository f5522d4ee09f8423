//! The schema each kind of a group is managed with, for the resync's compare
//! ([`super::compare`]), from the first of:
//! 1. drover-ssa's built-in table as the server's Kubernetes minor has it (learned from
//!    `/version` by the target's probe; the table holds each supported minor's answer);
//! 2. for a custom resource, its CRD — the bundle's own copy when the bundle defines the
//!    kind, else the cluster's (one GET per CRD per group);
//! 3. the server's own OpenAPI v3 of the kind's group-version
//!    (`/openapi/v3/apis/GROUP/VERSION`: an aggregated API, a group newer than the table),
//!    read once per group-version and at most [`OPENAPI_LIMIT`] bytes, converted by
//!    schemaconv's rules ([`drover_ssa::openapi`]) and kept as schemas, not as the document;
//! 4. deduced (every map granular, every list atomic: a keyed list then never compares
//!    equal, which costs a write, never a miss).
//!
//! Which one each kind got is kept for `status` ([`KubeTarget::schema_sources`]).

use std::collections::HashMap;
use std::sync::Arc;

use drover_ssa::{crd, Schema};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;

use super::cluster::KubeTarget;
use super::discovery::{ResolveError, Resolved};
use crate::targets::{ApplyRequest, OrderGroup, SchemaSource};

/// Schema per (apiVersion, kind).
pub(super) type Schemas = HashMap<(String, String), Schema>;

/// The largest OpenAPI document of one group-version read (the biggest a release
/// publishes, core/v1, is about 2 MB).
pub const OPENAPI_LIMIT: usize = 16 << 20;

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
        let minor = t.minor();
        let (schema, source) = match Schema::builtin_at(minor, &key.0, &key.1) {
            Some(s) => (s, SchemaSource::Builtin { minor: drover_ssa::builtin::known_minor(minor) }),
            None => other(t, req, &key.0, &key.1, resolved.get(&key)).await,
        };
        t.note_schema(&key.0, &key.1, source);
        out.insert(key, schema);
    }
    out
}

async fn other(t: &KubeTarget, req: &ApplyRequest, api_version: &str, kind: &str, res: Option<&Result<Resolved, ResolveError>>) -> (Schema, SchemaSource) {
    let version = api_version.split_once('/').map(|(_, v)| v).unwrap_or(api_version);
    let in_bundle = req.groups.iter().flat_map(|g| &g.objects).filter(|o| o.id.kind == "CustomResourceDefinition").find_map(|o| {
        let v = o.value().ok()?;
        crd::defines(&v, api_version, kind).then_some(v)
    });
    if let Some(s) = in_bundle.and_then(|c| crd::schema_for(&c, version)) {
        return (s, SchemaSource::BundleCrd);
    }
    let Some(Ok(res)) = res else { return (Schema::deduced(), SchemaSource::Deduced) };
    if let Some(s) = from_cluster(t, &res.resource).await.and_then(|c| crd::schema_for(&c, version)) {
        return (s, SchemaSource::ClusterCrd);
    }
    if let Some(s) = from_openapi(t, api_version, kind).await {
        return (s, SchemaSource::ServerOpenapi);
    }
    (Schema::deduced(), SchemaSource::Deduced)
}

async fn from_cluster(t: &KubeTarget, res: &ApiResource) -> Option<Value> {
    if !res.group.contains('.') {
        // The core group, apps, batch…: a CRD's group has a dot.
        return None;
    }
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

/// The schema of `kind` from the server's OpenAPI document of `api_version`, read once.
async fn from_openapi(t: &KubeTarget, api_version: &str, kind: &str) -> Option<Schema> {
    let mut cache = t.openapi.lock().await;
    if !cache.contains_key(api_version) {
        let kinds = match read_openapi(t, api_version).await {
            // Parsed and converted off the async thread (core/v1's document is ~2 MB).
            Some(bytes) => {
                let (api_version, minor) = (api_version.to_string(), t.minor());
                crate::offload::off_thread(move || serde_json::from_slice::<Value>(&bytes).ok().map(|doc| Arc::new(kinds_of(&doc, &api_version, minor)))).await
            }
            None => None,
        };
        cache.insert(api_version.to_string(), kinds);
    }
    cache.get(api_version)?.as_ref()?.get(kind).cloned()
}

/// Every kind `doc` defines in `api_version`, converted.
fn kinds_of(doc: &Value, api_version: &str, minor: u8) -> HashMap<String, Schema> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let mut out = HashMap::new();
    for s in doc.pointer("/components/schemas").and_then(Value::as_object).into_iter().flat_map(|m| m.values()) {
        for gvk in s["x-kubernetes-group-version-kind"].as_array().into_iter().flatten() {
            if gvk["group"].as_str().unwrap_or("") == group && gvk["version"] == version {
                if let Some(kind) = gvk["kind"].as_str().filter(|k| !out.contains_key(*k)) {
                    if let Some(schema) = drover_ssa::openapi::schema_for(doc, api_version, kind, minor) {
                        out.insert(kind.to_string(), schema);
                    }
                }
            }
        }
    }
    out
}

/// `/openapi/v3/apis/GROUP/VERSION` (or `/openapi/v3/api/v1`), at most [`OPENAPI_LIMIT`]
/// bytes, unparsed; None when the server has none or it cannot be read.
async fn read_openapi(t: &KubeTarget, api_version: &str) -> Option<Vec<u8>> {
    let path = match api_version.split_once('/') {
        Some((g, v)) => format!("/openapi/v3/apis/{g}/{v}"),
        None => format!("/openapi/v3/api/{api_version}"),
    };
    let req = http::Request::get(&path).header(http::header::ACCEPT, "application/json").body(Vec::new()).ok()?;
    let resp = match t.client.send(req.map(kube::client::Body::from)).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%path, error = %e, "reading the server's OpenAPI failed; comparing without it");
            return None;
        }
    };
    if !resp.status().is_success() {
        tracing::debug!(%path, status = %resp.status(), "the server has no OpenAPI for this group-version");
        return None;
    }
    let mut body = http_body_util::BodyDataStream::new(resp.into_body());
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.ok()?;
        if bytes.len() + chunk.len() > OPENAPI_LIMIT {
            tracing::warn!(%path, limit = OPENAPI_LIMIT, "the server's OpenAPI document is larger than drover reads; comparing without it");
            return None;
        }
        bytes.extend_from_slice(&chunk);
    }
    Some(bytes)
}
