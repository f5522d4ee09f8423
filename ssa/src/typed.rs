//! Walks over a value and its type, as structured-merge-diff's `typed` package does
//! them (v4.4.1): the field set of a value, the merge of an applied configuration into
//! a live object, the comparison of two objects, and the removal of items.

use crate::fieldpath::{Path, Pe, Set};
use crate::schema::{Atom, ListKind, MapAtom, Type};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Structured-merge-diff's value equality: deep, and numbers by value (`1 == 1.0`).
pub fn value_eq(a: &Value, b: &Value) -> bool {
    crate::deep::guard(|| value_eq_level(a, b))
}

fn value_eq_level(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| value_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| value_eq(v, w)))
        }
        _ => a == b,
    }
}

/// The path element of a list item (None: an item the list kind cannot hold, e.g. a
/// keyed item without a key field and without a default for it).
pub fn item_pe(elem: &Type, kind: &ListKind, item: &Value) -> Option<Pe> {
    match kind {
        ListKind::Atomic => None,
        ListKind::Set => match item {
            Value::Object(_) | Value::Array(_) | Value::Null => None,
            v => Some(Pe::value(v)),
        },
        ListKind::Keys(keys) => {
            let m = item.as_object()?;
            let strukt = elem.strukt();
            let mut fields = Vec::new();
            for k in keys.iter() {
                match m.get(k) {
                    Some(v) => fields.push((k.clone(), v.clone())),
                    None => {
                        let def = strukt.as_ref().and_then(|s| s.field(k)).and_then(|f| f.default.clone())?;
                        fields.push((k.clone(), def));
                    }
                }
            }
            Some(Pe::key(fields))
        }
    }
}

fn is_empty_map(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty)
}

/// The set of fields `value` sets (structured-merge-diff's `ToFieldSet`): scalars,
/// atomic values, list items, undeclared map keys, and declared fields that are `null`
/// or an empty map are members; a declared field with content is only a path to them.
pub fn to_field_set(value: &Value, ty: &Type) -> Set {
    walk_set(value, ty).0
}

fn walk_set(value: &Value, ty: &Type) -> (Set, bool) {
    crate::deep::guard(|| match ty.atom(Some(value)) {
        Atom::Scalar(_) => (Set::new(), true),
        Atom::List(_, ListKind::Atomic) => (Set::new(), true),
        Atom::List(elem, kind) => {
            let Some(items) = value.as_array() else { return (Set::new(), false) };
            let pes: Vec<Option<Pe>> = items.iter().map(|i| item_pe(&elem, &kind, i)).collect();
            let mut seen: HashMap<&Pe, usize> = HashMap::with_capacity(pes.len());
            for pe in pes.iter().flatten() {
                *seen.entry(pe).or_default() += 1;
            }
            let mut members = Vec::with_capacity(items.len());
            let mut children = Vec::with_capacity(items.len());
            for (item, pe) in items.iter().zip(&pes) {
                let Some(pe) = pe else { continue };
                members.push(pe.clone());
                if seen[pe] == 1 {
                    children.push((pe.clone(), walk_set(item, &elem).0));
                }
            }
            (Set::from_parts(members, children), false)
        }
        Atom::Map(m) if m.atomic => (Set::new(), true),
        Atom::Map(m) => {
            let Some(obj) = value.as_object() else { return (Set::new(), false) };
            let mut members = Vec::new();
            let mut children = Vec::with_capacity(obj.len());
            for (k, v) in obj {
                let (cty, declared) = m.child(k);
                let (cs, member) = walk_set(v, &cty);
                let pe = Pe::Field(k.clone());
                if member || v.is_null() || is_empty_map(v) || !declared {
                    members.push(pe.clone());
                }
                children.push((pe, cs));
            }
            (Set::from_parts(members, children), false)
        }
    })
}

/// What the merge does at a leaf.
trait Rule {
    fn leaf(&mut self, path: &Path, lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value>;
    fn after_item(&mut self, _path: &Path, _lhs: Option<&Value>, _rhs: Option<&Value>) {}
}

struct KeepRhs;

impl Rule for KeepRhs {
    fn leaf(&mut self, _: &Path, lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
        rhs.or(lhs).cloned()
    }
}

/// The merge of `config` (an applied configuration) into `live`: `config`'s values win,
/// nothing is removed, atomic values are replaced whole, keyed lists merged item by item.
pub fn merge(live: &Value, config: &Value, ty: &Type) -> Value {
    walk_merge(&mut KeepRhs, &mut Vec::new(), Some(live), Some(config), ty).unwrap_or(Value::Object(Map::new()))
}

/// The paths that differ between two objects.
#[derive(Debug, Default, Clone)]
pub struct Comparison {
    /// In `rhs` only.
    pub added: Set,
    /// In `lhs` only.
    pub removed: Set,
    /// Leaves with different values.
    pub modified: Set,
}

impl Comparison {
    /// Nothing differs.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.modified.is_empty()
    }
}

/// The comparison's rule: the differing paths, collected in walk order and made sets
/// at the end (in one sorted pass, not one insertion each). It builds no merged value.
#[derive(Default)]
struct Differ {
    added: Vec<Path>,
    removed: Vec<Path>,
    modified: Vec<Path>,
}

impl Rule for Differ {
    fn leaf(&mut self, path: &Path, lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
        match (lhs, rhs) {
            (None, _) => self.added.push(path.clone()),
            (_, None) => self.removed.push(path.clone()),
            (Some(l), Some(r)) if !value_eq(l, r) => self.modified.push(path.clone()),
            _ => {}
        }
        None
    }

    fn after_item(&mut self, path: &Path, lhs: Option<&Value>, rhs: Option<&Value>) {
        match (lhs, rhs) {
            (None, _) => self.added.push(path.clone()),
            (_, None) => self.removed.push(path.clone()),
            _ => {}
        }
    }
}

/// Compares `lhs` (old) with `rhs` (new).
pub fn compare(lhs: &Value, rhs: &Value, ty: &Type) -> Comparison {
    let mut d = Differ::default();
    walk_merge(&mut d, &mut Vec::new(), Some(lhs), Some(rhs), ty);
    Comparison { added: Set::from_paths(d.added), removed: Set::from_paths(d.removed), modified: Set::from_paths(d.modified) }
}

fn walk_merge(rule: &mut dyn Rule, path: &mut Path, lhs: Option<&Value>, rhs: Option<&Value>, ty: &Type) -> Option<Value> {
    crate::deep::guard(|| walk_merge_level(rule, path, lhs, rhs, ty))
}

fn walk_merge_level(rule: &mut dyn Rule, path: &mut Path, lhs: Option<&Value>, rhs: Option<&Value>, ty: &Type) -> Option<Value> {
    // A `null` side takes the other side's shape (structured-merge-diff keeps every
    // possible shape for a null and prefers a map): a map removed down to nothing is
    // still a map, its key not a changed leaf.
    let atom = ty.atom(rhs.filter(|v| !v.is_null()).or(lhs.filter(|v| !v.is_null())).or(rhs).or(lhs));
    let out = match atom {
        Atom::Scalar(_) => return rule.leaf(path, lhs, rhs),
        Atom::List(elem, kind) => {
            let l = lhs.and_then(Value::as_array).filter(|a| !a.is_empty());
            let r = rhs.and_then(Value::as_array).filter(|a| !a.is_empty());
            if kind == ListKind::Atomic || (l.is_none() && r.is_none()) {
                return rule.leaf(path, lhs, rhs);
            }
            merge_list(rule, path, l.map(Vec::as_slice).unwrap_or(&[]), r.map(Vec::as_slice).unwrap_or(&[]), &elem, &kind)
        }
        Atom::Map(m) => {
            let l = lhs.and_then(Value::as_object).filter(|o| !o.is_empty());
            let r = rhs.and_then(Value::as_object).filter(|o| !o.is_empty());
            if m.atomic || (l.is_none() && r.is_none()) {
                return rule.leaf(path, lhs, rhs);
            }
            merge_map(rule, path, l, r, &m)
        }
    };
    rule.after_item(path, lhs, rhs);
    out
}

fn merge_map(rule: &mut dyn Rule, path: &mut Path, l: Option<&Map<String, Value>>, r: Option<&Map<String, Value>>, m: &MapAtom) -> Option<Value> {
    let mut keys: Vec<&String> = l.into_iter().flat_map(|o| o.keys()).collect();
    keys.extend(r.into_iter().flat_map(|o| o.keys()));
    keys.sort();
    keys.dedup();
    let mut out = Map::new();
    for k in keys {
        let (cty, _) = m.child(k);
        path.push(Pe::Field(k.clone()));
        if let Some(v) = walk_merge(rule, path, l.and_then(|o| o.get(k)), r.and_then(|o| o.get(k)), &cty) {
            out.insert(k.clone(), v);
        }
        path.pop();
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// Keyed and set lists, item order as structured-merge-diff v4.4.1 builds it: the
/// applied order for items both sides hold, live-only items kept where they were.
fn merge_list(rule: &mut dyn Rule, path: &mut Path, l: &[Value], r: &[Value], elem: &Arc<Type>, kind: &ListKind) -> Option<Value> {
    // Path elements in order with their items, and each item by its element (None when
    // duplicated: a duplicate is not merged with anything), indexed once.
    fn index<'a>(items: &'a [Value], elem: &Type, kind: &ListKind) -> Vec<(Pe, &'a Value)> {
        items.iter().filter_map(|item| item_pe(elem, kind, item).map(|pe| (pe, item))).collect()
    }
    fn by_pe<'a, 'p>(pes: &'p [(Pe, &'a Value)]) -> HashMap<&'p Pe, Option<&'a Value>> {
        let mut seen: HashMap<&Pe, Option<&Value>> = HashMap::with_capacity(pes.len());
        for (pe, item) in pes {
            seen.entry(pe).and_modify(|slot| *slot = None).or_insert(Some(*item));
        }
        seen
    }
    fn get<'a>(obs: &HashMap<&Pe, Option<&'a Value>>, pe: &Pe) -> Option<Option<&'a Value>> {
        obs.get(pe).copied()
    }
    let rpes = index(r, elem, kind);
    let lpes = index(l, elem, kind);
    let (robs, lobs) = (by_pe(&rpes), by_pe(&lpes));
    let mut shared: std::collections::VecDeque<&Pe> = rpes.iter().map(|(p, _)| p).filter(|p| lobs.contains_key(p)).collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: HashSet<&Pe> = HashSet::with_capacity(rpes.len());
    let mut out = Vec::new();
    let item = |rule: &mut dyn Rule, path: &mut Path, pe: &Pe, lc: Option<&Value>, rc: Option<&Value>, out: &mut Vec<Value>| {
        path.push(pe.clone());
        if let Some(v) = walk_merge(rule, path, lc, rc, elem) {
            out.push(v);
        }
        path.pop();
    };
    let (mut li, mut ri) = (0, 0);
    while li < lpes.len() || ri < rpes.len() {
        if li < lpes.len() && ri < rpes.len() {
            let pe = &lpes[li].0;
            if *pe == rpes[ri].0 {
                merged_rhs.insert(pe);
                item(rule, path, pe, get(&lobs, pe).flatten(), get(&robs, pe).flatten(), &mut out);
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if get(&robs, pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            let (pe, lc) = &lpes[li];
            if get(&robs, pe).is_none() {
                item(rule, path, pe, Some(lc), None, &mut out);
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rpes.len() {
            let pe = &rpes[ri].0;
            merged_rhs.insert(pe);
            item(rule, path, pe, get(&lobs, pe).flatten(), get(&robs, pe).flatten(), &mut out);
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

/// `value` without the items and fields `set` names (structured-merge-diff's
/// `RemoveItems`). A map or list left empty becomes `null`, as there.
pub fn remove_items(value: &Value, set: &Set, ty: &Type) -> Value {
    remove_rec(value, set, ty).unwrap_or(Value::Null)
}

fn remove_rec(value: &Value, set: &Set, ty: &Type) -> Option<Value> {
    crate::deep::guard(|| remove_level(value, set, ty))
}

fn remove_level(value: &Value, set: &Set, ty: &Type) -> Option<Value> {
    match ty.atom(Some(value)) {
        Atom::Scalar(_) => Some(value.clone()),
        Atom::List(elem, kind) => {
            let items = value.as_array().filter(|a| !a.is_empty())?;
            if kind == ListKind::Atomic {
                return None;
            }
            let mut out = Vec::new();
            for item in items {
                let Some(pe) = item_pe(&elem, &kind, item) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match set.with_prefix(&pe).filter(|s| !s.is_empty()) {
                    Some(sub) => out.push(remove_rec(item, sub, &elem).unwrap_or(Value::Null)),
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Atom::Map(m) => {
            let obj = value.as_object().filter(|o| !o.is_empty())?;
            if m.atomic {
                return None;
            }
            let mut out = Map::new();
            for (k, v) in obj {
                let pe = Pe::Field(k.clone());
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                let v = match set.with_prefix(&pe).filter(|s| !s.is_empty()) {
                    Some(sub) => remove_rec(v, sub, &m.child(k).0).unwrap_or(Value::Null),
                    None => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
    }
}

/// `set` plus every declared struct field that is on the way to one of its members
/// (structured-merge-diff's `EnsureNamedFieldsAreMembers`).
pub fn ensure_named_fields(set: &Set, ty: &Type) -> Set {
    crate::deep::guard(|| ensure_named_level(set, ty))
}

fn ensure_named_level(set: &Set, ty: &Type) -> Set {
    let mut out = Set::new();
    for pe in set.members() {
        out.insert_member(pe.clone());
    }
    let strukt = ty.strukt();
    for (pe, child) in set.children() {
        let cty = match pe {
            Pe::Field(name) => {
                if strukt.as_ref().is_some_and(|s| s.field(name).is_some()) {
                    out.insert_member(pe.clone());
                }
                match ty.atom(None) {
                    Atom::Map(m) => m.child(name).0,
                    _ => match ty {
                        Type::Deduced => Type::Deduced,
                        _ => continue,
                    },
                }
            }
            _ => match ty {
                Type::List(e, _) => (**e).clone(),
                Type::Deduced => Type::Deduced,
                _ => continue,
            },
        };
        out.insert_child(pe.clone(), ensure_named_fields(child, &cty));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;
    use serde_json::json;

    fn deploy() -> Type {
        Schema::builtin("apps/v1", "Deployment").unwrap().root
    }

    #[test]
    fn field_set_of_keyed_lists_defaults_and_atomic_values() {
        let obj = json!({"metadata": {"labels": {"app": "web"}, "finalizers": ["a/b"]},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "strategy": {},
                "template": {"metadata": {"creationTimestamp": null},
                    "spec": {"containers": [{"name": "main", "ports": [{"containerPort": 80}], "env": []}], "tolerations": [{"key": "x"}]}}}});
        let set = to_field_set(&obj, &deploy());
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:metadata": {"f:finalizers": {"v:\"a/b\"": {}}, "f:labels": {"f:app": {}}},
                "f:spec": {"f:selector": {}, "f:strategy": {}, "f:template": {"f:metadata": {"f:creationTimestamp": {}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:name": {}, "f:ports": {
                        "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}, "f:tolerations": {}}}}})
        );
    }

    #[test]
    fn merge_keeps_live_items_and_replaces_atomic_values() {
        let live = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "a", "env": [{"name": "DEBUG", "value": "1"}]}],
            "tolerations": [{"key": "x", "tolerationSeconds": 30}]}}}});
        let cfg = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "b", "env": [{"name": "MODE", "value": "p"}]}],
            "tolerations": [{"key": "x"}]}}}});
        let out = merge(&live, &cfg, &deploy());
        assert_eq!(out["spec"]["template"]["spec"]["containers"][0]["image"], "b");
        assert_eq!(out["spec"]["template"]["spec"]["containers"][0]["env"], json!([{"name": "DEBUG", "value": "1"}, {"name": "MODE", "value": "p"}]));
        assert_eq!(out["spec"]["template"]["spec"]["tolerations"], json!([{"key": "x"}]));
        let c = compare(&live, &out, &deploy());
        assert!(!c.is_same());
        assert!(compare(&out, &out, &deploy()).is_same());
    }
}
