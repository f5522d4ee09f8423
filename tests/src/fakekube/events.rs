//! The `events.k8s.io/v1` Events API of the FAKE API server, as the real server serves
//! it: the same objects as core/v1 Events (one store, `kubectl get events` shows what was
//! written through either API), converted field by field (`note` ↔ `message`, `regarding`
//! ↔ `involvedObject`, `reportingController` ↔ `reportingComponent`, `deprecated*` ↔ the
//! old fields), with the strict validation of `pkg/apis/core/validation/events.go` for
//! writes through this API: `eventTime`, `reportingController` (a qualified name),
//! `reportingInstance`, `action` and `reason` required (at most 128 characters each),
//! `note` at most 1024, `type` Normal or Warning, the deprecated fields unset, a
//! `series.count` of at least 2 with a `lastObservedTime`, and on update every field but
//! `series` (and metadata) immutable. Not served: watches and server-side apply through
//! this API (core/v1 Events have both).

use super::paging;
use super::patch::{apply_json_patch, merge_patch};
use super::resources::ResourceInfo;
use super::selector::Selector;
use super::status::{ApiError, FieldError};
use super::store::{State, WriteOpts};
use axum::http::Method;
use serde_json::{json, Map, Value};

/// The API group served here.
pub const GROUP: &str = "events.k8s.io";

/// Longest `reportingInstance`, `action` and `reason` (`ReportingInstanceLengthLimit`, ...).
const SHORT_LIMIT: usize = 128;
/// Longest `note` (`NoteLengthLimit`).
const NOTE_LIMIT: usize = 1024;

/// (events.k8s.io/v1 field, core/v1 field) for the fields that are renamed.
const RENAMED: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// The fields an update through events.k8s.io/v1 may not change (core names, as the real
/// server's messages give them).
const IMMUTABLE: [&str; 13] = [
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
    "eventTime",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
];

/// One request to `/apis/events.k8s.io/v1/...`.
pub struct Request<'a> {
    /// The HTTP method.
    pub method: &'a Method,
    /// The events.k8s.io resource (the objects are stored as core/v1 Events).
    pub v1: &'a ResourceInfo,
    /// The namespace of the path.
    pub ns: Option<&'a str>,
    /// The name of the path.
    pub name: Option<&'a str>,
    /// The query parameters.
    pub query: &'a [(String, String)],
    /// The body's media type (without parameters).
    pub media: &'a str,
    /// Field manager, dry run.
    pub opts: &'a WriteOpts,
}

/// Serves `req`; `body` parses the request body.
pub fn op(state: &mut State, req: Request<'_>, body: impl FnOnce() -> Result<Value, ApiError>) -> Result<(u16, Value), ApiError> {
    let Request { method, v1, ns, name, query, media, opts } = req;
    let core = state.resolve("", "v1", "events").expect("core/v1 events are built in");
    let q = |k: &str| query.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
    let as_v1 = |v: Value| from_core(v1, v);
    match (method, name) {
        (&Method::GET, _) if matches!(q("watch"), Some("true" | "1")) => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "this FAKE API server does not watch events.k8s.io/v1 Events (watch the core/v1 ones)",
        )),
        (&Method::GET, Some(n)) => Ok((200, as_v1(state.get(&core, ns, n)?))),
        (&Method::GET, None) => {
            let parse = |k: &str| {
                q(k).filter(|s| !s.is_empty()).map(Selector::parse).transpose().map_err(|e| ApiError::bad_request(format!("unable to parse {k}: {e}")))
            };
            let (labels, fields) = (parse("labelSelector")?, parse("fieldSelector")?);
            let matching = state.matching(&core, ns, labels.as_ref(), fields.as_ref());
            let mut list = paging::page(state, v1, matching, q("limit"), q("continue"))?;
            if let Some(items) = list["items"].as_array_mut() {
                for item in items.iter_mut() {
                    *item = as_v1(item.take());
                }
            }
            Ok((200, list))
        }
        (&Method::POST, None) => {
            let event = body()?;
            check_kind(v1, &event)?;
            let n = event["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let errs = create_errors(&event, ns.unwrap_or_default());
            if !errs.is_empty() {
                return Err(ApiError::invalid_list(v1, &n, &errs));
            }
            Ok((201, as_v1(state.create(&core, ns, to_core(event), opts)?)))
        }
        (&Method::PUT, Some(n)) => {
            let event = body()?;
            check_kind(v1, &event)?;
            update(state, &core, v1, ns, n, event, opts)
        }
        (&Method::PATCH, Some(n)) => {
            let old = as_v1(state.live(&core, ns, n)?);
            let mut new = old.clone();
            match media {
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    let patch = body()?;
                    if !patch.is_object() {
                        return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                    }
                    merge_patch(&mut new, &patch);
                }
                "application/json-patch+json" => apply_json_patch(&mut new, &body()?).map_err(|e| {
                    ApiError::new(422, "Invalid", format!("the server rejected our request due to an error in our request: {e}"))
                })?,
                other => {
                    return Err(ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json, application/json-patch+json (this FAKE API server does not server-side apply events.k8s.io Events; got {other:?})")))
                }
            }
            update(state, &core, v1, ns, n, new, opts)
        }
        (&Method::DELETE, Some(n)) => Ok((200, as_v1(state.delete(&core, ns, n, opts)?))),
        _ => Err(ApiError::new(405, "MethodNotAllowed", format!("the server does not allow this method on the requested resource ({method})"))),
    }
}

/// An update (PUT, or a patch's result) through events.k8s.io/v1: validated against the
/// stored Event, then stored as core/v1.
fn update(state: &mut State, core: &ResourceInfo, v1: &ResourceInfo, ns: Option<&str>, name: &str, new: Value, opts: &WriteOpts) -> Result<(u16, Value), ApiError> {
    let live = state.live(core, ns, name)?;
    let new_core = to_core(new);
    let errs = update_errors(&new_core, &live, ns.unwrap_or_default());
    if !errs.is_empty() {
        return Err(ApiError::invalid_list(v1, name, &errs));
    }
    Ok((200, from_core(v1, state.update(core, ns, name, new_core, opts)?)))
}

fn check_kind(v1: &ResourceInfo, event: &Value) -> Result<(), ApiError> {
    match event["apiVersion"].as_str() {
        Some(av) if av != v1.api_version() => Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            v1.api_version()
        ))),
        _ => Ok(()),
    }
}

/// An events.k8s.io/v1 Event as core/v1 stores it.
pub fn to_core(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        for (new, old) in RENAMED {
            if let Some(x) = m.remove(new) {
                m.insert(old.to_string(), x);
            }
        }
        m.insert("apiVersion".into(), json!("v1"));
        // What the real server's core/v1 view shows for an Event written through the
        // new API: zero times as null, an empty source.
        for k in ["firstTimestamp", "lastTimestamp"] {
            m.entry(k).or_insert(Value::Null);
        }
        m.entry("source").or_insert_with(|| json!({}));
    }
    v
}

/// A stored core/v1 Event as events.k8s.io/v1 shows it.
pub fn from_core(v1: &ResourceInfo, mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        for (new, old) in RENAMED {
            if let Some(x) = m.remove(old) {
                let empty = x.is_null() || x == json!({}) || x == json!(0);
                if !empty {
                    m.insert(new.to_string(), x);
                }
            }
        }
        m.insert("apiVersion".into(), json!(v1.api_version()));
        m.insert("kind".into(), json!(v1.kind));
    }
    v
}

fn text<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// `legacyValidateEvent` for an Event with `eventTime` (every Event of the new API), on
/// the core form, plus the namespace check.
fn legacy_errors(m: &Map<String, Value>, ns: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let involved_ns = m.get("involvedObject").and_then(|o| o["namespace"].as_str()).unwrap_or_default();
    if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
        errs.push(FieldError::invalid_str("involvedObject.namespace", involved_ns, "does not match event.namespace"));
    }
    let controller = text(m, "reportingComponent");
    if controller.is_empty() {
        errs.push(FieldError::required("reportingController", ""));
    }
    errs.extend(super::names::label_key(controller).into_iter().map(|msg| FieldError::invalid_str("reportingController", controller, &msg)));
    for (field, path) in [("reportingInstance", "reportingInstance"), ("action", "action"), ("reason", "reason")] {
        let v = text(m, field);
        if v.is_empty() {
            errs.push(FieldError::required(path, ""));
        }
        if v.len() > SHORT_LIMIT {
            errs.push(FieldError::invalid_str(path, "", &format!("can have at most {SHORT_LIMIT} characters")));
        }
    }
    if text(m, "message").len() > NOTE_LIMIT {
        errs.push(FieldError::invalid_str("note", "", &format!("can have at most {NOTE_LIMIT} characters")));
    }
    errs
}

/// `validateV1EventSeries`.
fn series_errors(m: &Map<String, Value>) -> Vec<FieldError> {
    let Some(series) = m.get("series").filter(|s| !s.is_null()) else { return Vec::new() };
    let mut errs = Vec::new();
    if series["count"].as_i64().unwrap_or(0) < 2 {
        errs.push(FieldError::invalid_str("series.count", "", "should be at least 2"));
    }
    if series["lastObservedTime"].as_str().is_none_or(str::is_empty) {
        errs.push(FieldError::required("series.lastObservedTime", ""));
    }
    errs
}

/// `ValidateEventCreate` for events.k8s.io/v1 (on the events.k8s.io form: `event`).
fn create_errors(event: &Value, ns: &str) -> Vec<FieldError> {
    let core = to_core(event.clone());
    let Some(m) = core.as_object() else { return vec![FieldError::required("metadata", "")] };
    if m.get("eventTime").is_none_or(|t| t.as_str().is_none_or(str::is_empty)) {
        // Without eventTime the legacy rules of old Events apply; the new API requires it.
        return vec![FieldError::required("eventTime", "")];
    }
    let mut errs = legacy_errors(m, ns);
    let name = core["metadata"]["name"].as_str().unwrap_or_default();
    errs.extend(super::names::dns1123_subdomain(name).into_iter().map(|msg| FieldError::invalid_str("metadata.name", name, &msg)));
    errs.extend(series_errors(m));
    let t = text(m, "type");
    if t != "Normal" && t != "Warning" {
        errs.push(FieldError::invalid_str("type", "", &format!("has invalid value: {t}")));
    }
    for (field, path) in [("firstTimestamp", "firstTimestamp"), ("lastTimestamp", "lastTimestamp")] {
        if m.get(field).is_some_and(|v| !v.is_null()) {
            errs.push(FieldError::invalid_str(path, "", "needs to be unset"));
        }
    }
    if m.get("count").is_some_and(|c| c.as_i64().unwrap_or(0) != 0) {
        errs.push(FieldError::invalid_str("count", "", "needs to be unset"));
    }
    if m.get("source").is_some_and(|s| s["component"].as_str().is_some_and(|c| !c.is_empty()) || s["host"].as_str().is_some_and(|h| !h.is_empty())) {
        errs.push(FieldError::invalid_str("source", "", "needs to be unset"));
    }
    errs
}

/// `ValidateEventUpdate` for events.k8s.io/v1: `new` and `old` in core form.
fn update_errors(new: &Value, old: &Value, ns: &str) -> Vec<FieldError> {
    let Some(m) = new.as_object() else { return vec![FieldError::required("metadata", "")] };
    let mut errs = legacy_errors(m, ns);
    if new.get("series") != old.get("series") {
        errs.extend(series_errors(m));
    }
    let null = Value::Null;
    for field in IMMUTABLE {
        let (a, b) = (new.get(field).unwrap_or(&null), old.get(field).unwrap_or(&null));
        if a != b {
            errs.push(FieldError::invalid(field, &a.to_string(), "field is immutable"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "x.1", "namespace": "drover-system"},
            "eventTime": "2026-11-25T10:00:00.000000Z",
            "reportingController": "drover.dev/agent", "reportingInstance": "node-1",
            "action": "Apply", "reason": "Applied", "type": "Normal", "note": "applied",
            "regarding": {"kind": "ConfigMap", "namespace": "drover-system", "name": "s"},
        })
    }

    #[test]
    fn conversion_round_trips() {
        let res = ResourceInfo {
            group: GROUP.into(),
            version: "v1".into(),
            kind: "Event".into(),
            plural: "events".into(),
            singular: "event".into(),
            namespaced: true,
            short_names: vec![],
            status_subresource: false,
            custom: false,
        };
        let core = to_core(event());
        assert_eq!(core["message"], "applied");
        assert_eq!(core["involvedObject"]["name"], "s");
        assert_eq!(core["reportingComponent"], "drover.dev/agent");
        assert!(core["firstTimestamp"].is_null() && core["source"] == json!({}));
        assert_eq!(from_core(&res, core), event());
    }

    #[test]
    fn strict_rules_of_the_new_api() {
        assert!(create_errors(&event(), "drover-system").is_empty());
        let mut e = event();
        e["note"] = json!("n".repeat(1025));
        e["series"] = json!({"count": 1, "lastObservedTime": "2026-11-25T10:00:00.000000Z"});
        e["type"] = json!("Info");
        e.as_object_mut().unwrap().remove("action");
        let shown: Vec<String> = create_errors(&e, "drover-system").iter().map(|f| f.to_string()).collect();
        assert_eq!(shown.len(), 4, "{shown:?}");
        let old = to_core(event());
        let mut new = old.clone();
        new["series"] = json!({"count": 2, "lastObservedTime": "2026-11-25T10:00:01.000000Z"});
        assert!(update_errors(&new, &old, "drover-system").is_empty());
        new["message"] = json!("changed");
        assert_eq!(update_errors(&new, &old, "drover-system")[0].field, "message");
    }
}
