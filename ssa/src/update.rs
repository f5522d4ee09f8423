//! Who owns what after a write (structured-merge-diff's `merge.Updater`, v4.4.1): an
//! update gives the writer every field it changed and takes them from everyone else; an
//! apply merges the configuration, gives the applier exactly the fields it applied,
//! removes the fields it applied last time and no longer does (unless someone else owns
//! them), and refuses to change another manager's field unless forced.

use crate::fieldpath::{Path, Set};
use crate::schema::Type;
use crate::typed::{self, Comparison};
use serde_json::Value;
use std::collections::BTreeMap;

/// One manager's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    /// The fields.
    pub set: Set,
    /// The apiVersion they were written with.
    pub api_version: String,
    /// Written by an apply (not an update).
    pub applied: bool,
}

/// Every manager's fields, by manager identity.
pub type Managers = BTreeMap<String, Owned>;

/// What every write is judged against: the object's type, the fields this write leaves
/// to others, and the apiVersion it is made with.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The object's type.
    pub ty: &'a Type,
    /// Fields outside this write (`status` for an object whose status is a subresource).
    pub ignored: &'a Set,
    /// The write's apiVersion.
    pub version: &'a str,
}

/// A field another manager owns that a write would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager's identity.
    pub manager: String,
    /// The field.
    pub path: Path,
}

/// Recomputes ownership for a write that turned `old` into `new` (structured-merge-diff's
/// `update`): the fields it changed conflict with their other owners, and fields it
/// removed leave everyone.
fn update_inner(old: &Value, new: &Value, ty: &Type, ignored: &Set, managers: &mut Managers, workflow: &str, force: bool) -> Result<Comparison, Vec<Conflict>> {
    let mut cmp = typed::compare(old, new, ty);
    cmp.added = cmp.added.recursive_difference(ignored);
    cmp.modified = cmp.modified.recursive_difference(ignored);
    cmp.removed = cmp.removed.recursive_difference(ignored);
    let changed = cmp.modified.union(&cmp.added);
    if !force {
        let mut conflicts = Vec::new();
        for (manager, owned) in managers.iter() {
            if manager == workflow {
                continue;
            }
            for path in owned.set.intersection(&changed).paths() {
                conflicts.push(Conflict { manager: manager.clone(), path });
            }
        }
        if !conflicts.is_empty() {
            return Err(conflicts);
        }
    }
    // In place: the cost is the changed fields', not every manager's whole set.
    for (manager, owned) in managers.iter_mut() {
        if manager == workflow {
            continue;
        }
        owned.set.subtract(&changed);
        owned.set.subtract(&cmp.removed);
    }
    managers.retain(|_, o| !o.set.is_empty());
    Ok(cmp)
}

/// A create, update or patch by `manager` that turned `live` into `new`.
pub fn update(live: &Value, new: &Value, scope: Scope, managers: &mut Managers, manager: &str) {
    let Scope { ty, ignored, version } = scope;
    let cmp = update_inner(live, new, ty, ignored, managers, manager, true).expect("forced");
    let prev = managers.remove(manager).map(|o| o.set).unwrap_or_default();
    let set = prev
        .difference(&cmp.removed)
        .union(&cmp.modified)
        .union(&cmp.added)
        .recursive_difference(ignored);
    if !set.is_empty() {
        managers.insert(manager.to_string(), Owned { set, api_version: version.into(), applied: false });
    }
}

/// An apply of `config` by `manager` onto `live`: the new object, or the conflicts (then
/// `managers` already holds the applier's new set: discard it, as the server does).
pub fn apply(live: &Value, config: &Value, scope: Scope, managers: &mut Managers, manager: &str, force: bool) -> Result<Value, Vec<Conflict>> {
    let Scope { ty, ignored, version } = scope;
    let merged = typed::merge(live, config, ty);
    let last = managers.get(manager).cloned();
    let set = typed::to_field_set(config, ty).recursive_difference(ignored);
    managers.insert(manager.to_string(), Owned { set, api_version: version.into(), applied: true });
    // Nothing applied last time is missing from this apply (a resync): nothing to prune.
    let pruned = match &last {
        Some(last) if !last.set.difference(&managers[manager].set).is_empty() => prune(&merged, managers, &last.set, ty),
        _ => merged,
    };
    update_inner(live, &pruned, ty, ignored, managers, manager, force)?;
    Ok(pruned)
}

/// Removes what the applier applied last time and no longer applies, unless another
/// manager (or its new configuration) owns it, and never what nobody applied.
fn prune(merged: &Value, managers: &Managers, last: &Set, ty: &Type) -> Value {
    let named = |s: &Set| typed::ensure_named_fields(s, ty);
    let pruned = typed::remove_items(merged, &named(last), ty);
    // Add back what someone owns.
    let mut all = Set::new();
    for o in managers.values() {
        all.extend(&o.set);
    }
    let merged_set = named(&typed::to_field_set(merged, ty));
    let pruned_set = named(&typed::to_field_set(&pruned, ty));
    let pruned = typed::remove_items(merged, &merged_set.difference(&pruned_set.union(&named(&all))), ty);
    // Add back what the applier never owned (dangling items).
    let pruned_set = named(&typed::to_field_set(&pruned, ty));
    typed::remove_items(merged, &merged_set.difference(&pruned_set).intersection(&named(last)), ty)
}
