//! Would a server-side apply change anything? The agent's resync asks this of every
//! object: it re-applies only when a forced apply of the desired object by its field
//! manager would change the stored object or any manager's fields. Answered by carrying
//! out that apply here, as the server would ([`crate::server::apply_parts`]), on the live
//! object it returned ([`Live`], its managed fields read once), and comparing.
//!
//! The cost is linear in the object: managers are matched by identity through one map
//! (10,000 entries on one object), the apply's changed fields are taken from each
//! manager in place, and nothing is written back to JSON and read again.

use crate::fieldpath::{display, Pe};
use crate::live::Live;
use crate::schema::Schema;
use crate::server::{self, Entry, Write};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// What a re-apply would change.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Change {
    /// Top-level paths whose stored value would change (`.spec`, `.metadata`).
    pub values: Vec<String>,
    /// Managers whose field sets would change (`drover`).
    pub owners: Vec<String>,
    /// Why the change cannot be predicted (the object is then not vouched for).
    pub unknown: Option<String>,
}

impl Change {
    /// Nothing would change: the resync need not write.
    pub fn is_none(&self) -> bool {
        self.values.is_empty() && self.owners.is_empty() && self.unknown.is_none()
    }

    fn unknown(why: impl Into<String>) -> Change {
        Change { unknown: Some(why.into()), ..Change::default() }
    }
}

/// What a forced apply of `desired` by `manager` would change on `live` (the object as
/// the API server returned it; taken, so that its memory serves the comparison). An object the apply cannot be simulated on (managed
/// fields that cannot be read, content nested deeper than [`crate::live::MAX_DEPTH`], a
/// field the schema does not have) is [`Change::unknown`], with the reason.
pub fn apply_change(schema: &Schema, live: Live, desired: &Value, manager: &str) -> Change {
    let Live { object, entries, incomplete, .. } = live;
    if let Some(why) = incomplete {
        return Change::unknown(format!("not compared: {why}"));
    }
    let before = match entries {
        Ok(e) => e,
        Err(e) => return Change::unknown(format!("its managed fields cannot be read: {e}")),
    };
    let api_version = desired["apiVersion"].as_str().unwrap_or_default();
    let w = Write { manager, api_version, subresource: None, now: "1970-01-01T00:00:00Z" };
    let (stored, after) = match server::apply_parts(schema, Some(&object), before.clone(), desired, &w, true) {
        Ok(s) => s,
        Err(e) => return Change::unknown(format!("not predictable: {e}")),
    };
    let mut change = Change { owners: changed_owners(&before, &after), ..Change::default() };
    drop((before, after));
    // The stored object is normalised already; the live one as the model would store it
    // (in place: the live object is not needed any more), so what the model does not know
    // about untouched fields cancels out.
    let mut b = object;
    server::normalize(schema, &mut b);
    let keys = b.as_object().into_iter().flat_map(|o| o.keys()).chain(stored.as_object().into_iter().flat_map(|o| o.keys()));
    for k in keys {
        let path = display(&[Pe::field(k)]);
        if !crate::typed::value_eq(&b[k], &stored[k]) && !change.values.contains(&path) {
            change.values.push(path);
        }
    }
    change
}

/// The managers (by name, in identity order) whose sets differ between `before` and
/// `after`: each identity computed once, each side indexed once.
fn changed_owners(before: &[Entry], after: &[Entry]) -> Vec<String> {
    let index = |entries: &[Entry]| -> HashMap<String, usize> { entries.iter().enumerate().map(|(i, e)| (e.identity(), i)).collect() };
    let (bi, ai) = (index(before), index(after));
    // Two entries of one identity (a hostile write) are one after any write: a change.
    let mut doubled: Vec<String> = Vec::new();
    if bi.len() < before.len() {
        for (i, e) in before.iter().enumerate() {
            if bi.get(&e.identity()) != Some(&i) && !doubled.contains(&e.manager) {
                doubled.push(e.manager.clone());
            }
        }
    }
    let mut ids: BTreeMap<&String, (Option<&Entry>, Option<&Entry>)> = BTreeMap::new();
    for (id, &i) in &bi {
        ids.entry(id).or_default().0 = Some(&before[i]);
    }
    for (id, &i) in &ai {
        ids.entry(id).or_default().1 = Some(&after[i]);
    }
    let mut owners: Vec<String> = ids
        .into_values()
        .filter(|(b, a)| b.map(|e| &e.set) != a.map(|e| &e.set))
        .filter_map(|(b, a)| b.or(a).map(|e| e.manager.clone()))
        .collect();
    owners.extend(doubled.into_iter().filter(|m| !owners.contains(m)).collect::<Vec<_>>());
    owners
}
