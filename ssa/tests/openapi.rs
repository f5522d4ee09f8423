//! The built-in table against the published OpenAPI v3 of every supported Kubernetes
//! minor (`ssa/gen/openapi-smd.json`, what kube-openapi's schemaconv makes of each
//! release's `api/openapi-spec/v3`, written by `ssa/gen/openapi.py`): for each minor, the
//! kinds the table serves are the kinds that release serves, and every type they reach
//! means the same to structured-merge-diff in both — scalars, list kinds and keys, the
//! defaults of key fields, map and struct atomicity (field-level overrides included),
//! element types, untyped and deduced values, and the set of fields.
//!
//! `every_supported_minor_agrees` is the check; `planted_mismatches_are_caught` shows it
//! fails when the table says otherwise (a keyed list made atomic, claimRef made atomic,
//! `JSONSchemaProps.items` made a leaf).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use drover_ssa::builtin::{self, KINDS};
use drover_ssa::schema::Schema;
use drover_ssa::smd::{self, Types};
use serde_json::{json, Value};

fn extract() -> Value {
    serde_json::from_str(include_str!("../gen/openapi-smd.json")).unwrap()
}

/// The table on a server of 1.`minor`: its kinds (apiVersion, kind) with their root
/// references, and every type they reach.
fn table(minor: u8) -> (BTreeMap<(String, String), Value>, Types) {
    let schemas: Vec<((String, String), Schema)> = KINDS
        .iter()
        .filter_map(|(av, k, _, _)| Schema::builtin_at(minor, av.get(), k.get()).map(|s| ((av.get().to_string(), k.get().to_string()), s)))
        .collect();
    let roots: Vec<_> = schemas.iter().map(|(_, s)| &s.root).collect();
    let (tops, types) = smd::render(&roots);
    (schemas.into_iter().map(|(k, _)| k).zip(tops).collect(), types)
}

/// One side of a comparison: a reference resolved to its atom.
struct Resolved {
    name: Option<String>,
    atom: Value,
    over: Option<String>,
}

fn resolve(r: &Value, types: &Types) -> Resolved {
    match r["namedType"].as_str() {
        Some(n) => Resolved { name: Some(n.to_string()), atom: types.get(n).cloned().unwrap_or(json!({"missing": n})), over: r["elementRelationship"].as_str().map(str::to_string) },
        None => Resolved { name: None, atom: r.clone(), over: None },
    }
}

struct Check<'a> {
    table: &'a Types,
    spec: &'a Types,
    seen: HashSet<(String, String)>,
    problems: Vec<String>,
}

impl Check<'_> {
    fn differ(&mut self, path: &str, what: &str, table: impl std::fmt::Debug, spec: impl std::fmt::Debug) {
        self.problems.push(format!("{path}: {what}: table {table:?}, published spec {spec:?}"));
    }

    fn reference(&mut self, t: &Value, s: &Value, path: &str) {
        let (a, b) = (resolve(t, self.table), resolve(s, self.spec));
        for part in ["scalar", "list", "map"] {
            if a.atom.get(part).is_some() != b.atom.get(part).is_some() {
                self.differ(path, &format!("has a {part} form"), a.atom.get(part).is_some(), b.atom.get(part).is_some());
            }
        }
        if a.atom["scalar"] != b.atom["scalar"] {
            self.differ(path, "scalar", &a.atom["scalar"], &b.atom["scalar"]);
        }
        let rel = |r: &Resolved| r.over.clone().or_else(|| r.atom["map"]["elementRelationship"].as_str().map(str::to_string)).unwrap_or_else(|| "separable".into());
        if a.atom.get("map").is_some() && b.atom.get("map").is_some() && rel(&a) != rel(&b) {
            self.differ(path, "map relationship (atomic or granular)", rel(&a), rel(&b));
        }
        if let (Some(x), Some(y)) = (&a.name, &b.name) {
            if !self.seen.insert((x.clone(), y.clone())) {
                return;
            }
        }
        // Inside a named type, paths start at its name.
        let path = match &b.name {
            Some(n) if !n.starts_with("__") => n.clone(),
            _ => path.to_string(),
        };
        let path = path.as_str();
        if let (Some(l), Some(m)) = (a.atom.get("list"), b.atom.get("list")) {
            self.list(l, m, path);
        }
        if let (Some(l), Some(m)) = (a.atom.get("map"), b.atom.get("map")) {
            self.map(l, m, path);
        }
    }

    fn list(&mut self, t: &Value, s: &Value, path: &str) {
        if t["elementRelationship"] != s["elementRelationship"] || t["keys"] != s["keys"] {
            self.differ(path, "list kind", (&t["elementRelationship"], &t["keys"]), (&s["elementRelationship"], &s["keys"]));
        }
        // A missing key takes its field's default.
        for key in s["keys"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let default = |r: &Value, types: &Types| {
                let atom = resolve(r, types).atom;
                atom["map"]["fields"].as_array().into_iter().flatten().find(|f| f["name"] == key).map(|f| f["default"].clone()).unwrap_or(Value::Null)
            };
            let (a, b) = (default(&t["elementType"], self.table), default(&s["elementType"], self.spec));
            if a != b {
                self.differ(&format!("{path}[].{key}"), "default of a key field", a, b);
            }
        }
        self.reference(&t["elementType"], &s["elementType"], &format!("{path}[]"));
    }

    fn map(&mut self, t: &Value, s: &Value, path: &str) {
        match (t.get("elementType"), s.get("elementType")) {
            (Some(a), Some(b)) => self.reference(a, b, &format!("{path}{{}}")),
            (None, None) => {}
            (a, b) => self.differ(path, "type of other keys", a, b),
        }
        let fields = |m: &Value| -> BTreeMap<String, Value> { m["fields"].as_array().into_iter().flatten().map(|f| (f["name"].as_str().unwrap_or_default().to_string(), f["type"].clone())).collect() };
        let (a, b) = (fields(t), fields(s));
        for (name, ta) in &a {
            match b.get(name) {
                Some(tb) => self.reference(ta, tb, &format!("{path}.{name}")),
                None => self.problems.push(format!("{path}.{name}: in the table, not in the published spec")),
            }
        }
        for name in b.keys().filter(|n| !a.contains_key(*n)) {
            self.problems.push(format!("{path}.{name}: in the published spec, not in the table"));
        }
    }
}

/// What differs between the table (`kinds`, `types`) and the spec of 1.`minor`.
fn mismatches(minor: u8, kinds: &BTreeMap<(String, String), Value>, types: &Types, extract: &Value) -> Vec<String> {
    let spec = smd::spec_types(extract, minor);
    let served = smd::spec_kinds(extract, minor);
    let mut c = Check { table: types, spec: &spec, seen: HashSet::new(), problems: Vec::new() };
    let mine: BTreeSet<&(String, String)> = kinds.keys().collect();
    let theirs: BTreeSet<&(String, String)> = served.keys().collect();
    for k in mine.difference(&theirs) {
        c.problems.push(format!("kind {k:?}: in the table for 1.{minor}, not served by 1.{minor}"));
    }
    for k in theirs.difference(&mine) {
        c.problems.push(format!("kind {k:?}: served by 1.{minor}, not in the table"));
    }
    for (k, root) in kinds {
        if let Some(name) = served.get(k) {
            c.reference(root, &json!({"namedType": name}), name);
        }
    }
    c.problems.into_iter().map(|p| format!("1.{minor}: {p}")).collect()
}

fn minors(extract: &Value) -> Vec<u8> {
    extract["minors"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap() as u8).collect()
}

#[test]
fn every_supported_minor_agrees() {
    let extract = extract();
    let minors = minors(&extract);
    assert_eq!((minors[0], *minors.last().unwrap()), (builtin::OLDEST, builtin::NEWEST), "the table was generated from this extract");
    assert!(minors.len() >= 7, "1.29 to 1.35 at least: {minors:?}");
    let mut all = Vec::new();
    for &minor in &minors {
        let (kinds, types) = table(minor);
        assert!(kinds.len() > 50, "1.{minor}: {} kinds", kinds.len());
        all.extend(mismatches(minor, &kinds, &types, &extract));
    }
    assert!(all.is_empty(), "{} differences between the table and the published specs:\n{}", all.len(), all.join("\n"));
}

fn field_type<'a>(types: &'a mut Types, ty: &str, name: &str) -> &'a mut Value {
    let f = types.get_mut(ty).unwrap()["map"]["fields"].as_array_mut().unwrap().iter_mut().find(|f| f["name"] == name).unwrap();
    &mut f["type"]
}

/// The check catches what the issue names: each planted change to the table of 1.35 is
/// reported, at its place.
#[test]
fn planted_mismatches_are_caught() {
    let extract = extract();
    let (kinds, types) = table(35);
    assert!(mismatches(35, &kinds, &types, &extract).is_empty());
    type Plant = (&'static str, fn(&mut Value), &'static str);
    let plants: [Plant; 3] = [
        ("a keyed list made atomic", |t| *t = json!({"list": {"elementType": t["list"]["elementType"].clone(), "elementRelationship": "atomic"}}), "io.k8s.api.core.v1.Container.ports: list kind"),
        ("claimRef made atomic", |t| t["elementRelationship"] = json!("atomic"), "io.k8s.api.core.v1.PersistentVolumeSpec.claimRef: map relationship"),
        ("items made a leaf", |t| *t = json!({"namedType": smd::UNTYPED}), "JSONSchemaProps.items: map relationship"),
    ];
    let places = [("io.k8s.api.core.v1.Container", "ports"), ("io.k8s.api.core.v1.PersistentVolumeSpec", "claimRef"), ("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps", "items")];
    for ((what, plant, want), (ty, name)) in plants.into_iter().zip(places) {
        let mut bad = types.clone();
        plant(field_type(&mut bad, ty, name));
        let found = mismatches(35, &kinds, &bad, &extract);
        assert!(found.iter().any(|p| p.contains(want)), "{what}: {want:?} not reported in {found:#?}");
    }
}
