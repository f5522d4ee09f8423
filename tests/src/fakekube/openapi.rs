//! A minimal OpenAPI v3 surface: enough for kubectl to see that every resource's PATCH
//! accepts `fieldValidation` (so it validates on the server and does not need schemas).
//! No schemas are served: `kubectl explain` and client-side validation do not work.

use super::resources::ResourceInfo;
use serde_json::{json, Map, Value};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group/version.
pub fn root(all: &[&ResourceInfo]) -> Value {
    let mut paths = Map::new();
    for r in all {
        let p = gv_path(&r.group, &r.version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=fake")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`, or None.
pub fn group_version(all: &[&ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    for r in all
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let base = gv_path(group, version);
        let p = if r.namespaced {
            format!("/{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("/{base}/{}/{{name}}", r.plural)
        };
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
            {"name": "force", "in": "query", "schema": {"type": "boolean"}}
        ]);
        paths.insert(p, json!({
            "get": {"operationId": format!("read{}", r.kind), "x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "get", "responses": {"200": {"description": "OK"}}},
            "patch": {"operationId": format!("patch{}", r.kind), "parameters": params, "x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch", "responses": {"200": {"description": "OK"}}}
        }));
    }
    if paths.is_empty() {
        return None;
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes (FAKE)", "version": "v1.34.0"}, "paths": paths, "components": {"schemas": {}}}),
    )
}
