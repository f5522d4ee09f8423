//! The schema of a kind from the API server's own OpenAPI v3 document of its group-version
//! (`/openapi/v3/apis/GROUP/VERSION`), for kinds the built-in table lacks (an aggregated
//! API, a group newer than the table): kube-openapi schemaconv's rules, what the server
//! that serves the kind builds its field management from.
//!
//! - `type: object`: declared properties, `additionalProperties` as the type of other keys
//!   (deduced when the object has no properties or preserves unknown fields),
//!   `x-kubernetes-map-type` for atomicity; without properties it is a map;
//! - `type: array`: `x-kubernetes-list-type` and `-list-map-keys`, else the patch strategy
//!   and merge key, else atomic;
//! - scalars as scalars; no `type`: an untyped value (deduced, or atomic with
//!   `x-kubernetes-map-type: atomic`);
//! - a `$ref` (or a one-element `allOf` of one): the named type, with the referring
//!   property's `x-kubernetes-map-type` overriding its atomicity; a type the built-in table
//!   has (`ObjectMeta`, `LabelSelector`, …) is the table's, `Quantity`, `Time`,
//!   `IntOrString` and `RawExtension` are what schemaconv makes of them, and a type that
//!   refers back to itself is deduced below the first level (a tree here, a graph there).
//!
//! `status` is a subresource when the document has a `…/status` path for the kind.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::builtin::{self, G};
use crate::schema::{Field, ListKind, Named, Scalar, Schema, Struct, Type};

/// The schema of `kind` in `api_version` from `doc` (an OpenAPI v3 document of that
/// group-version) on a server of 1.`minor`; None when the document does not define it.
pub fn schema_for(doc: &Value, api_version: &str, kind: &str, minor: u8) -> Option<Schema> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let defs = doc.pointer("/components/schemas")?.as_object()?;
    // A schema lists its kinds (an array); an operation names its one kind (an object).
    let is_kind = |s: &Value| {
        let gvk = &s["x-kubernetes-group-version-kind"];
        let one = |g: &Value| g["group"].as_str().unwrap_or("") == group && g["version"] == version && g["kind"] == kind;
        match gvk.as_array() {
            Some(all) => all.iter().any(one),
            None => gvk.is_object() && one(gvk),
        }
    };
    let (name, _) = defs.iter().find(|(_, s)| is_kind(s) && s.pointer("/properties/metadata").is_some())?;
    let mut c = Convert { defs, minor: builtin::known_minor(minor), done: HashMap::new(), building: Vec::new() };
    let root = c.named(name, None);
    let status_subresource = doc["paths"].as_object().into_iter().flatten().any(|(p, ops)| {
        p.ends_with("/status") && ops.as_object().into_iter().flatten().any(|(_, op)| is_kind(op))
    });
    Some(Schema { root, status_subresource, builtin: false })
}

struct Convert<'a> {
    defs: &'a Map<String, Value>,
    minor: u8,
    done: HashMap<String, Type>,
    building: Vec<String>,
}

fn ref_name(s: &Value) -> Option<&str> {
    let r = s["$ref"].as_str().or_else(|| match s["allOf"].as_array() {
        Some(a) if a.len() == 1 => a[0]["$ref"].as_str(),
        _ => None,
    })?;
    r.rsplit('/').next()
}

fn map_type(s: &Value) -> Option<bool> {
    match s["x-kubernetes-map-type"].as_str() {
        Some("atomic") => Some(true),
        Some("granular") => Some(false),
        _ => None,
    }
}

fn list_kind(s: &Value) -> ListKind {
    let keys = |v: &Value| -> Arc<[String]> { v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect() };
    match s["x-kubernetes-list-type"].as_str() {
        Some("set") => ListKind::Set,
        Some("map") => ListKind::Keys(keys(&s["x-kubernetes-list-map-keys"])),
        Some(_) => ListKind::Atomic,
        None => match (s["x-kubernetes-patch-strategy"].as_str(), s["x-kubernetes-patch-merge-key"].as_str()) {
            (Some("merge" | "merge,retainKeys"), Some(k)) => ListKind::Keys(Arc::from([k.to_string()])),
            (Some("merge" | "merge,retainKeys"), None) => ListKind::Set,
            _ => ListKind::Atomic,
        },
    }
}

impl Convert<'_> {
    /// The type a reference to `name` stands for (`atomic`: the referring property's
    /// override).
    fn named(&mut self, name: &str, atomic: Option<bool>) -> Type {
        match name {
            "io.k8s.apimachinery.pkg.api.resource.Quantity" => return Type::Scalar(Scalar::Quantity),
            "io.k8s.apimachinery.pkg.runtime.RawExtension" => return Type::Scalar(Scalar::Untyped),
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => return Type::Scalar(Scalar::IntOrStr),
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time" | "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => return Type::Scalar(Scalar::Time),
            _ => {}
        }
        if let Some(t) = builtin::find(name) {
            return Type::Builtin(Named { name: t.name(), minor: self.minor, atomic });
        }
        let ty = match self.done.get(name) {
            Some(t) => t.clone(),
            None if self.building.iter().any(|b| b == name) => return Type::Deduced,
            None => {
                let Some(def) = self.defs.get(name) else { return Type::Deduced };
                self.building.push(name.to_string());
                let t = self.convert(def, false);
                self.building.pop();
                self.done.insert(name.to_string(), t.clone());
                t
            }
        };
        match (atomic, ty) {
            (Some(a), Type::Struct(s)) if s.atomic != a => Type::Struct(Arc::new(Struct { atomic: a, ..(*s).clone() })),
            (Some(a), Type::Map(e, _)) => Type::Map(e, a),
            (_, t) => t,
        }
    }

    fn reference(&mut self, s: &Value, preserve: bool) -> Type {
        match ref_name(s) {
            Some(name) => self.named(name, map_type(s)),
            None => self.convert(s, preserve),
        }
    }

    fn convert(&mut self, s: &Value, preserve: bool) -> Type {
        let preserve = preserve || s["x-kubernetes-preserve-unknown-fields"] == true;
        match s["type"].as_str().unwrap_or("") {
            "object" => self.object(s, preserve),
            "array" => {
                let elem = match s.get("items") {
                    Some(i) => self.reference(i, preserve),
                    None => Type::Scalar(Scalar::Untyped),
                };
                Type::List(Arc::new(elem), list_kind(s))
            }
            "integer" => Type::Scalar(Scalar::Int),
            "number" => Type::Scalar(Scalar::Float),
            "boolean" => Type::Scalar(Scalar::Bool),
            "string" => match s["format"].as_str() {
                Some("date-time") => Type::Scalar(Scalar::Time),
                Some("int-or-string") => Type::Scalar(Scalar::IntOrStr),
                _ => Type::Scalar(Scalar::Str),
            },
            _ if s.get("properties").is_some() => self.object(s, preserve),
            // Untyped: maps granular unless the schema says atomic.
            _ if map_type(s) == Some(true) => Type::Scalar(Scalar::Untyped),
            _ => Type::Deduced,
        }
    }

    fn object(&mut self, s: &Value, preserve: bool) -> Type {
        let atomic = map_type(s) == Some(true);
        let props = s["properties"].as_object();
        let rest = match s.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Type::Deduced),
            Some(Value::Bool(false)) => None,
            Some(a) => Some(self.reference(a, preserve)),
            None if preserve || props.is_none_or(Map::is_empty) => Some(Type::Deduced),
            None => None,
        };
        let Some(props) = props.filter(|p| !p.is_empty()) else {
            return Type::Map(Arc::new(rest.unwrap_or(Type::Deduced)), atomic);
        };
        let fields = props
            .iter()
            .map(|(name, p)| Field { name: name.clone(), ty: self.reference(p, preserve), go: G::Ptr, omit: true, default: p.get("default").cloned() })
            .collect();
        Type::Struct(Arc::new(Struct { fields, atomic, rest }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_served_kind_takes_the_servers_schema() {
        let doc = json!({
            "paths": {"/apis/metrics.example.com/v1/namespaces/{namespace}/gauges/{name}/status": {"patch": {"x-kubernetes-group-version-kind": {"group": "metrics.example.com", "version": "v1", "kind": "Gauge"}}}},
            "components": {"schemas": {
                "com.example.metrics.v1.Gauge": {"type": "object", "x-kubernetes-group-version-kind": [{"group": "metrics.example.com", "version": "v1", "kind": "Gauge"}],
                    "properties": {"metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
                        "spec": {"$ref": "#/components/schemas/com.example.metrics.v1.GaugeSpec"}}},
                "com.example.metrics.v1.GaugeSpec": {"type": "object", "properties": {
                    "targets": {"type": "array", "items": {"$ref": "#/components/schemas/com.example.metrics.v1.Target"}, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
                    "selector": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
                    "owner": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.ObjectReference"}], "x-kubernetes-map-type": "granular"},
                    "limit": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                    "next": {"$ref": "#/components/schemas/com.example.metrics.v1.GaugeSpec"}}},
                "com.example.metrics.v1.Target": {"type": "object", "properties": {"name": {"type": "string", "default": "main"}, "weight": {"type": "integer"}}},
            }}
        });
        let s = schema_for(&doc, "metrics.example.com/v1", "Gauge", 34).unwrap();
        assert!(s.status_subresource && !s.builtin);
        let spec = s.root.strukt().unwrap().field("spec").unwrap().ty.strukt().unwrap();
        match &spec.field("targets").unwrap().ty {
            Type::List(elem, ListKind::Keys(k)) => {
                assert_eq!(&k[..], ["name".to_string()]);
                assert_eq!(elem.strukt().unwrap().field("name").unwrap().default, Some(json!("main")));
            }
            t => panic!("targets: {t:?}"),
        }
        assert!(matches!(spec.field("selector").unwrap().ty, Type::Map(_, true)));
        assert!(matches!(spec.field("owner").unwrap().ty, Type::Builtin(Named { atomic: Some(false), .. })), "ObjectReference is the table's, made granular");
        assert!(matches!(spec.field("limit").unwrap().ty, Type::Scalar(Scalar::Quantity)));
        assert!(matches!(spec.field("next").unwrap().ty, Type::Deduced), "a type that refers back to itself is cut");
        assert!(schema_for(&doc, "metrics.example.com/v1", "Other", 34).is_none());
    }
}
