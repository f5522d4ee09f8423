//! `limit` and `continue` on LISTs, as the real server pages them: at most `limit` items
//! (in key order: namespace, then name), `metadata.continue` (an opaque token: base64 of
//! where the next page starts) and `metadata.remainingItemCount` when more are left.
//! Simplification: a continued LIST shows the store as it is now, not the snapshot of
//! the first page (the real server serves the first page's resourceVersion, or `410
//! Expired` once that is compacted).

use super::resources::ResourceInfo;
use super::status::ApiError;
use super::store::State;
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

/// One page of the `matching` objects (in key order) for the `limit` and `continue`
/// parameters, as a `<Kind>List`; only the page's objects are copied.
pub fn page<'a>(
    state: &State,
    res: &ResourceInfo,
    matching: impl Iterator<Item = &'a Value>,
    limit: Option<&str>,
    token: Option<&str>,
) -> Result<Value, ApiError> {
    let limit = match limit.filter(|l| !l.is_empty()) {
        Some(l) => l.parse::<usize>().map_err(|_| ApiError::bad_request(format!("limit {l:?} is not a number")))?,
        None => 0,
    };
    let start = token.filter(|t| !t.is_empty()).map(decode).transpose()?;
    let mut rest = matching.filter(|o| start.as_ref().is_none_or(|s| position(o) > *s));
    let items: Vec<Value> = rest.by_ref().take(if limit > 0 { limit } else { usize::MAX }).map(|o| State::present(res, o)).collect();
    let remaining = rest.count();
    let mut list = state.list_of(res, items);
    if remaining > 0 {
        let last = position(list["items"].as_array().and_then(|i| i.last()).expect("limit > 0"));
        list["metadata"]["continue"] = json!(encode(&list["metadata"]["resourceVersion"], &last));
        list["metadata"]["remainingItemCount"] = json!(remaining);
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_each_other() {
        let items: Vec<Value> = (0..5).map(|i| json!({"metadata": {"namespace": "a", "name": format!("o{i}")}})).collect();
        let settings = super::super::store::Settings {
            rollout_default: super::super::rollout::RolloutMode::Ready,
            rollout_overrides: Default::default(),
            rollout_delay: Default::default(),
            crd_delay: Default::default(),
            minor: super::super::store::DEFAULT_MINOR,
        };
        let state = State::new(settings);
        let res = state.resolve("", "v1", "configmaps").unwrap();
        let first = page(&state, &res, items.iter(), Some("2"), None).unwrap();
        assert_eq!(first["items"].as_array().unwrap().len(), 2);
        assert_eq!(first["metadata"]["remainingItemCount"], 3);
        let token = first["metadata"]["continue"].as_str().unwrap();
        let second = page(&state, &res, items.iter(), Some("2"), Some(token)).unwrap();
        assert_eq!(second["items"][0]["metadata"]["name"], "o2");
        let last = page(&state, &res, items.iter(), Some("2"), second["metadata"]["continue"].as_str()).unwrap();
        assert_eq!(last["items"].as_array().unwrap().len(), 1);
        assert!(last["metadata"].get("continue").is_none());
        assert_eq!(page(&state, &res, items.iter(), None, None).unwrap()["items"].as_array().unwrap().len(), 5);
        assert_eq!(page(&state, &res, items.iter(), Some("2"), Some("!!")).unwrap_err().code, 400);
    }
}
