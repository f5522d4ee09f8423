//! The resync's compare over a hostile live object (issue 36): any bytes an API server
//! (or a tenant through it) could return for an object drover manages — deep or wide
//! `managedFields`, duplicate keys, malformed entries, deep content — are read by
//! `Live::parse` and compared with `verdict::apply_change` against a fixed apply body of
//! the object's kind. Never panics, never overflows the stack, stays within libFuzzer's
//! memory limit; an object that cannot be compared says why (`Change::unknown`).
#![no_main]

use drover_ssa::live::Live;
use drover_ssa::verdict::apply_change;
use drover_ssa::Schema;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(live) = Live::parse(text) else { return };
    let (schema, desired) = match live.object["kind"].as_str() {
        Some("Deployment") => (
            Schema::builtin("apps/v1", "Deployment").expect("built in"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
                "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "main", "image": "i", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]}]}}}}),
        ),
        Some("Secret") => (Schema::builtin("v1", "Secret").expect("built in"), json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}, "stringData": {"k": "v"}})),
        Some("Widget") => (Schema::deduced(), json!({"apiVersion": "x.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": {"b": [1, 2]}}})),
        _ => (Schema::builtin("v1", "ConfigMap").expect("built in"), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n", "finalizers": ["a/b"]}, "data": {"value": "1"}})),
    };
    let incomplete = live.incomplete.clone();
    let change = apply_change(&schema, live, &desired, "drover");
    if incomplete.is_some() {
        assert!(change.unknown.is_some(), "an incomplete read is never vouched for");
    }
});
