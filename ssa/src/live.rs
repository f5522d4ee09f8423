//! A live object as an API server returns it, read within bounds: what the compare
//! ([`crate::verdict`]) works on.
//!
//! An API server stores what its JSON decoder accepts: nesting up to 10,000 levels, in
//! `metadata.managedFields[].fieldsV1` as anywhere else, 10,000 managers or 100,000
//! fields in an entry, up to ~1.5 MiB. Reading such an object must neither overflow the
//! stack nor cost many times its size, and one hostile entry must not make the object
//! unreadable:
//! - the text is decoded without serde_json's recursion limit, on a stack that grows
//!   onto the heap as it nests ([`serde_stacker`]);
//! - `managedFields` never becomes a [`Value`] tree: each entry is read straight into an
//!   [`Entry`] (a compact [`crate::fieldpath::Set`]), once; an entry that cannot be read
//!   makes [`Live::entries`] an error naming it, the rest of the object is still read;
//! - the rest of the object is kept down to [`MAX_DEPTH`] levels; a value nested deeper
//!   is left out and [`Live::incomplete`] says where (the compare then cannot decide, and
//!   says so, instead of the walks over values recursing 10,000 deep);
//! - what the read holds is counted as it is built (a JSON map of one key takes ~600
//!   bytes as a [`Value`], so 1.5 MiB of small maps become tens of MiB): past
//!   [`MAX_HEAP`] the rest of the content is skipped and [`Live::incomplete`] says so. The
//!   compare of an object holds a few times what its read holds; this keeps one object
//!   within the agent's 64 MiB. `metadata` (but its `managedFields`) is always read.
//!
//! Errors never quote the text: a Secret's data must not reach a log.

use crate::fieldpath::{Pe, Set};
use crate::server::Entry;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// The visitor methods for a value of another kind than the one a visitor reads: every
/// scalar answers `$answer`; a sequence or map (`seq`/`map`) is read to its end first.
macro_rules! otherwise {
    ($answer:expr, $drained:ident) => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($answer)
        }
        otherwise!(@drain $drained, $answer);
    };
    (@drain seq, $answer:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($answer)
        }
    };
    (@drain map, $answer:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($answer)
        }
    };
}

/// Levels of an object's content (outside `managedFields`) kept for the compare.
pub const MAX_DEPTH: usize = 512;

/// What the read of one object may hold (its tree and its managed fields' sets, as
/// estimated while they are built). The compare holds up to ~4 times that at its peak
/// (the merged object, the sets of the apply): 32 MiB, beside the agent's own ~20 MiB,
/// within the DaemonSet's 64 MiB.
pub const MAX_HEAP: usize = 8 << 20;

/// Estimated heap of the parts of a [`Value`] and a field set, in bytes, as the allocator
/// hands them out (chunks, not requested sizes): a map's `BTreeMap` leaf, a map entry, an
/// array element (vectors grow by doubling), a field set element (its place in its level),
/// a field set node with elements below it (its level's vectors), a managedFields entry.
const MAP_COST: usize = 700;
const ENTRY_COST: usize = 80;
const ELEMENT_COST: usize = 64;
const SET_ELEMENT_COST: usize = 64;
const SET_NODE_COST: usize = 160;
const ENTRY_NODE_COST: usize = 256;

/// A string's estimated heap (the allocator's smallest chunk is 32 bytes).
fn text_cost(len: usize) -> usize {
    (len + 24).max(32)
}

/// An object as the API server returned it.
#[derive(Debug)]
pub struct Live {
    /// The object without `metadata.managedFields`, down to [`MAX_DEPTH`] levels.
    pub object: Value,
    /// Its `metadata.managedFields` entries, or why one of them cannot be read.
    pub entries: Result<Vec<Entry>, String>,
    /// Where the object nests deeper than [`MAX_DEPTH`], or that it takes more than
    /// [`MAX_HEAP`] (that part is not in `object`).
    pub incomplete: Option<String>,
    /// What the read holds, estimated (bytes).
    pub heap: usize,
}

impl Live {
    /// Reads one object from JSON `text`. The error (malformed JSON, not an object) names
    /// the line and column, never the text.
    pub fn parse(text: &str) -> Result<Live, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        de.disable_recursion_limit();
        let live = read(&mut de).map_err(|e| format!("the object is not valid JSON: {}", position(&e)))?;
        de.end().map_err(|e| format!("the object is not valid JSON: {}", position(&e)))?;
        Ok(live)
    }

    /// Reads one object from a deserializer positioned on it (a LIST page's item).
    pub fn read<'de, D: Deserializer<'de>>(de: D) -> Result<Live, D::Error> {
        read(de)
    }

    /// An object already parsed (tests, recorded scenarios): its entries read from its
    /// `managedFields`, no depth bound.
    pub fn from_value(v: &Value) -> Live {
        Live { object: crate::server::without_managed_fields(v), entries: crate::server::read_entries(v), incomplete: None, heap: 0 }
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        self.object.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default()
    }
}

/// `metadata.resourceVersion` of an object in JSON `text`, nothing else kept (an apply's
/// answer: the object is not needed, only whether it changed).
pub fn resource_version(text: &str) -> Result<String, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let rv = serde_stacker::Deserializer::new(&mut de).deserialize_map(Pick { path: &["metadata", "resourceVersion"] }).map_err(|e| format!("the object is not valid JSON: {}", position(&e)))?;
    de.end().map_err(|e| format!("the object is not valid JSON: {}", position(&e)))?;
    Ok(rv.unwrap_or_default())
}

/// The string at `path` of a map; everything else skipped.
struct Pick<'p> {
    path: &'p [&'p str],
}

impl<'de> DeserializeSeed<'de> for Pick<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        match self.path {
            [] => de.deserialize_any(Text),
            _ => de.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Pick<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.path[0] {
                found = map.next_value_seed(Pick { path: &self.path[1..] })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
    otherwise!(None, seq);
}

/// A serde_json error without its text: "EOF while parsing ... at line 1 column 7".
fn position(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Io => "read error".into(),
        serde_json::error::Category::Eof => format!("it ends early (line {}, column {})", e.line(), e.column()),
        serde_json::error::Category::Syntax => format!("syntax error at line {}, column {}", e.line(), e.column()),
        serde_json::error::Category::Data => format!("not an object (line {}, column {})", e.line(), e.column()),
    }
}

fn read<'de, D: Deserializer<'de>>(de: D) -> Result<Live, D::Error> {
    let mut state = State::default();
    let object = serde_stacker::Deserializer::new(de).deserialize_map(ObjectVisitor { state: &mut state })?;
    Ok(Live { object, entries: state.entries.unwrap_or_else(|| Ok(Vec::new())), incomplete: state.incomplete, heap: state.spent })
}

#[derive(Default)]
struct State {
    entries: Option<Result<Vec<Entry>, String>>,
    incomplete: Option<String>,
    /// Estimated bytes held so far.
    spent: usize,
    /// Metadata is read whatever it costs (it is bounded by the server's own checks).
    unmetered: bool,
}

impl State {
    /// Counts `bytes`; false (and the object marked incomplete) past [`MAX_HEAP`].
    fn spend(&mut self, bytes: usize) -> bool {
        self.spent += bytes;
        if self.unmetered || self.spent <= MAX_HEAP {
            return true;
        }
        if self.incomplete.is_none() {
            self.incomplete = Some(format!("it takes more than {} MiB in memory once read (drover compares objects up to that)", MAX_HEAP >> 20));
        }
        false
    }

    fn over(&self) -> bool {
        !self.unmetered && self.spent > MAX_HEAP
    }
}

/// The object's top level: `metadata` read by [`MetadataVisitor`], the rest bounded.
struct ObjectVisitor<'s> {
    state: &'s mut State,
}

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = if key == "metadata" {
                map.next_value_seed(MetadataSeed { state: self.state })?
            } else {
                map.next_value_seed(Bounded { depth: 2, path: &key, state: &mut *self.state })?
            };
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

struct MetadataSeed<'s> {
    state: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for MetadataSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetadataSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("object metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "managedFields" {
                self.state.entries = Some(map.next_value_seed(EntriesSeed { state: &mut *self.state })?);
                continue;
            }
            let path = format!("metadata.{key}");
            let metered = std::mem::replace(&mut self.state.unmetered, true);
            let v = map.next_value_seed(Bounded { depth: 3, path: &path, state: &mut *self.state });
            self.state.unmetered = metered;
            out.insert(key, v?);
        }
        Ok(Value::Object(out))
    }

    // Anything else is kept as it is (bounded), as the server sent it.
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Bounded { depth: 2, path: "metadata", state: &mut *self.state }.visit_seq(seq)
    }
}

/// A value kept down to [`MAX_DEPTH`] levels (`depth`: this value's level) and within
/// [`MAX_HEAP`].
struct Bounded<'a> {
    depth: usize,
    path: &'a str,
    state: &'a mut State,
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        if self.state.over() {
            de.deserialize_ignored_any(IgnoredAny)?;
            return Ok(Value::Null);
        }
        if self.depth > MAX_DEPTH {
            de.deserialize_ignored_any(IgnoredAny)?;
            if self.state.incomplete.is_none() {
                self.state.incomplete = Some(format!("{} nests deeper than {MAX_DEPTH} levels", self.path));
            }
            return Ok(Value::Null);
        }
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.state.spend(text_cost(v.len()));
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.state.spend(text_cost(v.len()));
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Bounded { depth: self.depth + 1, path: self.path, state: &mut *self.state })? {
            self.state.spend(ELEMENT_COST);
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.state.spend(MAP_COST);
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.state.spend(ENTRY_COST + text_cost(key.len()));
            let v = map.next_value_seed(Bounded { depth: self.depth + 1, path: self.path, state: &mut *self.state })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// `managedFields`: its entries, or why one of them cannot be read (the JSON is still
/// read to its end; only a JSON syntax error fails the object).
struct EntriesSeed<'s> {
    state: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for EntriesSeed<'_> {
    type Value = Result<Vec<Entry>, String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntriesSeed<'_> {
    type Value = Result<Vec<Entry>, String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("managedFields")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        let mut error = None;
        let mut i = 0;
        while let Some(e) = seq.next_element_seed(EntrySeed { state: &mut *self.state })? {
            match e {
                Ok(e) if error.is_none() => entries.push(e),
                Ok(_) => {}
                Err(m) => {
                    error.get_or_insert(format!("managedFields[{i}]: {m}"));
                    entries.clear();
                }
            }
            i += 1;
        }
        Ok(error.map_or(Ok(entries), Err))
    }

    // A list the server would not return; read as the old reader did (no entries).
    otherwise!(Ok(Vec::new()), map);
}

/// One entry, as [`crate::server::read_entries`] reads it from a value.
struct EntrySeed<'s> {
    state: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = Result<Entry, String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

/// A string field of an entry (anything else: absent, as `as_str` reads it).
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Text {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = Result<Entry, String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a managedFields entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut manager, mut operation, mut api_version, mut time, mut subresource) = (None, None, None, None, None);
        let mut set = Ok(Set::new());
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "manager" => manager = map.next_value_seed(Text)?,
                "operation" => operation = map.next_value_seed(Text)?,
                "apiVersion" => api_version = map.next_value_seed(Text)?,
                "time" => time = map.next_value_seed(Text)?,
                "subresource" => subresource = map.next_value_seed(Text)?,
                "fieldsV1" => set = map.next_value_seed(SetSeed { state: &mut *self.state })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if self.state.over() {
            return Ok(Err(self.state.incomplete.clone().unwrap_or_default()));
        }
        self.state.spend(ENTRY_NODE_COST);
        let Some(operation) = operation else { return Ok(Err("managedFields entry without operation".into())) };
        Ok(set.map(|set| Entry {
            manager: manager.unwrap_or_default(),
            operation,
            api_version: api_version.unwrap_or_default(),
            time,
            subresource: subresource.filter(|s| !s.is_empty()),
            set,
        }))
    }
    otherwise!(Err("managedFields entry without operation".into()), seq);
}

/// A `fieldsV1` node read straight into a [`Set`] (as [`Set::from_fields_v1`] reads a
/// value): its elements, which of them are members, and the sets below them.
struct SetSeed<'s> {
    state: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for SetSeed<'_> {
    type Value = Result<Set, String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SetSeed<'_> {
    type Value = Result<Set, String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a fieldsV1 object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        read_node(&mut map, self.state).map(|n| n.map(|n| n.set))
    }
    otherwise!(Err("fieldsV1 is not an object".into()), seq);
}

/// One node of a field set: the set below it and whether it holds `.`.
struct Node {
    set: Set,
    dot: bool,
}

/// Reads a node's keys; the first error is kept and the rest of the node still read.
fn read_node<'de, A: MapAccess<'de>>(map: &mut A, state: &mut State) -> Result<Result<Node, String>, A::Error> {
    let mut members = Vec::new();
    let mut children = Vec::new();
    let mut dot = false;
    let mut error: Option<String> = None;
    while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
        if key == "." {
            dot = true;
            map.next_value::<IgnoredAny>()?;
            continue;
        }
        if error.is_none() && !state.spend(SET_ELEMENT_COST + text_cost(key.len())) {
            error = state.incomplete.clone();
        }
        let pe = if error.is_none() { Pe::decode(&key) } else { None };
        let child = if error.is_none() {
            map.next_value_seed(NodeSeed { state: &mut *state })?
        } else {
            map.next_value::<IgnoredAny>()?;
            Err(String::new())
        };
        match (pe, child) {
            (_, _) if error.is_some() => {}
            (None, _) => error = Some(format!("unknown field set key {:?}", key.chars().take(64).collect::<String>())),
            (Some(_), Err(e)) => error = Some(e),
            (Some(pe), Ok(node)) => {
                let has_children = !node.set.is_empty();
                if has_children && !state.spend(SET_NODE_COST) {
                    error = state.incomplete.clone();
                    continue;
                }
                if !has_children || node.dot {
                    members.push(pe.clone());
                }
                if has_children {
                    children.push((pe, node.set));
                }
            }
        }
    }
    Ok(match error {
        Some(e) => Err(e),
        None => Ok(Node { set: Set::from_parts(members, children), dot }),
    })
}

/// A node below a key: must be an object.
struct NodeSeed<'s> {
    state: &'s mut State,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Result<Node, String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Result<Node, String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field set node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        crate::deep::guard(|| read_node(&mut map, self.state))
    }
    otherwise!(Err("a field set node is not an object".into()), seq);
}

