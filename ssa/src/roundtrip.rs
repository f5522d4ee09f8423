//! What the API server's decode and encode do to an object (Kubernetes 1.30): a built-in
//! object goes through its Go types, so an omitted `omitempty` zero value disappears, a
//! struct-valued field is always written (`resources: {}`, a zero time as `null`),
//! quantities come back canonical and a Secret's `stringData` lands in `data`; a custom
//! resource loses `null`s its schema does not allow. Fields the schema does not declare
//! are reported (the caller refuses or drops them, as field validation says).

use crate::quantity;
use crate::schema::{Atom, Field, GoShape, Scalar, Schema, Type};
use base64::Engine;
use serde_json::{Map, Value};

/// Round-trips `object` in place; returns the paths of undeclared fields it removed.
pub fn apply(schema: &Schema, object: &mut Value) -> Vec<String> {
    if schema.builtin && object["kind"] == "Secret" && object["apiVersion"] == "v1" {
        secret_string_data(object);
    }
    let mut unknown = Vec::new();
    walk(&schema.root, object, schema.builtin, &mut String::new(), &mut unknown);
    unknown
}

fn secret_string_data(object: &mut Value) {
    let Some(o) = object.as_object_mut() else { return };
    let Some(Value::Object(sd)) = o.remove("stringData") else { return };
    let data = o.entry("data").or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    for (k, v) in sd {
        let s = v.as_str().unwrap_or_default();
        let enc = base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        data.as_object_mut().expect("map").insert(k, Value::String(enc));
    }
}

fn walk(ty: &Type, value: &mut Value, go: bool, path: &mut String, unknown: &mut Vec<String>) {
    match ty.atom(Some(value)) {
        Atom::Scalar(Scalar::Quantity) => canonical_quantity(value),
        Atom::Scalar(_) => {}
        Atom::List(elem, _) => {
            for (i, v) in value.as_array_mut().into_iter().flatten().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(&elem, v, go, path, unknown);
                path.truncate(len);
            }
        }
        Atom::Map(m) => {
            let Some(o) = value.as_object_mut() else { return };
            let strukt = m.strukt.clone();
            o.retain(|k, v| {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                let keep = if !m.allows(k) {
                    unknown.push(path.clone());
                    false
                } else if v.is_null() && !go {
                    false
                } else {
                    walk(&m.child(k).0, v, go, path, unknown);
                    match strukt.as_ref().and_then(|s| s.field(k)).filter(|_| go) {
                        Some(f) => match go_field(f, std::mem::take(v)) {
                            Some(out) => {
                                *v = out;
                                true
                            }
                            None => false,
                        },
                        None => true,
                    }
                };
                path.truncate(len);
                keep
            });
            if go {
                if let Some(s) = &m.strukt {
                    for f in &s.fields {
                        if !o.contains_key(&f.name) {
                            if let Some(z) = go_absent(f) {
                                o.insert(f.name.clone(), z);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn canonical_quantity(value: &mut Value) {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return,
    };
    if let Some(c) = quantity::canonical(&text) {
        *value = Value::String(c);
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(_) => false,
    }
}

fn is_struct(ty: &Type) -> bool {
    matches!(ty, Type::Struct(_) | Type::Builtin(_))
}

/// A present field as the Go encoder writes it back (None: omitted).
fn go_field(f: &Field, v: Value) -> Option<Value> {
    match f.go {
        GoShape::Ptr => match v {
            Value::Null => (!f.omit).then_some(Value::Null),
            v => Some(v),
        },
        GoShape::Slice | GoShape::Map => {
            let empty = v.is_null() || v.as_array().is_some_and(Vec::is_empty) || v.as_object().is_some_and(Map::is_empty);
            match (empty, f.omit) {
                (true, true) => None,
                (true, false) if v.is_null() => Some(Value::Null),
                _ => Some(v),
            }
        }
        GoShape::Val if is_struct(&f.ty) => Some(if v.is_null() { Value::Object(Map::new()) } else { v }),
        GoShape::Val => {
            if matches!(f.ty, Type::Scalar(Scalar::Time)) {
                return Some(v);
            }
            let v = if v.is_null() { zero(&f.ty) } else { v };
            (!(f.omit && is_zero(&v))).then_some(v)
        }
    }
}

/// What the Go encoder writes for a field the object does not have (None: nothing).
fn go_absent(f: &Field) -> Option<Value> {
    match f.go {
        GoShape::Ptr | GoShape::Slice | GoShape::Map => (!f.omit).then_some(Value::Null),
        GoShape::Val if is_struct(&f.ty) => {
            let mut v = Value::Object(Map::new());
            walk(&f.ty, &mut v, true, &mut String::new(), &mut Vec::new());
            Some(v)
        }
        GoShape::Val if matches!(f.ty, Type::Scalar(Scalar::Time)) => Some(Value::Null),
        GoShape::Val => (!f.omit).then(|| zero(&f.ty)),
    }
}

fn zero(ty: &Type) -> Value {
    match ty {
        Type::Scalar(Scalar::Int | Scalar::Float | Scalar::IntOrStr) => Value::from(0),
        Type::Scalar(Scalar::Bool) => Value::Bool(false),
        Type::Scalar(Scalar::Quantity) => Value::String("0".into()),
        Type::Scalar(Scalar::Time | Scalar::Untyped) | Type::Deduced => Value::Null,
        Type::Scalar(_) => Value::String(String::new()),
        Type::List(..) | Type::Map(..) => Value::Null,
        Type::Struct(_) | Type::Builtin(_) => Value::Object(Map::new()),
    }
}
