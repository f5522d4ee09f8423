//! Field paths and field sets as structured-merge-diff writes them (`fieldpath` there):
//! a path is a list of elements (`f:` a struct field or map key, `k:` an item of a keyed
//! list, `v:` an item of a set, `i:` a list index), and a set is a tree whose nodes say
//! which paths are members. `metadata.managedFields[].fieldsV1` is that tree in JSON:
//! `{"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{}}}}}`, where
//! `.` marks a node that is a member and also has members below it.

use serde_json::{Map, Value};
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
///
/// Both levels are vectors sorted by element, without duplicates, and no child set is
/// empty, so every operation is a merge of sorted runs (linear in the sets' sizes) and a
/// small set costs a few words, not B-tree nodes (10,000 managers' sets on one object).
/// Operations recurse once per path element behind [`crate::deep::guard`], and a set is
/// dropped without recursion: a `fieldsV1` nested 10,000 deep, which an API server
/// accepts, is read, compared and dropped on any thread.
#[derive(Default, Debug)]
pub struct Set {
    members: Vec<Pe>,
    children: Vec<(Pe, Set)>,
}

impl Clone for Set {
    fn clone(&self) -> Set {
        crate::deep::guard(|| Set { members: self.members.clone(), children: self.children.clone() })
    }
}

impl PartialEq for Set {
    fn eq(&self, other: &Set) -> bool {
        crate::deep::guard(|| self.members == other.members && self.children == other.children)
    }
}

impl Eq for Set {}

impl Drop for Set {
    /// Iterative: the children of every level are moved to one list and dropped from it
    /// with no children of their own.
    fn drop(&mut self) {
        if self.children.iter().all(|(_, c)| c.children.is_empty()) {
            return;
        }
        let mut pending = std::mem::take(&mut self.children);
        while let Some((_, mut s)) = pending.pop() {
            pending.append(&mut s.children);
        }
    }
}

/// The union of two sorted runs of elements.
fn merge_members(a: &[Pe], b: &[Pe]) -> Vec<Pe> {
    merge_sorted(a, b, |p| p, |x, _| x.clone())
}

/// The union of two sorted runs of children (a child in both: the union of the two).
fn merge_children(a: &[(Pe, Set)], b: &[(Pe, Set)]) -> Vec<(Pe, Set)> {
    merge_sorted(a, b, |c| &c.0, |x, y| (x.0.clone(), x.1.union(&y.1)))
}

/// The union of two runs sorted by `key`; an item in both is `both(a's, b's)`.
fn merge_sorted<T: Clone, K: Ord + ?Sized>(a: &[T], b: &[T], key: impl Fn(&T) -> &K, both: impl Fn(&T, &T) -> T) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match key(&a[i]).cmp(key(&b[j])) {
            std::cmp::Ordering::Equal => {
                out.push(both(&a[i], &b[j]));
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j].clone());
                j += 1;
            }
        }
    }
    out.extend(a[i..].iter().cloned());
    out.extend(b[j..].iter().cloned());
    out
}

/// Elements of sorted `a` that `keep` says of their presence in sorted `b`.
fn sorted_filter(a: &[Pe], b: &[Pe], keep_if_in_b: bool) -> Vec<Pe> {
    let mut out = Vec::new();
    let mut j = 0;
    for pe in a {
        while j < b.len() && b[j] < *pe {
            j += 1;
        }
        let in_b = j < b.len() && b[j] == *pe;
        if in_b == keep_if_in_b {
            out.push(pe.clone());
        }
    }
    out
}

fn contains(sorted: &[Pe], pe: &Pe) -> bool {
    sorted.binary_search(pe).is_ok()
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// A set from members and children in any order (duplicates merged, empty children
    /// dropped): how walkers build a level in one go.
    pub fn from_parts(mut members: Vec<Pe>, mut children: Vec<(Pe, Set)>) -> Set {
        members.sort_unstable();
        members.dedup();
        children.retain(|(_, c)| !c.is_empty());
        children.sort_by(|a, b| a.0.cmp(&b.0));
        let mut merged: Vec<(Pe, Set)> = Vec::with_capacity(children.len());
        for (pe, c) in children {
            match merged.last_mut() {
                Some(last) if last.0 == pe => last.1.extend(&c),
                _ => merged.push((pe, c)),
            }
        }
        Set { members, children: merged }
    }

    fn child_mut(&mut self, pe: &Pe) -> &mut Set {
        if self.children.last().is_none_or(|(l, _)| l < pe) {
            self.children.push((pe.clone(), Set::new()));
            return &mut self.children.last_mut().expect("pushed").1;
        }
        let i = match self.children.binary_search_by(|(p, _)| p.cmp(pe)) {
            Ok(i) => i,
            Err(i) => {
                self.children.insert(i, (pe.clone(), Set::new()));
                i
            }
        };
        &mut self.children[i].1
    }

    /// The set of `paths` (in any order): sorted once, then each added where its level
    /// ends, so building is not one insertion into the middle of a level per path.
    pub fn from_paths(mut paths: Vec<Path>) -> Set {
        paths.sort_unstable();
        paths.dedup();
        let mut s = Set::new();
        for p in &paths {
            s.insert(p);
        }
        s
    }

    /// Adds `path` as a member (the empty path adds nothing: no one owns the object).
    pub fn insert(&mut self, path: &[Pe]) {
        let Some((last, prefix)) = path.split_last() else { return };
        let mut s = self;
        for pe in prefix {
            s = s.child_mut(pe);
        }
        s.insert_member(last.clone());
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[Pe]) -> bool {
        let Some((last, prefix)) = path.split_last() else { return false };
        let mut s = self;
        for pe in prefix {
            match s.with_prefix(pe) {
                Some(c) => s = c,
                None => return false,
            }
        }
        contains(&s.members, last)
    }

    /// No members at any depth (no child is ever empty).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// The members below `pe` (the set a child walker sees).
    pub fn with_prefix(&self, pe: &Pe) -> Option<&Set> {
        self.children.binary_search_by(|(p, _)| p.cmp(pe)).ok().map(|i| &self.children[i].1)
    }

    /// The members of this level.
    pub fn members(&self) -> impl Iterator<Item = &Pe> {
        self.members.iter()
    }

    /// The child sets of this level.
    pub fn children(&self) -> impl Iterator<Item = (&Pe, &Set)> {
        self.children.iter().map(|(p, s)| (p, s))
    }

    /// Members of either.
    pub fn union(&self, other: &Set) -> Set {
        crate::deep::guard(|| {
            Set { members: merge_members(&self.members, &other.members), children: merge_children(&self.children, &other.children) }
        })
    }

    /// Adds every member of `other` (an in-place [`Set::union`]): the cost is `other`'s
    /// size when it is small, so folding many managers' sets together stays linear.
    pub fn extend(&mut self, other: &Set) {
        crate::deep::guard(|| {
            if !other.members.is_empty() {
                if self.members.last().is_none_or(|l| *l < other.members[0]) {
                    self.members.extend(other.members.iter().cloned());
                } else if other.members.len() <= 8 {
                    for pe in &other.members {
                        self.insert_member(pe.clone());
                    }
                } else {
                    self.members = merge_members(&self.members, &other.members);
                }
            }
            if other.children.len() <= 8 {
                for (pe, c) in &other.children {
                    match self.children.binary_search_by(|(p, _)| p.cmp(pe)) {
                        Ok(i) => self.children[i].1.extend(c),
                        Err(i) => self.children.insert(i, (pe.clone(), c.clone())),
                    }
                }
                return;
            }
            let mine = std::mem::take(&mut self.children);
            let mut out = Vec::with_capacity(mine.len().max(other.children.len()));
            let mut theirs = other.children.iter().peekable();
            for (pe, mut c) in mine {
                while let Some((o, oc)) = theirs.next_if(|(o, _)| *o < pe) {
                    out.push((o.clone(), oc.clone()));
                }
                if let Some((_, oc)) = theirs.next_if(|(o, _)| *o == pe) {
                    c.extend(oc);
                }
                out.push((pe, c));
            }
            out.extend(theirs.cloned());
            self.children = out;
        })
    }

    /// Members of both.
    pub fn intersection(&self, other: &Set) -> Set {
        crate::deep::guard(|| {
            let (small, large) = if self.members.len() <= other.members.len() { (self, other) } else { (other, self) };
            let members = small.members.iter().filter(|p| contains(&large.members, p)).cloned().collect();
            let (small, large) = if self.children.len() <= other.children.len() { (self, other) } else { (other, self) };
            let children = small
                .children
                .iter()
                .filter_map(|(pe, c)| large.with_prefix(pe).map(|o| (pe.clone(), c.intersection(o))))
                .filter(|(_, c)| !c.is_empty())
                .collect();
            Set { members, children }
        })
    }

    /// Members of `self` that are not members of `other` (a member of `other` does not
    /// remove the paths below it: see [`Set::recursive_difference`]).
    pub fn difference(&self, other: &Set) -> Set {
        crate::deep::guard(|| {
            let members = sorted_filter(&self.members, &other.members, false);
            let children = self
                .children
                .iter()
                .filter_map(|(pe, c)| match other.with_prefix(pe) {
                    Some(o) => Some((pe.clone(), c.difference(o))).filter(|(_, c)| !c.is_empty()),
                    None => Some((pe.clone(), c.clone())),
                })
                .collect();
            Set { members, children }
        })
    }

    /// Removes every member of `other` (an in-place [`Set::difference`]): the cost is
    /// `other`'s size, not this set's, when `other` is small (an apply's changed fields
    /// against each of 10,000 managers).
    pub fn subtract(&mut self, other: &Set) {
        crate::deep::guard(|| {
            if self.is_empty() || other.is_empty() {
                return;
            }
            if !other.members.is_empty() {
                self.members.retain(|p| !contains(&other.members, p));
            }
            for (pe, o) in &other.children {
                if let Ok(i) = self.children.binary_search_by(|(p, _)| p.cmp(pe)) {
                    self.children[i].1.subtract(o);
                    if self.children[i].1.is_empty() {
                        self.children.remove(i);
                    }
                }
            }
        })
    }

    /// Like [`Set::difference`], but a member of `other` also removes everything below it.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        crate::deep::guard(|| {
            let members = sorted_filter(&self.members, &other.members, false);
            let children = self
                .children
                .iter()
                .filter(|(pe, _)| !contains(&other.members, pe))
                .filter_map(|(pe, c)| match other.with_prefix(pe) {
                    Some(o) => Some((pe.clone(), c.recursive_difference(o))).filter(|(_, c)| !c.is_empty()),
                    None => Some((pe.clone(), c.clone())),
                })
                .collect();
            Set { members, children }
        })
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        fn rec(s: &Set, prefix: &mut Path, out: &mut Vec<Path>) {
            crate::deep::guard(|| {
                for (pe, member, child) in s.level() {
                    prefix.push(pe.clone());
                    if member {
                        out.push(prefix.clone());
                    }
                    if let Some(c) = child {
                        rec(c, prefix, out);
                    }
                    prefix.pop();
                }
            })
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
        match self.children.binary_search_by(|(p, _)| p.cmp(&pe)) {
            Ok(i) => self.children[i].1.extend(&child),
            Err(i) => self.children.insert(i, (pe, child)),
        }
    }

    /// Every element of this level in order: (element, a member?, the set below it).
    fn level(&self) -> Vec<(&Pe, bool, Option<&Set>)> {
        let mut out = Vec::with_capacity(self.members.len() + self.children.len());
        let (mut i, mut j) = (0, 0);
        loop {
            match (self.members.get(i), self.children.get(j)) {
                (Some(m), Some((c, s))) => match m.cmp(c) {
                    std::cmp::Ordering::Equal => {
                        out.push((m, true, Some(s)));
                        i += 1;
                        j += 1;
                    }
                    std::cmp::Ordering::Less => {
                        out.push((m, true, None));
                        i += 1;
                    }
                    std::cmp::Ordering::Greater => {
                        out.push((c, false, Some(s)));
                        j += 1;
                    }
                },
                (Some(m), None) => {
                    out.push((m, true, None));
                    i += 1;
                }
                (None, Some((c, s))) => {
                    out.push((c, false, Some(s)));
                    j += 1;
                }
                (None, None) => return out,
            }
        }
    }

    /// Adds `pe` as a member of this level.
    pub fn insert_member(&mut self, pe: Pe) {
        if self.members.last().is_none_or(|l| *l < pe) {
            self.members.push(pe);
        } else if let Err(i) = self.members.binary_search(&pe) {
            self.members.insert(i, pe);
        }
    }

    /// The `fieldsV1` JSON of this set.
    pub fn to_fields_v1(&self) -> Value {
        crate::deep::guard(|| {
            let mut m = Map::new();
            for (pe, member, child) in self.level() {
                let mut node = match child.map(Set::to_fields_v1) {
                    Some(Value::Object(o)) => o,
                    _ => Map::new(),
                };
                if member && !node.is_empty() {
                    node.insert(".".into(), Value::Object(Map::new()));
                }
                m.insert(pe.encode(), Value::Object(node));
            }
            Value::Object(m)
        })
    }

    /// Writes this set as `fieldsV1` JSON straight to `out` (no [`Value`] tree: a set nested
    /// 10,000 deep would take a deep recursion to drop).
    pub fn write_fields_v1(&self, out: &mut String) {
        crate::deep::guard(|| {
            out.push('{');
            for (i, (pe, member, child)) in self.level().into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(pe.encode()).to_string());
                out.push(':');
                match child {
                    Some(c) => {
                        let mark = out.len();
                        c.write_fields_v1(out);
                        if member && out.len() > mark + 2 {
                            // `{...}` becomes `{".":{},...}`.
                            out.insert_str(mark + 1, "\".\":{},");
                        }
                    }
                    None => out.push_str("{}"),
                }
            }
            out.push('}');
        })
    }

    /// Reads `fieldsV1` (an unknown key is an error: the entry cannot be trusted).
    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        crate::deep::guard(|| {
            let Some(m) = v.as_object() else {
                return Err("fieldsV1 is not an object".into());
            };
            let mut members = Vec::new();
            let mut children = Vec::new();
            for (k, child) in m {
                if k == "." {
                    continue;
                }
                let pe = Pe::decode(k).ok_or_else(|| format!("unknown field set key {:?}", k.chars().take(64).collect::<String>()))?;
                let cm = child.as_object().ok_or_else(|| format!("field set node {:?} is not an object", k.chars().take(64).collect::<String>()))?;
                let has_children = cm.keys().any(|c| c != ".");
                if !has_children || cm.contains_key(".") {
                    members.push(pe.clone());
                }
                if has_children {
                    children.push((pe, Set::from_fields_v1(child)?));
                }
            }
            Ok(Set::from_parts(members, children))
        })
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
