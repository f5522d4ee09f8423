//! Schemas in structured-merge-diff's own schema language (`types: [{name, map|list|scalar}]`,
//! JSON being YAML): drover-ssa's types written out, and the extract of the published
//! OpenAPI v3 of each Kubernetes minor (`ssa/gen/openapi-smd.json`, already in that
//! language: what kube-openapi's schemaconv makes of the specs) read per minor. The test
//! that holds the built-in table against every supported minor and the oracle that runs
//! the real library (tests/oracle) use both.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::schema::{builtin_struct, ListKind, Scalar, Struct, Type};

/// schemaconv's name of an untyped value owned as one (`RawExtension`).
pub const UNTYPED: &str = "__untyped_atomic_";
/// schemaconv's name of an untyped value whose maps are granular (`JSON`).
pub const DEDUCED: &str = "__untyped_deduced_";

/// Named types by name, each an atom (`{"map": ...}`, `{"list": ...}`, `{"scalar": ...}`).
pub type Types = BTreeMap<String, Value>;

/// schemaconv's two common types.
pub fn common() -> Types {
    let untyped = json!({"namedType": UNTYPED});
    Types::from([
        (UNTYPED.to_string(), json!({"scalar": "untyped", "list": {"elementType": untyped, "elementRelationship": "atomic"}, "map": {"elementType": untyped, "elementRelationship": "atomic"}})),
        (DEDUCED.to_string(), json!({"scalar": "untyped", "list": {"elementType": untyped, "elementRelationship": "atomic"}, "map": {"elementType": {"namedType": DEDUCED}, "elementRelationship": "separable"}})),
    ])
}

/// Whether `minor` is in `ranges` (`"29-32,35"`).
pub fn holds(ranges: &str, minor: u8) -> bool {
    ranges.split(',').any(|part| {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        matches!((lo.parse::<u8>(), hi.parse::<u8>()), (Ok(lo), Ok(hi)) if lo <= minor && minor <= hi)
    })
}

/// The types a server of 1.`minor` has, from the extract (`ssa/gen/openapi-smd.json`),
/// with schemaconv's common types.
pub fn spec_types(extract: &Value, minor: u8) -> Types {
    let mut out = common();
    for row in extract["types"].as_array().into_iter().flatten() {
        if holds(row[1].as_str().unwrap_or_default(), minor) {
            out.insert(row[0].as_str().unwrap_or_default().to_string(), row[2].clone());
        }
    }
    out
}

/// The kinds a server of 1.`minor` serves, from the extract: (apiVersion, kind) → type.
pub fn spec_kinds(extract: &Value, minor: u8) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for row in extract["kinds"].as_array().into_iter().flatten() {
        if holds(row[3].as_str().unwrap_or_default(), minor) {
            let s = |i: usize| row[i].as_str().unwrap_or_default().to_string();
            out.insert((s(0), s(1)), s(2));
        }
    }
    out
}

/// `roots` and every type they reach written out: the references to `roots` and the
/// named types (built-in structs by their schema name, other structs `inlineN`,
/// schemaconv's common types).
pub fn render(roots: &[&Type]) -> (Vec<Value>, Types) {
    let mut w = Writer { types: common(), inline: Vec::new() };
    let tops = roots.iter().map(|r| w.type_ref(r)).collect();
    (tops, w.types)
}

struct Writer {
    types: Types,
    inline: Vec<(usize, String)>,
}

impl Writer {
    fn type_ref(&mut self, t: &Type) -> Value {
        match t {
            Type::Scalar(s) => match s {
                Scalar::Str | Scalar::Bytes => json!({"scalar": "string"}),
                Scalar::Int | Scalar::Float => json!({"scalar": "numeric"}),
                Scalar::Bool => json!({"scalar": "boolean"}),
                Scalar::Quantity | Scalar::Time => json!({"scalar": "untyped"}),
                // What schemaconv makes of a schema without `type` (IntOrString's oneOf).
                Scalar::IntOrStr => json!({"scalar": "untyped", "list": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"}, "map": {"elementType": {"namedType": DEDUCED}}}),
                Scalar::Untyped => json!({"namedType": UNTYPED}),
            },
            Type::Deduced => json!({"namedType": DEDUCED}),
            Type::List(e, k) => {
                let mut l = json!({"elementType": self.type_ref(e)});
                match k {
                    ListKind::Atomic => l["elementRelationship"] = json!("atomic"),
                    ListKind::Set => l["elementRelationship"] = json!("associative"),
                    ListKind::Keys(keys) => {
                        l["elementRelationship"] = json!("associative");
                        l["keys"] = json!(keys.to_vec());
                    }
                }
                json!({"list": l})
            }
            Type::Map(e, atomic) => {
                let mut m = json!({"elementType": self.type_ref(e)});
                if *atomic {
                    m["elementRelationship"] = json!("atomic");
                }
                json!({"map": m})
            }
            Type::Builtin(n) => {
                if !self.types.contains_key(n.name) {
                    self.types.insert(n.name.to_string(), Value::Null);
                    let s = builtin_struct(*n);
                    let atom = self.define(&s);
                    self.types.insert(n.name.to_string(), atom);
                }
                let mut r = json!({"namedType": n.name});
                if let Some(atomic) = n.atomic {
                    r["elementRelationship"] = json!(if atomic { "atomic" } else { "separable" });
                }
                r
            }
            Type::Struct(s) => {
                let key = Arc::as_ptr(s) as usize;
                let name = match self.inline.iter().find(|(k, _)| *k == key) {
                    Some((_, n)) => n.clone(),
                    None => {
                        let n = format!("inline{}", self.inline.len());
                        self.inline.push((key, n.clone()));
                        self.types.insert(n.clone(), Value::Null);
                        let atom = self.define(s);
                        self.types.insert(n.clone(), atom);
                        n
                    }
                };
                json!({"namedType": name})
            }
        }
    }

    fn define(&mut self, s: &Struct) -> Value {
        let fields: Vec<Value> = s
            .fields
            .iter()
            .map(|f| {
                let mut v = json!({"name": f.name, "type": self.type_ref(&f.ty)});
                if let Some(d) = &f.default {
                    v["default"] = d.clone();
                }
                v
            })
            .collect();
        let mut m = json!({"fields": fields});
        if let Some(rest) = &s.rest {
            m["elementType"] = self.type_ref(rest);
        }
        if s.atomic {
            m["elementRelationship"] = json!("atomic");
        }
        json!({"map": m})
    }
}

/// `types` as a schema document of the structured-merge-diff Debian packages (v4.1.2),
/// which has no field-level relationship override (`{namedType, elementRelationship}`,
/// v4.2): each overridden use of a type becomes a named copy of it (`T{separable}`) with
/// that relationship, which is what a later library resolves it to.
pub fn for_v4_1(types: &Types) -> Value {
    let mut out = types.clone();
    let mut copies = BTreeMap::new();
    for atom in out.values_mut() {
        expand(atom, types, &mut copies);
    }
    out.extend(copies);
    json!({"types": out.into_iter().map(|(name, atom)| {
        let mut t = atom;
        t["name"] = json!(name);
        t
    }).collect::<Vec<_>>()})
}

fn expand(v: &mut Value, types: &Types, copies: &mut Types) {
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(name)), Some(Value::String(rel))) = (m.get("namedType").cloned(), m.get("elementRelationship").cloned()) {
                let copy = format!("{name}{{{rel}}}");
                if !copies.contains_key(&copy) {
                    let mut atom = types.get(&name).cloned().unwrap_or(Value::Null);
                    if let Some(map) = atom.get_mut("map") {
                        map["elementRelationship"] = json!(rel);
                    }
                    copies.insert(copy.clone(), Value::Null);
                    expand(&mut atom, types, copies);
                    copies.insert(copy.clone(), atom);
                }
                m.remove("elementRelationship");
                m.insert("namedType".into(), json!(copy));
                return;
            }
            for child in m.values_mut() {
                expand(child, types, copies);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| expand(c, types, copies)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_overrides() {
        assert!(holds("29-32,35", 30) && holds("29-32,35", 35) && !holds("29-32,35", 33));
        let mut types = common();
        types.insert("Ref".into(), json!({"map": {"fields": [{"name": "uid", "type": {"scalar": "string"}}], "elementRelationship": "atomic"}}));
        types.insert("Spec".into(), json!({"map": {"fields": [{"name": "claimRef", "type": {"namedType": "Ref", "elementRelationship": "separable"}}]}}));
        let doc = for_v4_1(&types);
        let all = doc["types"].as_array().unwrap();
        let spec = all.iter().find(|t| t["name"] == "Spec").unwrap();
        assert_eq!(spec["map"]["fields"][0]["type"], json!({"namedType": "Ref{separable}"}));
        let copy = all.iter().find(|t| t["name"] == "Ref{separable}").unwrap();
        assert_eq!(copy["map"]["elementRelationship"], "separable");
    }
}
