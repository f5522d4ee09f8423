//! `Table` answers of the FAKE API server, for core/v1 Events only: what `kubectl get
//! events` asks for (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`) and a
//! real server answers with its event columns (`pkg/printers/internalversion`,
//! `printEvent`: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE, and at priority 1 SUBOBJECT,
//! SOURCE, FIRST SEEN, COUNT, NAME for `-o wide`), each row carrying the object's metadata
//! (`includeObject=Metadata`, the default) or the object (`includeObject=Object`). Other
//! resources get JSON, which kubectl prints as NAME and AGE.

use serde_json::{json, Value};

/// True when `accept` asks for a `meta.k8s.io` Table (v1 or v1beta1).
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let p: Vec<&str> = part.split(';').map(str::trim).collect();
        p.contains(&"as=Table") && p.contains(&"g=meta.k8s.io")
    })
}

/// The Table of `answer` (a core/v1 `EventList` or one `Event`), now at `now` (Unix
/// seconds); `include` is the `includeObject` parameter.
pub fn events(answer: &Value, include: Option<&str>, now: i64) -> Value {
    let items: Vec<&Value> = match answer["items"].as_array() {
        Some(items) => items.iter().collect(),
        None => vec![answer],
    };
    let column = |name: &str, priority: u8, format: &str| json!({"name": name, "type": "string", "format": format, "description": "", "priority": priority});
    let rows: Vec<Value> = items.iter().map(|e| json!({"cells": cells(e, now), "object": row_object(e, include)})).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": answer["metadata"]["resourceVersion"].clone()},
        "columnDefinitions": [
            column("Last Seen", 0, ""), column("Type", 0, ""), column("Reason", 0, ""), column("Object", 0, ""),
            column("Subobject", 1, ""), column("Source", 1, ""), column("Message", 0, ""), column("First Seen", 1, ""),
            column("Count", 1, ""), column("Name", 1, "name"),
        ],
        "rows": rows,
    })
}

/// The object of a row: its metadata (`PartialObjectMetadata`), the whole object, or none.
fn row_object(e: &Value, include: Option<&str>) -> Value {
    match include {
        Some("Object") => e.clone(),
        Some("None") => Value::Null,
        _ => json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": e["metadata"].clone()}),
    }
}

/// `printEvent`'s cells, wide (the server sends every column; kubectl hides priority 1).
fn cells(e: &Value, now: i64) -> Vec<Value> {
    let since = |field: &Value| field.as_str().and_then(|t| drover_proto::time::parse_rfc3339(t).ok()).map(|t| human_duration(now - t));
    let first = since(&e["firstTimestamp"]).or_else(|| since(&e["eventTime"])).unwrap_or_else(|| "<unknown>".into());
    let mut last = since(&e["lastTimestamp"]).unwrap_or_else(|| first.clone());
    let mut count = e["count"].as_i64().unwrap_or(0);
    if e["series"].is_object() {
        last = since(&e["series"]["lastObservedTime"]).unwrap_or(last);
        count = e["series"]["count"].as_i64().unwrap_or(count);
    } else if count == 0 {
        count = 1;
    }
    let o = &e["involvedObject"];
    let kind = o["kind"].as_str().unwrap_or_default().to_lowercase();
    let object = match o["name"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let component = Some(text(&e["source"]["component"])).filter(|s| !s.is_empty()).unwrap_or_else(|| text(&e["reportingComponent"]));
    let instance = Some(text(&e["source"]["host"])).filter(|s| !s.is_empty()).unwrap_or_else(|| text(&e["reportingInstance"]));
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, _) => String::new(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    };
    vec![
        json!(last),
        json!(text(&e["type"])),
        json!(text(&e["reason"])),
        json!(object),
        json!(text(&o["fieldPath"])),
        json!(source),
        json!(text(&e["message"]).trim()),
        json!(first),
        json!(count),
        json!(text(&e["metadata"]["name"])),
    ]
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`: `45s`, `3m20s`, `4h10m`, `3d`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_kubectl_prints_them() {
        for (secs, want) in [(5, "5s"), (119, "119s"), (200, "3m20s"), (600, "10m"), (3 * 3600 + 60, "3h1m"), (9 * 3600, "9h"), (3 * 86_400, "3d"), (3 * 86_400 + 7200, "3d2h")] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
        assert!(wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"));
        assert!(!wants_table("application/json"));
    }

    #[test]
    fn an_event_with_a_series_shows_its_count_and_last_observation() {
        let e = json!({
            "metadata": {"name": "drover-state-1.abc"}, "type": "Warning", "reason": "Rejected", "message": "Refused x ",
            "involvedObject": {"kind": "ConfigMap", "name": "drover-state-1"}, "eventTime": "2026-11-25T10:00:00.000000Z",
            "reportingComponent": "drover.dev/agent", "reportingInstance": "node-1",
            "series": {"count": 4, "lastObservedTime": "2026-11-25T10:05:00.000000Z"},
        });
        let now = drover_proto::time::parse_rfc3339("2026-11-25T10:06:00Z").unwrap();
        let t = events(&json!({"metadata": {"resourceVersion": "7"}, "items": [e]}), None, now);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["60s", "Warning", "Rejected", "configmap/drover-state-1", "", "drover.dev/agent, node-1", "Refused x", "6m", 4, "drover-state-1.abc"])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}
