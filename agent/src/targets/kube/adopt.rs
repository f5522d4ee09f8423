//! Taking over what kubectl left: an object drover adopts may hold entries of
//! [`compare::ADOPTED_MANAGERS`] (`kubectl create/apply`, clients older than server-side
//! apply); their fields are folded into drover's own Apply entry before (or, for an object
//! the LIST did not find, right after) drover's apply, so a field the bundle does not set
//! is removed, as Flux does.

use serde_json::{json, Value};

use super::compare;

/// The managed fields `live` should have before drover's apply when it holds entries of
/// [`compare::ADOPTED_MANAGERS`] (what `kubectl create/apply` and clients older than
/// server-side apply left): their fields join drover's own Apply entry, so the apply
/// that follows removes every field of theirs the bundle does not set, as Flux does.
/// None when there is nothing to fold.
pub(super) fn fold_adopted(live: &Value, manager: &str) -> Option<Value> {
    let leftovers = compare::leftover_managers(live);
    if leftovers.is_empty() {
        return None;
    }
    let entries = drover_ssa::server::read_entries(live).ok()?;
    let mut mine: Option<drover_ssa::server::Entry> = None;
    let mut kept = Vec::new();
    let mut taken = drover_ssa::fieldpath::Set::new();
    for e in entries {
        if e.subresource.is_none() && leftovers.contains(&e.manager) {
            taken = taken.union(&e.set);
        } else if e.manager == manager && e.operation == "Apply" && e.subresource.is_none() {
            mine = Some(e);
        } else {
            kept.push(e);
        }
    }
    let api_version = live["apiVersion"].as_str().unwrap_or_default().to_string();
    let mut mine = mine.unwrap_or(drover_ssa::server::Entry {
        manager: manager.into(),
        operation: "Apply".into(),
        api_version,
        time: live.pointer("/metadata/creationTimestamp").and_then(Value::as_str).map(str::to_string),
        subresource: None,
        set: drover_ssa::fieldpath::Set::new(),
    });
    mine.set = mine.set.union(&taken);
    kept.push(mine);
    let mut holder = json!({"metadata": {}});
    drover_ssa::server::write_entries(&mut holder, &kept);
    holder.pointer("/metadata/managedFields").cloned()
}
