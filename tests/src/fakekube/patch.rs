//! Patch formats: RFC 7386 JSON merge patch (`application/merge-patch+json`, what
//! `kubectl patch --type merge` sends) and RFC 6902 JSON patch
//! (`application/json-patch+json`: add, remove, replace, move, copy, test).

use serde_json::{Map, Value};

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        let t = target.as_object_mut().expect("map");
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    } else {
        *target = patch.clone();
    }
}

fn tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let rest = pointer
        .strip_prefix('/')
        .ok_or_else(|| format!("path {pointer:?} must start with /"))?;
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn parent<'a>(doc: &'a mut Value, toks: &[String], pointer: &str) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("path {pointer:?} does not exist"))?;
    }
    Ok(cur)
}

fn add(doc: &mut Value, pointer: &str, v: Value) -> Result<(), String> {
    let toks = tokens(pointer)?;
    let Some((last, init)) = toks.split_last() else {
        *doc = v;
        return Ok(());
    };
    match parent(doc, init, pointer)? {
        Value::Object(m) => {
            m.insert(last.clone(), v);
        }
        Value::Array(a) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| format!("bad array index in {pointer:?}"))?
            };
            if i > a.len() {
                return Err(format!("array index out of range in {pointer:?}"));
            }
            a.insert(i, v);
        }
        _ => {
            return Err(format!(
                "path {pointer:?} does not point into an object or array"
            ))
        }
    }
    Ok(())
}

fn remove(doc: &mut Value, pointer: &str) -> Result<Value, String> {
    let toks = tokens(pointer)?;
    let (last, init) = toks
        .split_last()
        .ok_or("cannot remove the whole document")?;
    match parent(doc, init, pointer)? {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| format!("path {pointer:?} does not exist")),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(format!("path {pointer:?} does not exist")),
        },
        _ => Err(format!("path {pointer:?} does not exist")),
    }
}

/// Applies `ops` (a JSON array of operations) to `doc`; an error names the failing op.
pub fn apply_json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or("a JSON patch must be an array of operations")?;
    for op in ops {
        let path = op["path"].as_str().ok_or("every operation needs a path")?;
        match op["op"].as_str() {
            Some("add") => add(doc, path, op["value"].clone())?,
            Some("remove") => {
                remove(doc, path)?;
            }
            Some("replace") => {
                remove(doc, path)?;
                add(doc, path, op["value"].clone())?;
            }
            Some("move") => {
                let v = remove(doc, op["from"].as_str().ok_or("move needs from")?)?;
                add(doc, path, v)?;
            }
            Some("copy") => {
                let from = op["from"].as_str().ok_or("copy needs from")?;
                let v = parent(doc, &tokens(from)?, from)?.clone();
                add(doc, path, v)?;
            }
            Some("test") => {
                if parent(doc, &tokens(path)?, path)? != &op["value"] {
                    return Err(format!("testing value {path} failed"));
                }
            }
            other => return Err(format!("unknown JSON patch op {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ops() {
        let mut d = json!({"a": {"b": [1, 2]}, "c": 1});
        apply_json_patch(&mut d, &json!([{"op": "add", "path": "/a/b/-", "value": 3}, {"op": "replace", "path": "/c", "value": 2}, {"op": "remove", "path": "/a/b/0"}, {"op": "test", "path": "/c", "value": 2}])).unwrap();
        assert_eq!(d, json!({"a": {"b": [2, 3]}, "c": 2}));
        assert!(apply_json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }
}
