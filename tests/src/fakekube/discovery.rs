//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}`,
//! `/apis/{group}/{version}`, and the aggregated `APIGroupDiscoveryList` (v2) that
//! kubectl and `kube` ask for with an `Accept` header.

use super::resources::{ResourceInfo, VERBS};
use serde_json::{json, Value};

/// `Content-Type` of an aggregated discovery answer.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the Accept header asks for aggregated discovery v2.
pub fn wants_aggregated(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=APIGroupDiscoveryList") && first.contains("v=v2"))
}

/// `/version` of a server of 1.`minor`.
pub fn version(minor: u8) -> Value {
    json!({
        "major": "1", "minor": minor.to_string(), "gitVersion": format!("v1.{minor}.0-fake"), "gitCommit": "fake", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64",
        "emulationMajor": "1", "emulationMinor": minor.to_string(), "minCompatibilityMajor": "1", "minCompatibilityMinor": (minor - 1).to_string()
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

/// Groups (other than core) with their versions, in first-seen order.
fn groups<'a>(all: &[&'a ResourceInfo]) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in all.iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) => {
                if !vs.contains(&r.version.as_str()) {
                    vs.push(&r.version);
                }
            }
            None => out.push((&r.group, vec![&r.version])),
        }
    }
    out
}

fn group_json(group: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0]})
}

/// `/apis`.
pub fn group_list(all: &[&ResourceInfo]) -> Value {
    let gs: Vec<Value> = groups(all)
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/{group}`, or None when no resource is in that group.
pub fn group(all: &[&ResourceInfo], name: &str) -> Option<Value> {
    groups(all)
        .into_iter()
        .find(|(g, _)| *g == name)
        .map(|(g, vs)| {
            let mut v = group_json(g, &vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        })
}

/// `/api/v1` or `/apis/{group}/{version}`, or None when nothing is served there.
pub fn resource_list(all: &[&ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let rs: Vec<&&ResourceInfo> = all
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for r in rs {
        list.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
            "verbs": VERBS, "shortNames": r.short_names, "storageVersionHash": "fake",
        }));
        if r.status_subresource {
            list.push(json!({"name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]}));
        }
        if r.scalable() {
            list.push(json!({"name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
    )
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let rk = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let mut v = json!({
        "resource": r.plural, "responseKind": rk, "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular, "verbs": VERBS, "shortNames": r.short_names,
    });
    let mut subs = Vec::new();
    if r.status_subresource {
        subs.push(json!({"subresource": "status", "responseKind": rk, "verbs": ["get", "patch", "update"]}));
    }
    if r.scalable() {
        subs.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
    }
    if !subs.is_empty() {
        v["subresources"] = Value::Array(subs);
    }
    v
}

/// Aggregated discovery for `/api` (core = true) or `/apis`.
pub fn aggregated(all: &[&ResourceInfo], core: bool) -> Value {
    let items: Vec<Value> = if core {
        let rs: Vec<Value> = all
            .iter()
            .filter(|r| r.group.is_empty())
            .map(|r| aggregated_resource(r))
            .collect();
        vec![
            json!({"metadata": {"creationTimestamp": null}, "versions": [{"version": "v1", "resources": rs, "freshness": "Current"}]}),
        ]
    } else {
        groups(all)
            .into_iter()
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| {
                        let rs: Vec<Value> = all
                            .iter()
                            .filter(|r| r.group == g && r.version == *v)
                            .map(|r| aggregated_resource(r))
                            .collect();
                        json!({"version": v, "resources": rs, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
            })
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
