//! The OpenAPI v3 surface, as a real API server serves it: `/openapi/v3` lists every
//! group-version, `/openapi/v3/api/v1` and `/openapi/v3/apis/{group}/{version}` hold each
//! served kind's paths (the PATCH parameters kubectl looks for `fieldValidation` in, a
//! `…/status` path for a status subresource) and its schema in `components.schemas`,
//! with the extensions structured-merge-diff is built from (`x-kubernetes-list-type`,
//! `-list-map-keys`, `-map-type` on types and on referring properties,
//! `x-kubernetes-preserve-unknown-fields`, defaults) and the patch strategy kubectl's
//! client-side apply reads (`x-kubernetes-patch-strategy: merge` and `-patch-merge-key`:
//! the first key, as this fake's strategic merge patch merges):
//! - built-in kinds: drover-ssa's table as the minor this fake plays has it, written out
//!   (which the published specs hold it to: ssa/tests/openapi.rs);
//! - custom resources: their CRD's `openAPIV3Schema` for that version;
//! - aggregated APIs registered with `POST /fake/apis`: the document they came with.
//!
//! Descriptions, validation and formats beyond what field management needs are left out.

use super::resources::ResourceInfo;
use super::store::State;
use drover_ssa::schema::{builtin_struct, ListKind, Named, Scalar, Struct, Type};
use drover_ssa::Schema;
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
        paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=fake")}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`, or None.
pub fn group_version(state: &State, group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut w = Writer { defs: Map::new() };
    for r in state.all_resources().filter(|r| r.group == group && r.version == version) {
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
        paths.insert(p.clone(), json!({
            "get": {"operationId": format!("read{}", r.kind), "x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "get", "responses": {"200": {"description": "OK"}}},
            "patch": {"operationId": format!("patch{}", r.kind), "parameters": params, "x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch", "responses": {"200": {"description": "OK"}}}
        }));
        if r.status_subresource {
            paths.insert(format!("{p}/status"), json!({
                "patch": {"operationId": format!("patch{}Status", r.kind), "parameters": params, "x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch", "responses": {"200": {"description": "OK"}}}
            }));
        }
        w.kind(state, r, gvk);
    }
    if paths.is_empty() {
        return None;
    }
    let info = format!("v1.{}.0", state.settings.minor);
    Some(json!({"openapi": "3.0.0", "info": {"title": "Kubernetes (FAKE)", "version": info}, "paths": paths, "components": {"schemas": w.defs}}))
}

/// The schemas of a document, by name.
struct Writer {
    defs: Map<String, Value>,
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

impl Writer {
    /// The definition of kind `r` (and every type it reaches).
    fn kind(&mut self, state: &State, r: &ResourceInfo, gvk: Value) {
        if let Some(doc) = state.aggregated_openapi(r) {
            for (name, def) in doc["components"]["schemas"].as_object().into_iter().flatten() {
                self.defs.insert(name.clone(), def.clone());
            }
            return;
        }
        let schema: Schema = state.schema(r);
        let name = match &schema.root {
            Type::Builtin(n) => n.name.to_string(),
            _ => {
                let reversed: Vec<&str> = r.group.split('.').rev().collect();
                format!("{}.{}.{}", reversed.join("."), r.version, r.kind)
            }
        };
        let def = match &schema.root {
            Type::Builtin(n) => self.strukt(&builtin_struct(*n)),
            root => self.schema(root),
        };
        let mut def = def;
        def["x-kubernetes-group-version-kind"] = json!([gvk]);
        if let Some(props) = def["properties"].as_object_mut() {
            props.insert("metadata".into(), json!({"allOf": [{"$ref": format!("#/components/schemas/{META}")}], "default": {}}));
            props.entry("apiVersion").or_insert(json!({"type": "string"}));
            props.entry("kind").or_insert(json!({"type": "string"}));
        }
        self.named(Named::newest(META));
        self.defs.insert(name, def);
    }

    /// A reference to a built-in type, defining it on first use.
    fn named(&mut self, n: Named) -> Value {
        if !self.defs.contains_key(n.name) {
            self.defs.insert(n.name.to_string(), Value::Null);
            let def = self.strukt(&builtin_struct(n));
            self.defs.insert(n.name.to_string(), def);
        }
        let mut r = json!({"allOf": [{"$ref": format!("#/components/schemas/{}", n.name)}]});
        if let Some(atomic) = n.atomic {
            r["x-kubernetes-map-type"] = json!(if atomic { "atomic" } else { "granular" });
        }
        r
    }

    fn strukt(&mut self, s: &Struct) -> Value {
        let mut props = Map::new();
        for f in &s.fields {
            let mut p = self.schema(&f.ty);
            if let Some(d) = &f.default {
                p["default"] = d.clone();
            }
            props.insert(f.name.clone(), p);
        }
        let mut def = json!({"type": "object", "properties": props});
        if let Some(rest) = &s.rest {
            match rest {
                Type::Deduced => def["x-kubernetes-preserve-unknown-fields"] = json!(true),
                t => def["additionalProperties"] = self.schema(t),
            }
        }
        if s.atomic {
            def["x-kubernetes-map-type"] = json!("atomic");
        }
        def
    }

    fn schema(&mut self, t: &Type) -> Value {
        let special = |n: &str| json!({"$ref": format!("#/components/schemas/io.k8s.apimachinery.pkg.{n}")});
        match t {
            Type::Scalar(Scalar::Str) => json!({"type": "string"}),
            Type::Scalar(Scalar::Bytes) => json!({"type": "string", "format": "byte"}),
            Type::Scalar(Scalar::Int) => json!({"type": "integer", "format": "int64"}),
            Type::Scalar(Scalar::Float) => json!({"type": "number", "format": "double"}),
            Type::Scalar(Scalar::Bool) => json!({"type": "boolean"}),
            Type::Scalar(Scalar::Quantity) => {
                self.defs.entry("io.k8s.apimachinery.pkg.api.resource.Quantity").or_insert(json!({"oneOf": [{"type": "string"}, {"type": "number"}]}));
                special("api.resource.Quantity")
            }
            Type::Scalar(Scalar::IntOrStr) => {
                self.defs.entry("io.k8s.apimachinery.pkg.util.intstr.IntOrString").or_insert(json!({"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]}));
                special("util.intstr.IntOrString")
            }
            Type::Scalar(Scalar::Time) => {
                self.defs.entry("io.k8s.apimachinery.pkg.apis.meta.v1.Time").or_insert(json!({"type": "string", "format": "date-time"}));
                special("apis.meta.v1.Time")
            }
            Type::Scalar(Scalar::Untyped) => {
                self.defs.entry("io.k8s.apimachinery.pkg.runtime.RawExtension").or_insert(json!({"type": "object"}));
                special("runtime.RawExtension")
            }
            Type::Deduced => json!({}),
            Type::List(e, k) => {
                let mut l = json!({"type": "array", "items": self.schema(e)});
                // The patch strategy kubectl's client-side apply reads: what this fake's
                // strategic merge patch does (keyed lists merge by their first key, sets merge).
                match k {
                    ListKind::Atomic => l["x-kubernetes-list-type"] = json!("atomic"),
                    ListKind::Set => {
                        l["x-kubernetes-list-type"] = json!("set");
                        l["x-kubernetes-patch-strategy"] = json!("merge");
                    }
                    ListKind::Keys(keys) => {
                        l["x-kubernetes-list-type"] = json!("map");
                        l["x-kubernetes-list-map-keys"] = json!(keys.to_vec());
                        l["x-kubernetes-patch-strategy"] = json!("merge");
                        l["x-kubernetes-patch-merge-key"] = json!(keys[0]);
                    }
                }
                l
            }
            Type::Map(e, atomic) => {
                let mut m = json!({"type": "object", "additionalProperties": self.schema(e)});
                if *atomic {
                    m["x-kubernetes-map-type"] = json!("atomic");
                }
                m
            }
            Type::Builtin(n) => self.named(*n),
            Type::Struct(s) => self.strukt(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::rollout::RolloutMode;
    use super::super::store::Settings;

    fn state(minor: u8) -> State {
        State::new(Settings { rollout_default: RolloutMode::Ready, rollout_overrides: Default::default(), rollout_delay: Default::default(), crd_delay: Default::default(), minor })
    }

    /// What the fake serves reads back, by drover-ssa's schemaconv, to the table it was
    /// written from: claimRef granular, keyed ports, atomic `data`.
    #[test]
    fn served_schemas_read_back_as_the_table() {
        let now = state(34);
        let doc = group_version(&now, "", "v1").unwrap();
        let pv = drover_ssa::openapi::schema_for(&doc, "v1", "PersistentVolume", 34).unwrap();
        assert!(pv.status_subresource);
        let spec = pv.root.strukt().unwrap().field("spec").unwrap().ty.clone();
        let claim = spec.strukt().unwrap().field("claimRef").unwrap().ty.clone();
        assert!(matches!(claim, Type::Builtin(Named { atomic: Some(false), .. })), "{claim:?}");
        let apps = group_version(&now, "apps", "v1").unwrap();
        let cr = drover_ssa::openapi::schema_for(&apps, "apps/v1", "ControllerRevision", 34).unwrap();
        assert!(matches!(cr.root.strukt().unwrap().field("data").unwrap().ty, Type::Scalar(Scalar::Untyped)));
        assert!(group_version(&now, "resource.k8s.io", "v1").is_some(), "1.34 serves resource.k8s.io/v1");
        let old = state(33);
        assert!(group_version(&old, "resource.k8s.io", "v1").is_none(), "1.33 does not");
    }
}
