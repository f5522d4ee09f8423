//! Would a server-side apply change anything? The agent's resync asks this of every
//! object: it re-applies only when a forced apply of the desired object by its field
//! manager would change the stored object or any manager's fields. Answered by carrying
//! out that apply here, as the server would ([`crate::server::apply`]), on the live
//! object it returned, and comparing.

use crate::fieldpath::display;
use crate::schema::Schema;
use crate::server::{self, Write};
use serde_json::Value;

/// What a re-apply would change.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Change {
    /// Top-level paths whose stored value would change (`.spec`, `.metadata`).
    pub values: Vec<String>,
    /// Managers whose field sets would change (`drover`).
    pub owners: Vec<String>,
}

impl Change {
    /// Nothing would change: the resync need not write.
    pub fn is_none(&self) -> bool {
        self.values.is_empty() && self.owners.is_empty()
    }
}

/// What a forced apply of `desired` by `manager` would change on `live` (the object as
/// the API server returned it, managed fields included). An object the apply could not
/// be simulated on (unreadable managed fields, a field the schema does not have) is
/// reported as changing: the real apply decides.
pub fn apply_change(schema: &Schema, live: &Value, desired: &Value, manager: &str) -> Change {
    let api_version = desired["apiVersion"].as_str().unwrap_or_default();
    let w = Write { manager, api_version, subresource: None, now: "1970-01-01T00:00:00Z" };
    let stored = match server::apply(schema, Some(live), desired, &w, true) {
        Ok(s) => s,
        Err(e) => return Change { values: vec![format!("(not predictable: {e})")], owners: Vec::new() },
    };
    let mut change = Change::default();
    let (Ok(before), Ok(after)) = (server::read_entries(live), server::read_entries(&stored)) else {
        return Change { values: vec!["(unreadable managed fields)".into()], owners: Vec::new() };
    };
    let mut ids: Vec<String> = before.iter().chain(&after).map(|e| e.identity()).collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let b = before.iter().find(|e| e.identity() == id);
        let a = after.iter().find(|e| e.identity() == id);
        if b.map(|e| &e.set) != a.map(|e| &e.set) {
            change.owners.push(b.or(a).map(|e| e.manager.clone()).unwrap_or_default());
        }
    }
    let strip = |v: &Value, normalize: bool| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        if normalize {
            server::normalize(schema, &mut v);
        }
        v
    };
    // The stored object is normalised already; the live one as the model would store it,
    // so what the model does not know about untouched fields cancels out.
    let (b, a) = (strip(live, true), strip(&stored, false));
    for k in b.as_object().into_iter().flat_map(|o| o.keys()).chain(a.as_object().into_iter().flat_map(|o| o.keys())) {
        if !crate::typed::value_eq(&b[k], &a[k]) && !change.values.contains(&display(&[crate::fieldpath::Pe::field(k)])) {
            change.values.push(display(&[crate::fieldpath::Pe::field(k)]));
        }
    }
    change
}
