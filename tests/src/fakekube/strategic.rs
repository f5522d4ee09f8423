//! Strategic merge patch (`application/strategic-merge-patch+json`, what `kubectl edit`,
//! `kubectl set env`, `kubectl patch` and `kubectl rollout restart` send for built-in
//! kinds): maps merge as in a JSON merge patch; a list keyed in the schema merges item by
//! item on its first key (the patch merge key: `name`, `containerPort`, `mountPath`), a
//! set list merges values, any other list is replaced. Directives: `$patch: delete` /
//! `replace` / `merge` on a map or list item, `$setElementOrder/<list>`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<list>`. The list kinds come from the same schema the
//! server's field management uses ([`drover_ssa::schema`]). Custom resources take JSON
//! merge patches only (415 otherwise, as on a real server).

use drover_ssa::schema::{Atom, ListKind, Type};
use serde_json::{Map, Value};

/// Applies `patch` to `target` of type `ty`.
pub fn apply(target: &mut Value, patch: &Value, ty: &Type) -> Result<(), String> {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some("replace") => {
            let mut v = p.clone();
            v.remove("$patch");
            *target = Value::Object(v);
            return Ok(());
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Atom::Map(m) = ty.atom(Some(target)) else {
        *target = patch.clone();
        return Ok(());
    };
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        target.as_object_mut().expect("map").retain(|k, _| keep.contains(&k.as_str()));
    }
    let t = target.as_object_mut().expect("map");
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$patch" || k == "$retainKeys" {
            continue;
        }
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Some(gone)) = (t.get_mut(list), v.as_array()) {
                items.retain(|i| !gone.contains(i));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let (cty, _) = m.child(k);
        let slot = t.entry(k.clone()).or_insert(Value::Null);
        match (cty.atom(Some(v)), v) {
            (Atom::List(elem, kind), Value::Array(items)) => merge_list(slot, items, &elem, &kind)?,
            (Atom::Map(_), Value::Object(_)) => apply(slot, v, &cty)?,
            _ => *slot = v.clone(),
        }
        if slot.is_null() {
            t.remove(k);
        }
    }
    for (k, order) in p.iter().filter_map(|(k, v)| k.strip_prefix("$setElementOrder/").map(|l| (l, v))) {
        if let (Some(Value::Array(items)), Some(order)) = (t.get_mut(k), order.as_array()) {
            reorder(items, order);
        }
    }
    Ok(())
}

fn merge_list(slot: &mut Value, patch: &[Value], elem: &Type, kind: &ListKind) -> Result<(), String> {
    let key = match kind {
        ListKind::Atomic => {
            *slot = Value::Array(patch.to_vec());
            return Ok(());
        }
        ListKind::Set => {
            let mut items = slot.as_array().cloned().unwrap_or_default();
            for v in patch {
                if !items.contains(v) {
                    items.push(v.clone());
                }
            }
            *slot = Value::Array(items);
            return Ok(());
        }
        ListKind::Keys(keys) => keys.first().cloned().unwrap_or_default(),
    };
    let mut items = slot.as_array().cloned().unwrap_or_default();
    for p in patch {
        let Some(kv) = p.get(&key) else {
            return Err(format!("map: {p} does not contain declared merge key: {key}"));
        };
        let at = items.iter().position(|i| i.get(&key) == Some(kv));
        let delete = p.get("$patch").and_then(Value::as_str) == Some("delete");
        match (at, delete) {
            (Some(i), true) => {
                items.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => apply(&mut items[i], p, elem)?,
            (None, false) => {
                let mut v = Value::Null;
                apply(&mut v, p, elem)?;
                items.push(v);
            }
        }
    }
    *slot = Value::Array(items);
    Ok(())
}

/// Puts `items` in the order `order` names (by any of the fields `order`'s entries have);
/// items it does not name keep their place after the named ones.
fn reorder(items: &mut Vec<Value>, order: &[Value]) {
    let rank = |i: &Value| {
        order.iter().position(|o| match (o, i) {
            (Value::Object(om), Value::Object(_)) => om.iter().all(|(k, v)| i.get(k) == Some(v)),
            (a, b) => a == b,
        })
    };
    let mut ranked: Vec<(usize, Value)> = items.drain(..).enumerate().map(|(n, v)| (rank(&v).unwrap_or(order.len() + n), v)).collect();
    ranked.sort_by_key(|(r, _)| *r);
    items.extend(ranked.into_iter().map(|(_, v)| v));
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_ssa::Schema;
    use serde_json::json;

    #[test]
    fn kubectl_set_env_merges_into_the_named_container() {
        let ty = Schema::builtin("apps/v1", "Deployment").unwrap().root;
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "a", "env": [{"name": "MODE", "value": "p"}]}, {"name": "side", "image": "b"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "main"}, {"name": "side"}],
            "containers": [{"name": "main", "$setElementOrder/env": [{"name": "MODE"}, {"name": "DEBUG"}], "env": [{"name": "DEBUG", "value": "1"}]}]}}}});
        apply(&mut d, &patch, &ty).unwrap();
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "a");
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["env"], json!([{"name": "MODE", "value": "p"}, {"name": "DEBUG", "value": "1"}]));
        assert_eq!(d["spec"]["template"]["spec"]["containers"][1]["name"], "side");
        let del = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "env": [{"name": "DEBUG", "$patch": "delete"}]}]}}}});
        apply(&mut d, &del, &ty).unwrap();
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["env"], json!([{"name": "MODE", "value": "p"}]));
    }
}
