//! A write as the API server carries it out (Kubernetes 1.30's field manager around
//! structured-merge-diff): managed-fields entries per (manager, operation, apiVersion of
//! an update, subresource), identity fields stripped, `status` ignored by the object's
//! own writes when it is a subresource, `before-first-apply` for an object nobody owned,
//! entry times that move only when something changed, the conflict message, and the
//! object stored after defaulting and the Go round trip.

use crate::fieldpath::{display, Pe, Set};
use crate::schema::Schema;
use crate::update::{self, Managers, Owned, Scope};
use crate::{defaults, roundtrip};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One `metadata.managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Field manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion of the write.
    pub api_version: String,
    /// RFC 3339 time of the manager's last change.
    pub time: Option<String>,
    /// `status`, `scale`, ...
    pub subresource: Option<String>,
    /// Owned fields.
    pub set: Set,
}

impl Entry {
    /// The identity the server keys managers by (an apply's apiVersion is not part of it).
    pub fn identity(&self) -> String {
        let av = if self.operation == "Apply" { "" } else { &self.api_version };
        format!("{}\u{0}{}\u{0}{}\u{0}{}", self.manager, self.operation, av, self.subresource.as_deref().unwrap_or(""))
    }

    /// How the server names this manager in a conflict message.
    pub fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
            if let Some(t) = &self.time {
                s.push_str(&format!(" at {t}"));
            }
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut v = json!({"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version, "fieldsType": "FieldsV1"});
        // Set, not through `json!` (which would copy it with a recursive serializer).
        v["fieldsV1"] = self.set.to_fields_v1();
        if let Some(t) = &self.time {
            v["time"] = json!(t);
        }
        if let Some(s) = &self.subresource {
            v["subresource"] = json!(s);
        }
        v
    }
}

/// Reads `metadata.managedFields` (an entry that cannot be read is an error).
pub fn read_entries(object: &Value) -> Result<Vec<Entry>, String> {
    let Some(list) = object.pointer("/metadata/managedFields") else { return Ok(Vec::new()) };
    let Some(list) = list.as_array() else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|e| {
            Ok(Entry {
                manager: e["manager"].as_str().unwrap_or_default().to_string(),
                operation: e["operation"].as_str().ok_or("managedFields entry without operation")?.to_string(),
                api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: e["time"].as_str().map(str::to_string),
                subresource: e["subresource"].as_str().filter(|s| !s.is_empty()).map(str::to_string),
                set: match e.get("fieldsV1") {
                    Some(f) => Set::from_fields_v1(f)?,
                    None => Set::new(),
                },
            })
        })
        .collect()
}

/// Entries with fields, in the server's order (operation, time, manager).
fn in_order(entries: &[Entry]) -> Vec<&Entry> {
    let mut sorted: Vec<&Entry> = entries.iter().filter(|e| !e.set.is_empty()).collect();
    sorted.sort_by(|a, b| (&a.operation, &a.time, &a.manager, &a.api_version, &a.subresource).cmp(&(&b.operation, &b.time, &b.manager, &b.api_version, &b.subresource)));
    sorted
}

/// `metadata.managedFields` as JSON text (the server's order), written without a
/// [`Value`] tree: for a request body that sends entries back as they are (one may nest
/// 10,000 deep).
pub fn entries_json(entries: &[Entry]) -> String {
    let mut out = String::from("[");
    for (i, e) in in_order(entries).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let mut head = json!({"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version, "fieldsType": "FieldsV1"});
        if let Some(t) = &e.time {
            head["time"] = json!(t);
        }
        if let Some(s) = &e.subresource {
            head["subresource"] = json!(s);
        }
        let head = head.to_string();
        out.push_str(&head[..head.len() - 1]);
        out.push_str(",\"fieldsV1\":");
        e.set.write_fields_v1(&mut out);
        out.push('}');
    }
    out.push(']');
    out
}

/// Writes entries into `metadata.managedFields` (in the server's order: operation,
/// time, manager), or removes the list when there are none.
pub fn write_entries(object: &mut Value, entries: &[Entry]) {
    let sorted = in_order(entries);
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if sorted.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(sorted.iter().map(|e| e.to_json()).collect()));
        }
    }
}

/// What a write says about itself.
#[derive(Clone, Debug)]
pub struct Write<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// The apiVersion of the request.
    pub api_version: &'a str,
    /// A subresource write (`status`).
    pub subresource: Option<&'a str>,
    /// Now, RFC 3339.
    pub now: &'a str,
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Another manager owns a field the apply would change (409).
    #[error("Apply failed with {} conflict{}: {message}", conflicts.len(), if conflicts.len() == 1 { "" } else { "s" })]
    Conflict {
        /// `conflict with "m": .path` or the grouped form.
        message: String,
        /// (printed manager, printed path) per conflict.
        conflicts: Vec<(String, String)>,
    },
    /// The object has fields its schema does not declare.
    #[error("{0}")]
    Unknown(String),
    /// The object or its managed fields cannot be read.
    #[error("{0}")]
    Invalid(String),
}

fn strip_set() -> Set {
    let mut s = Set::new();
    for p in [&["apiVersion"][..], &["kind"], &["metadata"]] {
        s.insert(&p.iter().map(|f| Pe::field(f)).collect::<Vec<_>>());
    }
    for f in ["name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation", "managedFields", "resourceVersion"] {
        s.insert(&[Pe::field("metadata"), Pe::field(f)]);
    }
    s
}

/// Fields a write of this kind leaves to someone else: `status` for the object's own
/// writes when status is a subresource; everything but `status` for a status write.
fn ignored(schema: &Schema, object: &Value, subresource: Option<&str>) -> Set {
    let mut s = Set::new();
    match subresource {
        Some("status") => {
            for k in object.as_object().into_iter().flat_map(|o| o.keys()) {
                if !["status", "metadata", "apiVersion", "kind"].contains(&k.as_str()) {
                    s.insert(&[Pe::field(k)]);
                }
            }
            s.insert(&[Pe::field("spec")]);
        }
        _ if schema.status_subresource => s.insert(&[Pe::field("status")]),
        _ => {}
    }
    s
}

/// `object` without `metadata.managedFields` (copied without them: 10,000 entries are
/// never copied to be thrown away).
pub fn without_managed_fields(object: &Value) -> Value {
    match object {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("metadata", Value::Object(m)) => (k.clone(), Value::Object(m.iter().filter(|(mk, _)| *mk != "managedFields").map(|(mk, mv)| (mk.clone(), mv.clone())).collect())),
                    _ => (k.clone(), v.clone()),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The managers of `entries` (their sets moved, not copied) and each entry's other fields.
fn to_managers(entries: Vec<Entry>) -> (Managers, BTreeMap<String, Entry>) {
    let mut managers = Managers::new();
    let mut info = BTreeMap::new();
    for mut e in entries {
        let id = e.identity();
        let set = std::mem::take(&mut e.set);
        managers.insert(id.clone(), Owned { set, api_version: e.api_version.clone(), applied: e.operation == "Apply" });
        info.insert(id, e);
    }
    (managers, info)
}

fn from_managers(managers: Managers, mut info: BTreeMap<String, Entry>) -> Vec<Entry> {
    managers
        .into_iter()
        .filter_map(|(id, o)| {
            let mut e = info.remove(&id)?;
            e.set = o.set;
            e.api_version = o.api_version;
            Some(e)
        })
        .collect()
}

/// What a write may not change stays as it was (the strategies' `PrepareForUpdate`):
/// the object's own writes keep the stored `status` when it is a subresource (a create
/// starts with none), a status write keeps everything but `status` and `metadata`.
fn keep_other_side(schema: &Schema, live: Option<&Value>, object: &mut Value, subresource: Option<&str>) {
    let Some(o) = object.as_object_mut() else { return };
    match subresource {
        Some("status") => {
            let Some(l) = live.and_then(Value::as_object) else { return };
            o.retain(|k, _| ["status", "metadata", "apiVersion", "kind"].contains(&k.as_str()));
            for (k, v) in l {
                if !["status", "metadata", "apiVersion", "kind"].contains(&k.as_str()) {
                    o.insert(k.clone(), v.clone());
                }
            }
        }
        None if schema.status_subresource => match live.and_then(|l| l.get("status")) {
            Some(st) => {
                o.insert("status".into(), st.clone());
            }
            None => {
                o.remove("status");
            }
        },
        _ => {}
    }
}

/// The object as stored: defaults applied and the Go round trip done.
pub fn normalize(schema: &Schema, object: &mut Value) -> Vec<String> {
    if schema.builtin {
        defaults::apply(schema, object);
        roundtrip::apply(schema, object)
    } else {
        let unknown = roundtrip::apply(schema, object);
        defaults::schema_defaults(&schema.root, object);
        unknown
    }
}

/// A server-side apply of `config` onto `live` (None: the object does not exist yet).
/// Returns the object to store, managed fields included.
pub fn apply(schema: &Schema, live: Option<&Value>, config: &Value, w: &Write, force: bool) -> Result<Value, WriteError> {
    let entries = match live {
        Some(l) => read_entries(l).map_err(WriteError::Invalid)?,
        None => Vec::new(),
    };
    let content = live.map(without_managed_fields);
    let (mut stored, entries) = apply_parts(schema, content.as_ref(), entries, config, w, force)?;
    write_entries(&mut stored, &entries);
    Ok(stored)
}

/// [`apply`] on a live object given as its content (without `metadata.managedFields`) and
/// its entries, read once; returns the stored content and entries the same way.
pub fn apply_parts(schema: &Schema, live: Option<&Value>, mut entries: Vec<Entry>, config: &Value, w: &Write, force: bool) -> Result<(Value, Vec<Entry>), WriteError> {
    if let Some(first) = unknown_fields(schema, config).first() {
        return Err(WriteError::Unknown(format!("{first}: field not declared in schema")));
    }
    if config.pointer("/metadata/managedFields").is_some_and(|m| !m.is_null()) {
        return Err(WriteError::Invalid("metadata.managedFields must be nil".into()));
    }
    let empty = json!({});
    let live_obj = live.unwrap_or(&empty);
    if live.is_some() && entries.is_empty() {
        // Nobody owned anything: the server records who did first.
        let first = Write { manager: "before-first-apply", api_version: w.api_version, subresource: None, now: w.now };
        let mut managers = Managers::new();
        let ig = ignored(schema, live_obj, None);
        update::update(&json!({}), live_obj, Scope { ty: &schema.root, ignored: &ig, version: w.api_version }, &mut managers, "current-operation");
        if let Some(o) = managers.remove("current-operation") {
            entries.push(Entry { manager: first.manager.into(), operation: "Update".into(), api_version: w.api_version.into(), time: Some(w.now.into()), subresource: None, set: o.set.difference(&strip_set()) });
        }
    }
    let me = Entry { manager: w.manager.into(), operation: "Apply".into(), api_version: w.api_version.into(), time: Some(w.now.into()), subresource: w.subresource.map(str::to_string), set: Set::new() };
    let my_id = me.identity();
    let (mut managers, mut info) = to_managers(entries);
    info.entry(my_id.clone()).or_insert(me);
    let ig = ignored(schema, config, w.subresource);
    let merged = update::apply(live_obj, config, Scope { ty: &schema.root, ignored: &ig, version: w.api_version }, &mut managers, &my_id, force).map_err(|conflicts| {
        let printed: Vec<(String, String)> = conflicts
            .iter()
            .map(|c| (info.get(&c.manager).map(Entry::printed).unwrap_or_else(|| format!("{:?}", c.manager)), display(&c.path)))
            .collect();
        WriteError::Conflict { message: conflict_message(&printed), conflicts: printed }
    })?;
    if let Some(o) = managers.get_mut(&my_id) {
        o.set = o.set.difference(&strip_set());
    }
    managers.retain(|_, o| !o.set.is_empty());
    let changed = !crate::typed::value_eq(live_obj, &merged);
    if let Some(e) = info.get_mut(&my_id) {
        if changed || live.is_none() {
            e.time = Some(w.now.into());
        }
        e.api_version = w.api_version.into();
    }
    let mut stored = merged;
    keep_other_side(schema, live, &mut stored, w.subresource);
    normalize(schema, &mut stored);
    Ok((stored, from_managers(managers, info)))
}

/// Fields of `object` its schema does not declare (`.spec.foo`), as the server reports
/// them to a client that asked for strict field validation.
pub fn unknown_fields(schema: &Schema, object: &Value) -> Vec<String> {
    let mut probe = object.clone();
    roundtrip::apply(&Schema { builtin: false, ..schema.clone() }, &mut probe)
}

/// Any other write (create, update, patch) by `w.manager` that turns `live` into `new`
/// (decoded by the server here: defaults applied, undeclared fields dropped). Managed fields in `new`, when set, replace
/// the live ones before the write is recorded (how a client restores a saved state).
pub fn update(schema: &Schema, live: Option<&Value>, new: &Value, w: &Write) -> Result<Value, WriteError> {
    let requested = read_entries(new).map_err(WriteError::Invalid)?;
    let reset = new.pointer("/metadata/managedFields").and_then(Value::as_array).is_some_and(|a| a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty));
    let entries = if reset {
        Vec::new()
    } else if !requested.is_empty() && w.subresource.is_none() {
        requested
    } else {
        match live {
            Some(l) => read_entries(l).map_err(WriteError::Invalid)?,
            None => Vec::new(),
        }
    };
    let live_obj = live.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let mut new_obj = without_managed_fields(new);
    keep_other_side(schema, live, &mut new_obj, w.subresource);
    normalize(schema, &mut new_obj);
    let (mut managers, mut info) = to_managers(entries);
    let ig = ignored(schema, &new_obj, w.subresource);
    update::update(&live_obj, &new_obj, Scope { ty: &schema.root, ignored: &ig, version: w.api_version }, &mut managers, "current-operation");
    if let Some(op) = managers.remove("current-operation") {
        let me = Entry { manager: w.manager.into(), operation: "Update".into(), api_version: w.api_version.into(), time: Some(w.now.into()), subresource: w.subresource.map(str::to_string), set: Set::new() };
        let id = me.identity();
        let set = managers.remove(&id).map(|o| o.set.union(&op.set)).unwrap_or(op.set).difference(&strip_set());
        if !set.is_empty() {
            managers.insert(id.clone(), Owned { set, api_version: w.api_version.into(), applied: false });
            info.insert(id, me);
        }
    }
    let mut stored = new_obj;
    write_entries(&mut stored, &from_managers(managers, info));
    Ok(stored)
}

/// The server's conflict message (without the "Apply failed with N conflicts: " head).
pub fn conflict_message(conflicts: &[(String, String)]) -> String {
    if conflicts.len() == 1 {
        return format!("conflict with {}: {}", conflicts[0].0, conflicts[0].1);
    }
    let mut managers: Vec<&String> = conflicts.iter().map(|c| &c.0).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}:"));
        for (_, p) in conflicts.iter().filter(|c| &c.0 == m) {
            lines.push(format!("- {p}"));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data})
    }

    #[test]
    fn first_apply_to_an_object_nobody_owned_records_before_first_apply() {
        let schema = Schema::builtin("v1", "ConfigMap").unwrap();
        let w = Write { manager: "drover", api_version: "v1", subresource: None, now: "t1" };
        // An object whose managed fields were cleared (`[{}]`), as old clients left them.
        let live = cm(json!({"a": "1", "b": "2"}));
        let out = apply(&schema, Some(&live), &cm(json!({"a": "1"})), &w, false).unwrap();
        let entries = read_entries(&out).unwrap();
        let first = entries.iter().find(|e| e.manager == "before-first-apply").expect("recorded");
        assert_eq!(first.operation, "Update");
        assert_eq!(first.set.to_fields_v1(), json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}));
        // b is not drover's: it stays.
        assert_eq!(out["data"], json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn entries_written_as_text_read_back_as_written_as_values() {
        let v = json!({"metadata": {"managedFields": [
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "time": "t2", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}},
            {"manager": "a", "operation": "Apply", "apiVersion": "v1", "time": "t1", "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"k:{\"type\":\"Ready\"}": {".": {}, "f:type": {}}}}}]}});
        let entries = read_entries(&v).unwrap();
        let mut written = json!({"metadata": {}});
        write_entries(&mut written, &entries);
        let text: Value = serde_json::from_str(&entries_json(&entries)).unwrap();
        assert_eq!(text, written["metadata"]["managedFields"]);
        assert_eq!(text[0]["manager"], "a", "the server's order");
    }

    #[test]
    fn status_of_a_status_subresource_kind_is_not_the_applys() {
        let schema = Schema::builtin("apps/v1", "Deployment").unwrap();
        let w = Write { manager: "drover", api_version: "apps/v1", subresource: None, now: "t1" };
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"replicas": 9}});
        let out = apply(&schema, None, &d, &w, false).unwrap();
        assert_eq!(out["status"], json!({}), "a create starts without status");
        let mine = &read_entries(&out).unwrap()[0];
        assert!(mine.set.to_fields_v1().get("f:status").is_none());
    }
}
