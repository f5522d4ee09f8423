//! Field-level differences between two versions of one object (what `drover-agent plan`
//! shows for an `update`): one [`FieldChange`] per changed leaf, addressed by a dotted
//! path (`data.v`, `metadata.annotations["drover.dev/digest"]`). Objects are compared key
//! by key; lists are compared as a whole (a list is one field, as server-side apply
//! treats an atomic list).

use drover_proto::text::redact;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One changed field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    /// Dotted path; keys that are not plain identifiers are quoted in brackets.
    pub path: String,
    /// The value now (absent: the field is added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The value after (absent: the field is removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

fn child(path: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{key:?}]"),
    }
}

fn walk(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                walk(&child(path, k), b.get(k), a.get(k), out);
            }
        }
        (b, a) if b == a => {}
        (b, a) => out.push(FieldChange { path: path.to_string(), before: b.cloned(), after: a.cloned() }),
    }
}

/// The changed fields from `before` to `after`, sorted by path. A Secret's values are
/// compared as they are but shown redacted (`drover_proto::text::redact`): a changed key
/// of `data`/`stringData` is `*** (before)` -> `*** (after)`, never its value.
pub fn diff(before: &Value, after: &Value) -> Vec<FieldChange> {
    let (before, after) = redact::redact_pair(before, after);
    let mut out = Vec::new();
    walk("", Some(&before), Some(&after), &mut out);
    out
}

/// A short rendering of a value for text output (JSON, cut to 80 characters).
pub fn short(v: &Option<Value>) -> String {
    let Some(v) = v else { return "(none)".into() };
    let s = v.to_string();
    if s.chars().count() <= 80 {
        return s;
    }
    let mut cut: String = s.chars().take(79).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_and_paths() {
        let b = json!({"data": {"v": "1", "gone": "x"}, "metadata": {"annotations": {"drover.dev/digest": "a"}}, "list": [1, 2]});
        let a = json!({"data": {"v": "2", "new": "y"}, "metadata": {"annotations": {"drover.dev/digest": "b"}}, "list": [1, 2]});
        let d = diff(&b, &a);
        let paths: Vec<&str> = d.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["data.gone", "data.new", "data.v", "metadata.annotations[\"drover.dev/digest\"]"]);
        assert_eq!(d[0].after, None);
        assert_eq!(d[1].before, None);
        assert!(diff(&a, &a).is_empty());
        assert_eq!(diff(&json!({"l": [1]}), &json!({"l": [2]}))[0].path, "l");
    }

    #[test]
    fn secret_values_are_never_in_a_diff() {
        let s = |pw: &str| json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": pw, "user": "YWRtaW4="}});
        let d = diff(&s("b2xk"), &s("bmV3"));
        assert_eq!(d, [FieldChange { path: "data.password".into(), before: Some(json!("*** (before)")), after: Some(json!("*** (after)")) }]);
        assert!(diff(&s("b2xk"), &s("b2xk")).is_empty());
    }
}
