//! Secret values kept off every screen and log: the values of a Secret's `data` and
//! `stringData` are replaced, its keys kept, as `kubectl diff` does — `***` for a value,
//! and for a key whose value changes `*** (before)` on the old side and `*** (after)` on
//! the new one, so a reader sees which keys change and never what they hold.
//!
//! A Secret's values also travel in annotations: `kubectl apply` keeps the whole applied
//! manifest in `kubectl.kubernetes.io/last-applied-configuration` (so a Secret exported
//! with `kubectl get -o yaml` carries its values twice, the old ones too), and any
//! annotation may hold a Secret's manifest. An annotation whose value parses (JSON or
//! YAML) as a Secret's manifest is shown as that manifest redacted by the same rule (its
//! keys, and which of them change); a Secret's `last-applied-configuration` that does not
//! parse is replaced whole.
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
/// The annotation in which `kubectl apply` keeps the last manifest it applied.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// How many manifests deep (a Secret in an annotation of a Secret in an annotation ...)
/// annotations are looked into.
const MAX_NESTING: usize = 3;

/// Values shorter than this are not masked in free text ([`mask`]): one or two characters
/// would mask half of any message.
const MIN_MASKED: usize = 4;

/// True when `obj` is a core `v1` Secret.
pub fn is_secret(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Secret") && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// `obj` with every value of its `data` and `stringData` replaced by [`REDACTED`] (keys
/// kept), and every annotation carrying a Secret's manifest redacted alike; other objects
/// unchanged.
pub fn redact_object(obj: &Value) -> Value {
    pair_at(obj, obj, 0).0
}

/// True when `obj` holds a Secret's values: it is a Secret, or one of its annotations
/// carries a Secret's manifest.
pub fn holds_secret(obj: &Value) -> bool {
    is_secret(obj) || annotations(obj).is_some_and(|m| m.values().filter_map(Value::as_str).any(|v| carried_secret(v).is_some()))
}

/// Two versions of one object with their Secret values replaced as `kubectl diff` does:
/// a key whose value differs gets [`REDACTED_BEFORE`] / [`REDACTED_AFTER`], every other
/// value [`REDACTED`]. When either side is a Secret both are treated as one (a Secret
/// replacing a file that was something else still hides its values). Annotations that
/// carry a Secret's manifest are redacted by the same rule, inside.
pub fn redact_pair(before: &Value, after: &Value) -> (Value, Value) {
    pair_at(before, after, 0)
}

fn pair_at(before: &Value, after: &Value, depth: usize) -> (Value, Value) {
    let (mut b, mut a) = (before.clone(), after.clone());
    let secret = is_secret(before) || is_secret(after);
    if secret {
        for field in SECRET_FIELDS {
            let (bm, am) = (map_of(before.get(field)), map_of(after.get(field)));
            redact_field(&mut b, field, &bm, &am, REDACTED_BEFORE);
            redact_field(&mut a, field, &am, &bm, REDACTED_AFTER);
        }
    }
    if depth < MAX_NESTING {
        redact_annotations(&mut b, &mut a, secret, depth);
    }
    (b, a)
}

fn annotations(obj: &Value) -> Option<&Map<String, Value>> {
    obj.pointer("/metadata/annotations").and_then(Value::as_object)
}

/// The Secret manifest an annotation's value holds (JSON, or one YAML document), if it
/// holds one.
fn carried_secret(value: &str) -> Option<Value> {
    if !value.contains("Secret") {
        return None;
    }
    let parsed = serde_json::from_str::<Value>(value).ok().or_else(|| crate::yaml::json_documents(value).next()?.ok())?;
    is_secret(&parsed).then_some(parsed)
}

/// Redacts, in `b` and `a` (two versions of one object), the annotations that carry a
/// Secret's manifest; with `secret` (the object is a Secret) also its
/// `last-applied-configuration` when that does not parse.
fn redact_annotations(b: &mut Value, a: &mut Value, secret: bool, depth: usize) {
    let (bm, am) = (annotations(b).cloned().unwrap_or_default(), annotations(a).cloned().unwrap_or_default());
    let mut keys: Vec<&String> = bm.keys().chain(am.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let (bv, av) = (bm.get(k).and_then(Value::as_str), am.get(k).and_then(Value::as_str));
        let (bs, as_) = (bv.and_then(carried_secret), av.and_then(carried_secret));
        let whole = |v: Option<&str>, changed: &str| v.map(|_| Value::String((if bv != av { changed } else { REDACTED }).into()));
        let (nb, na) = if bs.is_some() || as_.is_some() {
            let (rb, ra) = pair_at(bs.as_ref().unwrap_or(&Value::Null), as_.as_ref().unwrap_or(&Value::Null), depth + 1);
            let side = |v: Option<&str>, carried: bool, r: Value, changed| match v {
                Some(_) if carried => Some(Value::String(r.to_string())),
                other if secret && k == LAST_APPLIED => whole(other, changed),
                _ => None,
            };
            (side(bv, bs.is_some(), rb, REDACTED_BEFORE), side(av, as_.is_some(), ra, REDACTED_AFTER))
        } else if secret && k == LAST_APPLIED {
            (whole(bv, REDACTED_BEFORE), whole(av, REDACTED_AFTER))
        } else {
            continue;
        };
        for (obj, new) in [(&mut *b, nb), (&mut *a, na)] {
            if let (Some(new), Some(Value::Object(m))) = (new, obj.pointer_mut("/metadata/annotations")) {
                m.insert(k.clone(), new);
            }
        }
    }
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
/// `stringData`, and those of every Secret manifest its annotations carry (the
/// last-applied values may be older ones): what [`mask`] hides in free text about it.
/// Empty for objects that hold no Secret values.
pub fn secret_values(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_values(obj, 0, &mut out);
    out.retain(|v| v.chars().count() >= MIN_MASKED);
    // Longest first, so that a value containing another is masked whole.
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out.dedup();
    out
}

fn collect_values(obj: &Value, depth: usize, out: &mut Vec<String>) {
    use base64::Engine as _;
    if is_secret(obj) {
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
    }
    if depth < MAX_NESTING {
        for inner in annotations(obj).into_iter().flat_map(|m| m.values()).filter_map(Value::as_str).filter_map(carried_secret) {
            collect_values(&inner, depth + 1, out);
        }
    }
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

    fn exported(pw: &str) -> Value {
        let last = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "data": {"password": pw, "user": "YWRtaW4="}});
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "annotations": {LAST_APPLIED: last.to_string(), "team": "a"}}, "data": {"password": pw, "user": "YWRtaW4="}})
    }

    #[test]
    fn last_applied_annotations_are_redacted_inside() {
        let (b, a) = redact_pair(&exported("b2xk"), &exported("bmV3"));
        let (bt, at) = (b.to_string(), a.to_string());
        for v in ["b2xk", "bmV3", "YWRtaW4="] {
            assert!(!bt.contains(v) && !at.contains(v), "{bt}\n{at}");
        }
        let inner = |v: &Value| serde_json::from_str::<Value>(v["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap()).unwrap();
        assert_eq!(inner(&b)["data"], json!({"password": "*** (before)", "user": "***"}));
        assert_eq!(inner(&a)["data"], json!({"password": "*** (after)", "user": "***"}));
        assert_eq!(b["metadata"]["annotations"]["team"], "a", "other annotations are kept");
        assert!(!redact_object(&exported("b2xk")).to_string().contains("b2xk"));
        // Unparseable on a Secret: replaced whole. A Secret in a ConfigMap's annotation (YAML): redacted too.
        let broken = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"annotations": {LAST_APPLIED: "{\"data\": {\"password\": \"b2xk"}}});
        assert_eq!(redact_object(&broken)["metadata"]["annotations"][LAST_APPLIED], REDACTED);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {"x": "apiVersion: v1\nkind: Secret\ndata:\n  k: c2VjcmV0\n"}}});
        assert!(holds_secret(&cm) && !redact_object(&cm).to_string().contains("c2VjcmV0"));
        assert!(secret_values(&cm).contains(&"secret".to_string()));
        let plain = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {LAST_APPLIED: "{\"kind\":\"ConfigMap\"}"}}});
        assert_eq!(redact_object(&plain), plain, "a ConfigMap's own last-applied is not secret");
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
