//! The schema of a custom resource, from its CustomResourceDefinition's structural schema
//! (`spec.versions[].schema.openAPIV3Schema`) the way the API server derives it:
//! `x-kubernetes-list-type` (`atomic` unless said; `set`; `map` with
//! `x-kubernetes-list-map-keys`), `x-kubernetes-map-type`, `additionalProperties`,
//! `x-kubernetes-preserve-unknown-fields` (shape deduced from the value),
//! `x-kubernetes-int-or-string`, `x-kubernetes-embedded-resource` and `default`s.

use crate::builtin::G;
use crate::schema::{Field, ListKind, Scalar, Schema, Struct, Type};
use serde_json::Value;
use std::sync::Arc;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The schema of `version` of the custom resource `crd` defines (None: no such version).
/// A version without a schema is managed as deduced.
pub fn schema_for(crd: &Value, version: &str) -> Option<Schema> {
    let versions = crd.pointer("/spec/versions")?.as_array()?;
    let v = versions.iter().find(|v| v["name"] == version)?;
    let status_subresource = v.pointer("/subresources/status").is_some();
    let Some(root) = v.pointer("/schema/openAPIV3Schema") else {
        return Some(Schema { status_subresource, ..Schema::deduced() });
    };
    let Type::Struct(s) = object_type(root, true) else {
        return Some(Schema { status_subresource, ..Schema::deduced() });
    };
    Some(Schema { root: Type::Struct(s), status_subresource, builtin: false })
}

/// The apiVersion → (group, served versions) of a CRD, for finding it by a resource's
/// apiVersion and kind.
pub fn defines(crd: &Value, api_version: &str, kind: &str) -> bool {
    let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
    let k = crd.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or_default();
    let Some((g, v)) = api_version.split_once('/') else { return false };
    g == group && k == kind && crd.pointer("/spec/versions").and_then(Value::as_array).is_some_and(|vs| vs.iter().any(|x| x["name"] == v))
}

fn field(name: &str, ty: Type, default: Option<Value>) -> Field {
    Field { name: name.into(), ty, go: G::Ptr, omit: true, default }
}

fn object_type(p: &Value, root: bool) -> Type {
    let mut fields = Vec::new();
    if root || p["x-kubernetes-embedded-resource"] == true {
        fields.push(field("apiVersion", Type::Scalar(Scalar::Str), None));
        fields.push(field("kind", Type::Scalar(Scalar::Str), None));
        fields.push(field("metadata", Type::Builtin(crate::schema::Named::newest(OBJECT_META)), None));
    }
    if let Some(props) = p["properties"].as_object() {
        for (k, sub) in props {
            if (root || p["x-kubernetes-embedded-resource"] == true) && ["apiVersion", "kind", "metadata"].contains(&k.as_str()) {
                continue;
            }
            fields.push(field(k, to_type(sub), sub.get("default").cloned()));
        }
    }
    let preserve = p["x-kubernetes-preserve-unknown-fields"] == true;
    let additional = match &p["additionalProperties"] {
        Value::Object(a) if !a.is_empty() => Some(to_type(&p["additionalProperties"])),
        Value::Bool(true) => Some(Type::Deduced),
        _ => None,
    };
    let atomic = p["x-kubernetes-map-type"] == "atomic";
    if fields.is_empty() && !preserve {
        if let Some(elem) = additional {
            return Type::Map(Arc::new(elem), atomic);
        }
    }
    let rest = if preserve { Some(Type::Deduced) } else { additional };
    Type::Struct(Arc::new(Struct { fields, atomic, rest }))
}

fn to_type(p: &Value) -> Type {
    if p["x-kubernetes-int-or-string"] == true {
        return Type::Scalar(Scalar::IntOrStr);
    }
    match p["type"].as_str() {
        Some("object") => object_type(p, false),
        Some("array") => {
            let elem = Arc::new(to_type(&p["items"]));
            let kind = match p["x-kubernetes-list-type"].as_str() {
                Some("set") => ListKind::Set,
                Some("map") => ListKind::Keys(
                    p["x-kubernetes-list-map-keys"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect(),
                ),
                _ => ListKind::Atomic,
            };
            Type::List(elem, kind)
        }
        Some("string") => Type::Scalar(Scalar::Str),
        Some("integer") => Type::Scalar(Scalar::Int),
        Some("number") => Type::Scalar(Scalar::Float),
        Some("boolean") => Type::Scalar(Scalar::Bool),
        _ if p["x-kubernetes-preserve-unknown-fields"] == true => Type::Deduced,
        _ if p["x-kubernetes-embedded-resource"] == true => object_type(p, false),
        _ => Type::Scalar(Scalar::Untyped),
    }
}
