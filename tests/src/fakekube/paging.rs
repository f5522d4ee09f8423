//! `limit` and `continue` on LISTs, as the real server pages them: at most `limit` items
//! (in key order: namespace, then name), `metadata.continue` (an opaque token: base64 of
//! where the next page starts) and `metadata.remainingItemCount` when more are left.
//! Simplification: a continued LIST shows the store as it is now, not the snapshot of
//! the first page (the real server serves the first page's resourceVersion, or `410
//! Expired` once that is compacted).

use super::status::ApiError;
use base64::Engine;
use serde_json::{json, Value};

const TOKEN: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Where an item sits in a list: (namespace or "", name).
fn position(item: &Value) -> (String, String) {
    let meta = &item["metadata"];
    (meta["namespace"].as_str().unwrap_or("").to_string(), meta["name"].as_str().unwrap_or("").to_string())
}

fn encode(rv: &Value, last: &(String, String)) -> String {
    TOKEN.encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [last.0, last.1]}).to_string())
}

fn decode(token: &str) -> Result<(String, String), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = TOKEN.decode(token).map_err(|_| bad("not base64"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
    match (v["start"][0].as_str(), v["start"][1].as_str()) {
        (Some(ns), Some(name)) => Ok((ns.to_string(), name.to_string())),
        _ => Err(bad("no start")),
    }
}

/// Cuts one page out of a full `list` answer for the `limit` and `continue` parameters.
pub fn page(mut list: Value, limit: Option<&str>, token: Option<&str>) -> Result<Value, ApiError> {
    let limit = match limit.filter(|l| !l.is_empty()) {
        Some(l) => l.parse::<usize>().map_err(|_| ApiError::bad_request(format!("limit {l:?} is not a number")))?,
        None => 0,
    };
    let start = token.filter(|t| !t.is_empty()).map(decode).transpose()?;
    let Some(Value::Array(items)) = list.get_mut("items").map(Value::take) else {
        return Ok(list);
    };
    let mut items: Vec<Value> = items.into_iter().filter(|o| start.as_ref().is_none_or(|s| position(o) > *s)).collect();
    if limit > 0 && items.len() > limit {
        let remaining = items.len() - limit;
        items.truncate(limit);
        let last = position(items.last().expect("limit > 0"));
        list["metadata"]["continue"] = json!(encode(&list["metadata"]["resourceVersion"], &last));
        list["metadata"]["remainingItemCount"] = json!(remaining);
    }
    list["items"] = Value::Array(items);
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_each_other() {
        let items: Vec<Value> = (0..5).map(|i| json!({"metadata": {"namespace": "a", "name": format!("o{i}")}})).collect();
        let list = json!({"metadata": {"resourceVersion": "9"}, "items": items});
        let first = page(list.clone(), Some("2"), None).unwrap();
        assert_eq!(first["items"].as_array().unwrap().len(), 2);
        assert_eq!(first["metadata"]["remainingItemCount"], 3);
        let token = first["metadata"]["continue"].as_str().unwrap();
        let second = page(list.clone(), Some("2"), Some(token)).unwrap();
        assert_eq!(second["items"][0]["metadata"]["name"], "o2");
        let last = page(list.clone(), Some("2"), second["metadata"]["continue"].as_str()).unwrap();
        assert_eq!(last["items"].as_array().unwrap().len(), 1);
        assert!(last["metadata"].get("continue").is_none());
        assert_eq!(page(list.clone(), None, None).unwrap()["items"].as_array().unwrap().len(), 5);
        assert_eq!(page(list, Some("2"), Some("!!")).unwrap_err().code, 400);
    }
}
