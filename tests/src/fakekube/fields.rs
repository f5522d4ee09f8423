//! Field paths and field sets as server-side apply sees them: an object is a set of
//! leaf paths (maps recurse; scalars, lists and empty maps are leaves: lists are atomic),
//! encoded in `metadata.managedFields[].fieldsV1` with the real `f:` keys.

use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A path of map keys from the object root, e.g. `["spec", "replicas"]`.
pub type Path = Vec<String>;

/// A set of leaf paths owned by one manager.
pub type FieldSet = BTreeSet<Path>;

/// `.spec.replicas`: how the real server prints a path in conflict messages.
pub fn display(path: &Path) -> String {
    path.iter().map(|k| format!(".{k}")).collect()
}

/// Every leaf path under `value`, each prefixed with `prefix`.
pub fn leaves(value: &Value, prefix: &mut Path, out: &mut FieldSet) {
    match value {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                prefix.push(k.clone());
                leaves(v, prefix, out);
                prefix.pop();
            }
        }
        _ if prefix.is_empty() => {}
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The leaf paths of the fields a client manages in `obj`: everything except identity
/// (`apiVersion`, `kind`, `metadata.name/namespace`), server-set metadata and `status`.
pub fn managed_leaves(obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    leaves(&strip_unmanaged(obj), &mut Vec::new(), &mut out);
    out
}

/// A copy of `obj` without the fields field management ignores.
pub fn strip_unmanaged(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["apiVersion", "kind", "status"] {
            m.remove(k);
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "managedFields",
                "selfLink",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generateName",
            ] {
                meta.remove(k);
            }
            if meta.is_empty() {
                m.remove("metadata");
            }
        }
    }
    v
}

/// The value at `path`, if present.
pub fn get<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(value, |v, k| v.as_object().and_then(|m| m.get(k)))
}

/// Sets `path` to `new`, creating (or replacing non-map values with) maps on the way.
pub fn set(value: &mut Value, path: &[String], new: Value) {
    let Some((last, parents)) = path.split_last() else {
        *value = new;
        return;
    };
    let mut cur = value;
    for k in parents {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        cur = cur
            .as_object_mut()
            .expect("map")
            .entry(k.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    cur.as_object_mut().expect("map").insert(last.clone(), new);
}

/// Removes `path`, then removes parent maps left empty unless `keep(parent)` says the
/// empty map itself is owned.
pub fn remove(value: &mut Value, path: &[String], keep: &dyn Fn(&[String]) -> bool) {
    fn rec(cur: &mut Value, path: &[String], depth: usize, keep: &dyn Fn(&[String]) -> bool) {
        let Some(m) = cur.as_object_mut() else { return };
        let k = &path[depth];
        if depth + 1 == path.len() {
            m.remove(k);
            return;
        }
        if let Some(child) = m.get_mut(k) {
            rec(child, path, depth + 1, keep);
            let empty = child.as_object().is_some_and(|c| c.is_empty());
            if empty && !keep(&path[..=depth]) {
                m.remove(k);
            }
        }
    }
    if !path.is_empty() {
        rec(value, path, 0, keep);
    }
}

/// Whether `a` is a prefix of `b` or the reverse (the paths overlap).
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Encodes a field set as `fieldsV1`: `{"f:spec":{"f:replicas":{}}}`.
pub fn encode(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for k in path {
            cur = cur
                .entry(format!("f:{k}"))
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("map");
        }
    }
    Value::Object(root)
}

/// Decodes `fieldsV1` back into leaf paths (`.` entries and non-`f:` keys are leaves of
/// their parent, which is how this fake writes them).
pub fn decode(v: &Value) -> FieldSet {
    fn rec(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
        let children: Vec<(&String, &Value)> = v
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect())
            .unwrap_or_default();
        let self_owned = v.as_object().is_some_and(|m| m.contains_key("."));
        if (children.is_empty() || self_owned)
            && !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        for (k, c) in children {
            prefix.push(k[2..].to_string());
            rec(c, prefix, out);
            prefix.pop();
        }
    }
    let mut out = FieldSet::new();
    rec(v, &mut Vec::new(), &mut out);
    out
}

/// The leaf paths whose values differ between `old` and `new` (set or changed in `new`)
/// and the leaf paths of `old` that `new` no longer has.
pub fn diff(old: &Value, new: &Value) -> (FieldSet, FieldSet) {
    fn rec(
        old: Option<&Value>,
        new: Option<&Value>,
        prefix: &mut Path,
        changed: &mut FieldSet,
        removed: &mut FieldSet,
    ) {
        match (old, new) {
            (Some(Value::Object(a)), Some(Value::Object(b))) if !a.is_empty() && !b.is_empty() => {
                let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for k in keys {
                    prefix.push(k.clone());
                    rec(a.get(k), b.get(k), prefix, changed, removed);
                    prefix.pop();
                }
            }
            (Some(o), Some(n)) if o == n => {}
            (o, n) => {
                if let Some(o) = o {
                    let mut ol = FieldSet::new();
                    leaves(o, prefix, &mut ol);
                    let mut nl = FieldSet::new();
                    if let Some(n) = n {
                        leaves(n, prefix, &mut nl);
                    }
                    removed.extend(
                        ol.into_iter()
                            .filter(|p| !nl.iter().any(|q| overlaps(p, q))),
                    );
                }
                if let Some(n) = n {
                    leaves(n, prefix, changed);
                }
            }
        }
    }
    let (mut changed, mut removed) = (FieldSet::new(), FieldSet::new());
    rec(
        Some(&strip_unmanaged(old)),
        Some(&strip_unmanaged(new)),
        &mut Vec::new(),
        &mut changed,
        &mut removed,
    );
    (changed, removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_encode_decode_roundtrip() {
        let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"}},"data":{"k":"v","l":"w"},"spec":{"list":[1,2],"empty":{}}});
        let set = managed_leaves(&obj);
        let enc = encode(&set);
        assert_eq!(
            enc,
            json!({"f:metadata":{"f:labels":{"f:app":{}}},"f:data":{"f:k":{},"f:l":{}},"f:spec":{"f:list":{},"f:empty":{}}})
        );
        assert_eq!(decode(&enc), set);
        assert_eq!(
            display(&vec!["spec".into(), "replicas".into()]),
            ".spec.replicas"
        );
    }

    #[test]
    fn diff_and_remove() {
        let a = json!({"data":{"k":"v","gone":"x"}});
        let b = json!({"data":{"k":"v2","new":"y"}});
        let (c, r) = diff(&a, &b);
        assert_eq!(
            c,
            [
                vec!["data".to_string(), "k".into()],
                vec!["data".into(), "new".into()]
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(
            r,
            [vec!["data".to_string(), "gone".into()]]
                .into_iter()
                .collect()
        );
        let mut v = json!({"spec":{"a":{"b":1}},"x":1});
        remove(&mut v, &["spec".into(), "a".into(), "b".into()], &|_| false);
        assert_eq!(v, json!({"x":1}));
    }
}
