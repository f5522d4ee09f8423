//! Field management: `metadata.managedFields` entries per manager and the two ways they
//! change. Server-side apply (operation `Apply`) sets the fields a manager applies,
//! removes the ones it stopped applying (unless someone else owns them) and refuses
//! (409) to change another manager's field to a different value unless forced. Every
//! other write (create, update, merge patch; operation `Update`) gives the writer the
//! fields it changed and takes them from everyone else, without conflicts.

use super::fields::{self, FieldSet, Path};
use super::status::ApiError;
use serde_json::{json, Value};

/// One `metadata.managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Field manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the manager used.
    pub api_version: String,
    /// RFC 3339 time of the manager's last change.
    pub time: String,
    /// `status` for status-subresource writes.
    pub subresource: Option<String>,
    /// Owned leaf paths.
    pub fields: FieldSet,
}

impl Entry {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields::encode(&self.fields),
        });
        if let Some(s) = &self.subresource {
            v["subresource"] = json!(s);
        }
        v
    }

    /// How the real server names this manager in a conflict message.
    fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
            if !self.time.is_empty() {
                s.push_str(&format!(" at {}", self.time));
            }
        }
        s
    }
}

/// The managed-fields entries of an object.
pub fn read_entries(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| {
                    Some(Entry {
                        manager: e["manager"].as_str()?.to_string(),
                        operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                        api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                        time: e["time"].as_str().unwrap_or_default().to_string(),
                        subresource: e["subresource"].as_str().map(str::to_string),
                        fields: fields::decode(&e["fieldsV1"]),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes entries back into `metadata.managedFields` (dropping empty ones).
pub fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Records a non-apply write by `manager` that turned `old` (None on create) into `new`.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    now: &str,
) {
    let empty = json!({});
    let old_v = old.unwrap_or(&empty);
    let (changed, removed) = if subresource == Some("status") {
        let (mut c, mut r) = fields::diff(
            &json!({"s": old_v.get("status")}),
            &json!({"s": new.get("status")}),
        );
        let fix = |s: &mut FieldSet| {
            *s = s
                .iter()
                .map(|p| {
                    std::iter::once("status".to_string())
                        .chain(p[1..].iter().cloned())
                        .collect()
                })
                .collect()
        };
        fix(&mut c);
        fix(&mut r);
        (c, r)
    } else {
        fields::diff(old_v, new)
    };
    let mut entries = read_entries(old_v);
    if changed.is_empty() && removed.is_empty() {
        write_entries(new, &entries);
        return;
    }
    let sub = subresource.map(str::to_string);
    for e in entries.iter_mut() {
        e.fields.retain(|p| !removed.contains(p));
        if !(e.manager == manager && e.operation == "Update" && e.subresource == sub) {
            e.fields
                .retain(|p| !changed.iter().any(|c| fields::overlaps(c, p)));
        }
    }
    match entries
        .iter_mut()
        .find(|e| e.manager == manager && e.operation == "Update" && e.subresource == sub)
    {
        Some(e) => {
            e.fields.extend(changed);
            e.time = now.to_string();
            e.api_version = api_version.to_string();
        }
        None => entries.push(Entry {
            manager: manager.into(),
            operation: "Update".into(),
            api_version: api_version.into(),
            time: now.into(),
            subresource: sub,
            fields: changed,
        }),
    }
    write_entries(new, &entries);
}

fn is_empty_map(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_some_and(|m| m.is_empty())
}

/// The 409 for apply conflicts, with the real server's message and causes.
fn conflict_error(conflicts: &[(String, Path)]) -> ApiError {
    let message = if conflicts.len() == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].0,
            fields::display(&conflicts[0].1)
        )
    } else {
        let mut managers: Vec<&String> = conflicts.iter().map(|c| &c.0).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for (_, p) in conflicts.iter().filter(|c| &c.0 == m) {
                lines.push(format!("- {}", fields::display(p)));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts.iter().map(|(m, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": fields::display(p)})).collect();
    let mut e = ApiError::new(409, "Conflict", message);
    e.details = Some(json!({"causes": causes}));
    e
}

/// Server-side apply of `applied` by `manager` onto `live`: returns the merged object
/// with updated managed fields, or the 409 conflict error. Status is not touched.
pub fn apply(
    live: &Value,
    applied: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    let new_set = fields::managed_leaves(applied);
    let mut entries = read_entries(live);
    let is_me =
        |e: &Entry| e.manager == manager && e.operation == "Apply" && e.subresource.is_none();
    let old_set = entries
        .iter()
        .find(|e| is_me(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();

    // Conflicts: another manager owns a path we apply (or one below it) with a different value.
    let mut conflicts: Vec<(usize, Path)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if is_me(e) || e.subresource.is_some() {
            continue;
        }
        for q in &e.fields {
            // An applied empty map owns the map itself, not the keys others put in it.
            let hit = new_set.iter().any(|p| {
                p == q
                    || (p.len() < q.len()
                        && fields::overlaps(p, q)
                        && !is_empty_map(fields::get(applied, p)))
            });
            if hit && fields::get(live, q) != fields::get(applied, q) {
                conflicts.push((i, q.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            let named: Vec<(String, Path)> = conflicts
                .iter()
                .map(|(i, p)| (entries[*i].printed(), p.clone()))
                .collect();
            return Err(conflict_error(&named));
        }
        for (i, q) in &conflicts {
            entries[*i].fields.remove(q);
        }
    }

    let mut obj = live.clone();
    // Remove what this manager applied before and no longer applies, unless shared.
    let others: Vec<&Entry> = entries.iter().filter(|e| !is_me(e)).collect();
    for p in old_set.difference(&new_set) {
        let covered = new_set.iter().any(|q| {
            fields::overlaps(p, q) && !(q.len() < p.len() && is_empty_map(fields::get(applied, q)))
        });
        if covered
            || others
                .iter()
                .any(|e| e.fields.iter().any(|q| fields::overlaps(p, q)))
        {
            continue;
        }
        let owned_leaf = |parent: &[String]| {
            new_set
                .iter()
                .chain(others.iter().flat_map(|e| e.fields.iter()))
                .any(|q| q.as_slice() == parent)
        };
        fields::remove(&mut obj, p, &owned_leaf);
    }
    for p in &new_set {
        let v = fields::get(applied, p).cloned().unwrap_or(Value::Null);
        if is_empty_map(Some(&v)) && fields::get(&obj, p).is_some_and(Value::is_object) {
            continue;
        }
        fields::set(&mut obj, p, v);
    }

    let content_changed = fields::strip_unmanaged(&obj) != fields::strip_unmanaged(live);
    match entries.iter_mut().find(|e| is_me(e)) {
        Some(e) => {
            if content_changed || e.fields != new_set || e.api_version != api_version {
                e.time = now.to_string();
            }
            e.fields = new_set;
            e.api_version = api_version.to_string();
        }
        None => entries.push(Entry {
            manager: manager.into(),
            operation: "Apply".into(),
            api_version: api_version.into(),
            time: now.into(),
            subresource: None,
            fields: new_set,
        }),
    }
    write_entries(&mut obj, &entries);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(data: Value) -> Value {
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":data})
    }

    #[test]
    fn apply_conflict_force_and_removal() {
        let live = apply(
            &cm(json!({})),
            &cm(json!({"a":"1","b":"2"})),
            "drover",
            "v1",
            false,
            "t1",
        )
        .unwrap();
        assert_eq!(live["data"], json!({"a":"1","b":"2"}));
        // Another manager edits a with a merge patch: ownership moves.
        let mut edited = live.clone();
        edited["data"]["a"] = json!("9");
        record_update(Some(&live), &mut edited, "kubectl-patch", "v1", None, "t2");
        let err = apply(
            &edited,
            &cm(json!({"a":"1","b":"2"})),
            "drover",
            "v1",
            false,
            "t3",
        )
        .unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1 at t2: .data.a"
        );
        let forced = apply(
            &edited,
            &cm(json!({"a":"1","b":"2"})),
            "drover",
            "v1",
            true,
            "t3",
        )
        .unwrap();
        assert_eq!(forced["data"]["a"], "1");
        assert_eq!(read_entries(&forced).len(), 1);
        // Stop applying b: removed.
        let dropped = apply(&forced, &cm(json!({"a":"1"})), "drover", "v1", false, "t4").unwrap();
        assert_eq!(dropped["data"], json!({"a":"1"}));
    }
}
