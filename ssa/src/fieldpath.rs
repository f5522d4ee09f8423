//! Field paths and field sets as structured-merge-diff writes them (`fieldpath` there):
//! a path is a list of elements (`f:` a struct field or map key, `k:` an item of a keyed
//! list, `v:` an item of a set, `i:` a list index), and a set is a tree whose nodes say
//! which paths are members. `metadata.managedFields[].fieldsV1` is that tree in JSON:
//! `{"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{}}}}}`, where
//! `.` marks a node that is a member and also has members below it.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One step of a path. Ordered as structured-merge-diff orders them (fields, then keys,
/// then values, then indexes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pe {
    /// A struct field or map key.
    Field(String),
    /// An item of a keyed list: its key fields (sorted by name) with their values as JSON.
    Key(Vec<(String, String)>),
    /// An item of a set list: the value as JSON.
    Value(String),
    /// A list index (atomic lists never have one in a field set; kept for completeness).
    Index(usize),
}

impl Pe {
    /// A field element.
    pub fn field(name: &str) -> Pe {
        Pe::Field(name.to_string())
    }

    /// A key element from (name, value) pairs in any order.
    pub fn key(mut fields: Vec<(String, Value)>) -> Pe {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        Pe::Key(fields.into_iter().map(|(k, v)| (k, canonical_json(&v))).collect())
    }

    /// A set-item element.
    pub fn value(v: &Value) -> Pe {
        Pe::Value(canonical_json(v))
    }

    /// The `fieldsV1` spelling: `f:name`, `k:{"a":1}`, `v:"x"`, `i:0`.
    pub fn encode(&self) -> String {
        match self {
            Pe::Field(f) => format!("f:{f}"),
            Pe::Key(k) => {
                let inner: Vec<String> = k
                    .iter()
                    .map(|(n, v)| format!("{}:{v}", Value::String(n.clone())))
                    .collect();
                format!("k:{{{}}}", inner.join(","))
            }
            Pe::Value(v) => format!("v:{v}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses the `fieldsV1` spelling; None for anything else (`.` included).
    pub fn decode(s: &str) -> Option<Pe> {
        let (kind, rest) = s.split_once(':')?;
        match kind {
            "f" => Some(Pe::Field(rest.to_string())),
            "v" => serde_json::from_str::<Value>(rest).ok().map(|v| Pe::value(&v)),
            "i" => rest.parse().ok().map(Pe::Index),
            "k" => match serde_json::from_str::<Value>(rest).ok()? {
                Value::Object(m) => Some(Pe::key(m.into_iter().collect())),
                _ => None,
            },
            _ => None,
        }
    }
}

impl fmt::Display for Pe {
    /// The way the API server prints a path in a conflict: `.spec`, `[name="main"]`,
    /// `[=value]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pe::Field(n) => write!(f, ".{n}"),
            Pe::Key(k) => {
                let parts: Vec<String> = k.iter().map(|(n, v)| format!("{n}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            Pe::Value(v) => write!(f, "[={v}]"),
            Pe::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object root.
pub type Path = Vec<Pe>;

/// `.spec.template.spec.containers[name="main"].image`.
pub fn display(path: &[Pe]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// JSON with object keys sorted (serde_json's default map is sorted), integers as
/// integers: the form keys and set values are compared in.
pub fn canonical_json(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        _ => v.to_string(),
    }
}

/// A set of paths: the members at this level and the sets below each element.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<Pe>,
    children: BTreeMap<Pe, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// Adds `path` as a member (the empty path adds nothing: no one owns the object).
    pub fn insert(&mut self, path: &[Pe]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[Pe]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// No members at any depth.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// The members below `pe` (the set a child walker sees).
    pub fn with_prefix(&self, pe: &Pe) -> Option<&Set> {
        self.children.get(pe)
    }

    /// The members of this level.
    pub fn members(&self) -> impl Iterator<Item = &Pe> {
        self.members.iter()
    }

    /// The child sets of this level.
    pub fn children(&self) -> impl Iterator<Item = (&Pe, &Set)> {
        self.children.iter()
    }

    fn prune(mut self) -> Set {
        self.children.retain(|_, c| !c.is_empty());
        self
    }

    /// Members of either.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out.prune()
    }

    /// Members of both.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, c)| other.children.get(pe).map(|o| (pe.clone(), c.intersection(o))))
            .collect();
        Set { members, children }.prune()
    }

    /// Members of `self` that are not members of `other` (a member of `other` does not
    /// remove the paths below it: see [`Set::recursive_difference`]).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .map(|(pe, c)| match other.children.get(pe) {
                Some(o) => (pe.clone(), c.difference(o)),
                None => (pe.clone(), c.clone()),
            })
            .collect();
        Set { members, children }.prune()
    }

    /// Like [`Set::difference`], but a member of `other` also removes everything below it.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !other.members.contains(*pe))
            .map(|(pe, c)| match other.children.get(pe) {
                Some(o) => (pe.clone(), c.recursive_difference(o)),
                None => (pe.clone(), c.clone()),
            })
            .collect();
        Set { members, children }.prune()
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        fn rec(s: &Set, prefix: &mut Path, out: &mut Vec<Path>) {
            let mut all: BTreeSet<&Pe> = s.members.iter().collect();
            all.extend(s.children.keys());
            for pe in all {
                prefix.push(pe.clone());
                if s.members.contains(pe) {
                    out.push(prefix.clone());
                }
                if let Some(c) = s.children.get(pe) {
                    rec(c, prefix, out);
                }
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        rec(self, &mut Vec::new(), &mut out);
        out
    }

    /// Adds `child` under `pe` (used by walkers that build sets level by level).
    pub fn insert_child(&mut self, pe: Pe, child: Set) {
        if child.is_empty() {
            return;
        }
        let merged = match self.children.remove(&pe) {
            Some(mine) => mine.union(&child),
            None => child,
        };
        self.children.insert(pe, merged);
    }

    /// Adds `pe` as a member of this level.
    pub fn insert_member(&mut self, pe: Pe) {
        self.members.insert(pe);
    }

    /// The `fieldsV1` JSON of this set.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        let mut all: BTreeSet<&Pe> = self.members.iter().collect();
        all.extend(self.children.keys());
        for pe in all {
            let mut node = match self.children.get(pe) {
                Some(c) => match c.to_fields_v1() {
                    Value::Object(o) => o,
                    _ => Map::new(),
                },
                None => Map::new(),
            };
            if self.members.contains(pe) && !node.is_empty() {
                node.insert(".".into(), Value::Object(Map::new()));
            }
            m.insert(pe.encode(), Value::Object(node));
        }
        Value::Object(m)
    }

    /// Reads `fieldsV1` (an unknown key is an error: the entry cannot be trusted).
    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        let Some(m) = v.as_object() else {
            return Err("fieldsV1 is not an object".into());
        };
        let mut s = Set::new();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = Pe::decode(k).ok_or_else(|| format!("unknown field set key {k:?}"))?;
            let cm = child.as_object().ok_or_else(|| format!("field set node {k:?} is not an object"))?;
            let has_children = cm.keys().any(|c| c != ".");
            if !has_children || cm.contains_key(".") {
                s.members.insert(pe.clone());
            }
            if has_children {
                s.insert_child(pe, Set::from_fields_v1(child)?);
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trip_with_keys_values_and_dots() {
        let v = json!({"f:metadata":{"f:finalizers":{".":{},"v:\"a/b\"":{}},"f:labels":{"f:app":{}}},
            "f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}}}});
        let s = Set::from_fields_v1(&v).unwrap();
        assert_eq!(s.to_fields_v1(), v);
        let port = Pe::key(vec![("protocol".into(), json!("TCP")), ("port".into(), json!(80))]);
        assert!(s.has(&[Pe::field("spec"), Pe::field("ports"), port.clone()]));
        assert!(s.has(&[Pe::field("metadata"), Pe::field("finalizers")]));
        assert!(!s.has(&[Pe::field("spec"), Pe::field("ports")]));
        assert_eq!(
            display(&[Pe::field("spec"), Pe::field("ports"), port, Pe::field("port")]),
            ".spec.ports[port=80,protocol=\"TCP\"].port"
        );
    }

    #[test]
    fn set_algebra() {
        let p = |s: &str| -> Path { s.split('.').map(Pe::field).collect() };
        let mut a = Set::new();
        a.insert(&p("a.b"));
        a.insert(&p("a.c"));
        a.insert(&p("d"));
        let mut b = Set::new();
        b.insert(&p("a"));
        b.insert(&p("a.c"));
        assert_eq!(a.difference(&b).paths(), vec![p("a.b"), p("d")]);
        assert_eq!(a.recursive_difference(&b).paths(), vec![p("d")]);
        assert_eq!(a.intersection(&b).paths(), vec![p("a.c")]);
        assert_eq!(a.union(&b).paths().len(), 4);
    }
}
