//! Secret values kept off every screen and log: the values of a Secret's `data` and
//! `stringData` are replaced, its keys kept, as `kubectl diff` does — `***` for a value,
//! and for a key whose value changes `*** (before)` on the old side and `*** (after)` on
//! the new one, so a reader sees which keys change and never what they hold.
//!
//! Every printer that shows object content (`drover diff`, `drover-agent plan` and the
//! drift it reports, `status`, `history`, logs) goes through here: [`redact_pair`] for two
//! versions of one object, [`redact_object`] for one, [`mask`] for free text (an API
//! server's message) that may quote a value.

use serde_json::{Map, Value};

/// What replaces a Secret value.
pub const REDACTED: &str = "***";
/// What replaces the old value of a changed key.
pub const REDACTED_BEFORE: &str = "*** (before)";
/// What replaces the new value of a changed key.
pub const REDACTED_AFTER: &str = "*** (after)";

/// The fields of a Secret whose values are secret.
pub const SECRET_FIELDS: [&str; 2] = ["data", "stringData"];

/// Values shorter than this are not masked in free text ([`mask`]): one or two characters
/// would mask half of any message.
const MIN_MASKED: usize = 4;

/// True when `obj` is a core `v1` Secret.
pub fn is_secret(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Secret") && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// `obj` with every value of its `data` and `stringData` replaced by [`REDACTED`] (keys
/// kept); other objects unchanged.
pub fn redact_object(obj: &Value) -> Value {
    let mut out = obj.clone();
    if is_secret(obj) {
        for field in SECRET_FIELDS {
            if let Some(Value::Object(m)) = out.get_mut(field) {
                for v in m.values_mut() {
                    *v = Value::String(REDACTED.into());
                }
            } else if let Some(v) = out.get_mut(field).filter(|v| !v.is_null()) {
                *v = Value::String(REDACTED.into());
            }
        }
    }
    out
}

/// Two versions of one object with their Secret values replaced as `kubectl diff` does:
/// a key whose value differs gets [`REDACTED_BEFORE`] / [`REDACTED_AFTER`], every other
/// value [`REDACTED`]. When either side is a Secret both are treated as one (a Secret
/// replacing a file that was something else still hides its values).
pub fn redact_pair(before: &Value, after: &Value) -> (Value, Value) {
    if !is_secret(before) && !is_secret(after) {
        return (before.clone(), after.clone());
    }
    let (mut b, mut a) = (before.clone(), after.clone());
    for field in SECRET_FIELDS {
        let (bm, am) = (map_of(before.get(field)), map_of(after.get(field)));
        redact_field(&mut b, field, &bm, &am, REDACTED_BEFORE);
        redact_field(&mut a, field, &am, &bm, REDACTED_AFTER);
    }
    (b, a)
}

fn map_of(v: Option<&Value>) -> Map<String, Value> {
    match v {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    }
}

/// Replaces the values of `obj[field]` (`mine`), comparing with the other side's (`theirs`).
fn redact_field(obj: &mut Value, field: &str, mine: &Map<String, Value>, theirs: &Map<String, Value>, changed: &str) {
    let Some(slot) = obj.get_mut(field) else { return };
    if !slot.is_object() {
        if !slot.is_null() {
            *slot = Value::String(REDACTED.into());
        }
        return;
    }
    let redacted: Map<String, Value> = mine
        .iter()
        .map(|(k, v)| {
            let shown = match theirs.get(k) {
                Some(t) if t != v => changed,
                _ => REDACTED,
            };
            (k.clone(), Value::String(shown.into()))
        })
        .collect();
    *slot = Value::Object(redacted);
}

/// The values of a Secret's `data` (as written, base64, and decoded when that is text) and
/// `stringData`: what [`mask`] hides in free text about it. Empty for other objects.
pub fn secret_values(obj: &Value) -> Vec<String> {
    use base64::Engine as _;
    let mut out = Vec::new();
    if !is_secret(obj) {
        return out;
    }
    for field in SECRET_FIELDS {
        let Some(Value::Object(m)) = obj.get(field) else { continue };
        for v in m.values().filter_map(Value::as_str) {
            out.push(v.to_string());
            if field == "data" {
                if let Some(text) = base64::engine::general_purpose::STANDARD.decode(v).ok().and_then(|b| String::from_utf8(b).ok()) {
                    out.push(text);
                }
            }
        }
    }
    out.retain(|v| v.chars().count() >= MIN_MASKED);
    // Longest first, so that a value containing another is masked whole.
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out.dedup();
    out
}

/// `text` with every occurrence of each of `values` replaced by [`REDACTED`] (values
/// shorter than four characters are left: see [`secret_values`]).
pub fn mask(text: &str, values: &[String]) -> String {
    let mut out = text.to_string();
    for v in values.iter().filter(|v| v.chars().count() >= MIN_MASKED) {
        if out.contains(v.as_str()) {
            out = out.replace(v.as_str(), REDACTED);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "data": data, "stringData": {"token": "plain-token"}})
    }

    #[test]
    fn one_object_keeps_keys_only() {
        let r = redact_object(&secret(json!({"password": "aHVudGVyMg=="})));
        assert_eq!(r["data"], json!({"password": "***"}));
        assert_eq!(r["stringData"], json!({"token": "***"}));
        assert_eq!(r["metadata"]["name"], "db");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}});
        assert_eq!(redact_object(&cm), cm, "not a Secret: unchanged");
    }

    #[test]
    fn pairs_show_which_keys_change() {
        let (b, a) = redact_pair(&secret(json!({"password": "b2xk", "user": "YWRtaW4="})), &secret(json!({"password": "bmV3", "user": "YWRtaW4=", "extra": "eA=="})));
        assert_eq!(b["data"], json!({"password": "*** (before)", "user": "***"}));
        assert_eq!(a["data"], json!({"password": "*** (after)", "user": "***", "extra": "***"}));
        assert_ne!(b, a, "a diff of the redacted pair still shows the change");
        let same = secret(json!({"k": "dg=="}));
        let (b, a) = redact_pair(&same, &same);
        assert_eq!(b, a);
    }

    #[test]
    fn free_text_loses_the_values() {
        let s = secret(json!({"password": "aHVudGVyMg=="}));
        let vals = secret_values(&s);
        assert!(vals.contains(&"hunter2".to_string()) && vals.contains(&"aHVudGVyMg==".to_string()) && vals.contains(&"plain-token".to_string()));
        let m = mask("Secret \"db\" is invalid: data[password]: Invalid value: \"hunter2\"; token plain-token", &vals);
        assert!(!m.contains("hunter2") && !m.contains("plain-token") && m.contains("data[password]"), "{m}");
    }
}
