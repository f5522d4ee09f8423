//! Values composition: maps merge deeply, lists replace, `null` removes a key.

use serde_json::{Map, Value};

/// Merges `overlay` into `base`: maps merge key by key (recursively), a `null` in the
/// overlay removes the key, anything else (scalars, lists) replaces.
pub fn merge(base: &mut Map<String, Value>, overlay: &Map<String, Value>) {
    for (k, v) in overlay {
        match v {
            Value::Null => {
                base.remove(k);
            }
            Value::Object(o) => {
                let slot = base.entry(k.clone()).or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(b) = slot {
                    merge(b, o);
                }
            }
            other => {
                base.insert(k.clone(), other.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deep_merge_list_replace_null_delete() {
        let mut base = json!({"a": {"b": 1, "c": [1, 2], "d": "x"}, "e": 1, "f": 3}).as_object().unwrap().clone();
        let over = json!({"a": {"c": [9], "d": null, "n": {"x": null, "y": 2}}, "e": {"z": 1}, "f": null});
        merge(&mut base, over.as_object().unwrap());
        assert_eq!(Value::Object(base), json!({"a": {"b": 1, "c": [9], "n": {"y": 2}}, "e": {"z": 1}}));
    }
}
