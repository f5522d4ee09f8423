//! Live objects a tenant can make an API server store (it checks only a managedFields
//! entry's operation, fieldsType, manager and subresource; its decoder takes 10,000
//! levels; an object may reach ~1.5 MiB): read and compared on an ordinary thread's stack,
//! the verdict the same as for the plain object, one unreadable entry not making the rest
//! of the object unreadable.

use drover_ssa::live::{Live, MAX_DEPTH};
use drover_ssa::verdict::apply_change;
use drover_ssa::Schema;
use serde_json::{json, Value};

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data})
}

/// The live ConfigMap as the server stores it after drover applied `data`, with `extra`
/// managedFields entries (JSON text) after drover's.
fn live_text(data: &Value, extra: &[String]) -> String {
    let keys: Vec<String> = data.as_object().unwrap().keys().map(|k| format!("{:?}:{{}}", format!("f:{k}"))).collect();
    let mine = format!(
        r#"{{"manager":"drover","operation":"Apply","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{{}}}}}}}"#,
        keys.join(",")
    );
    let mut entries = vec![mine];
    entries.extend(extra.iter().cloned());
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","namespace":"n","resourceVersion":"7","managedFields":[{}]}},"data":{}}}"#,
        entries.join(","),
        data
    )
}

fn deep_fields(depth: usize) -> String {
    let mut s = String::with_capacity(depth * 12);
    for i in 0..depth {
        s.push_str(&format!("{{\"f:x{i}\":"));
    }
    s.push_str("{}");
    s.push_str(&"}".repeat(depth));
    s
}

fn entry(manager: &str, fields: &str) -> String {
    format!(r#"{{"manager":{manager:?},"operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{fields}}}"#)
}

/// On a thread with a 1 MiB stack, as small as any the agent runs compares on.
fn small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(1 << 20).spawn(f).unwrap().join().unwrap()
}

fn verdict(text: &str, desired: &Value) -> drover_ssa::verdict::Change {
    let schema = Schema::builtin("v1", "ConfigMap").unwrap();
    let live = Live::parse(text).expect("readable");
    apply_change(&schema, live, desired, "drover")
}

#[test]
fn a_fields_v1_nested_as_deep_as_a_server_stores_is_read_and_compared() {
    for depth in [200, 1_000, 9_990] {
        let (same, drift) = small_stack(move || {
            let data = json!({"key": "good"});
            let extra = [entry("tenant", &deep_fields(depth))];
            let same = verdict(&live_text(&data, &extra), &cm(data.clone()));
            let drift = verdict(&live_text(&json!({"key": "evil"}), &extra), &cm(data));
            (same, drift)
        });
        assert!(same.is_none(), "depth {depth}: {same:?}");
        assert_eq!(drift.values, [".data"], "depth {depth}: {drift:?}");
        assert!(drift.unknown.is_none(), "depth {depth}: {drift:?}");
    }
}

#[test]
fn content_nested_deeper_than_the_bound_is_undecidable_by_name() {
    let deep = format!("{}1{}", "[".repeat(MAX_DEPTH + 10), "]".repeat(MAX_DEPTH + 10));
    let text = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","resourceVersion":"3"}},"data":{{"a":"1"}},"extra":{deep}}}"#);
    let c = small_stack(move || {
        let live = Live::parse(&text).unwrap();
        assert_eq!(live.resource_version(), "3", "the rest of the object is read");
        assert_eq!(live.incomplete.as_deref(), Some(&*format!("extra nests deeper than {MAX_DEPTH} levels")));
        apply_change(&Schema::builtin("v1", "ConfigMap").unwrap(), live, &cm(json!({"a": "1"})), "drover")
    });
    assert_eq!(c.unknown.as_deref(), Some(&*format!("not compared: extra nests deeper than {MAX_DEPTH} levels")));
    assert!(!c.is_none());
}

#[test]
fn an_unreadable_entry_names_itself_and_leaves_the_object_readable() {
    let data = json!({"key": "good"});
    for (bad, why) in [
        (entry("t", r#"{"x:nope":{}}"#), "managedFields[1]: unknown field set key \"x:nope\""),
        (entry("t", r#"{"f:a":[1,2]}"#), "managedFields[1]: a field set node is not an object"),
        (entry("t", r#""FieldsV2""#), "managedFields[1]: fieldsV1 is not an object"),
        (r#"{"manager":"t","fieldsV1":{}}"#.to_string(), "managedFields[1]: managedFields entry without operation"),
    ] {
        let live = Live::parse(&live_text(&data, &[bad])).unwrap();
        assert_eq!(live.entries.as_ref().unwrap_err(), why);
        assert_eq!(live.object["data"]["key"], "good");
        let c = apply_change(&Schema::builtin("v1", "ConfigMap").unwrap(), live, &cm(data.clone()), "drover");
        assert_eq!(c.unknown, Some(format!("its managed fields cannot be read: {why}")));
    }
}

#[test]
fn duplicate_keys_and_duplicate_managers_do_not_vouch_for_the_object() {
    let data = json!({"key": "good"});
    // The same key twice in fieldsV1 (JSON keeps the last; the set is the same).
    let twice = entry("t", r#"{"f:data":{"f:other":{}},"f:data":{"f:other":{}}}"#);
    assert!(verdict(&live_text(&data, &[twice]), &cm(data.clone())).is_none());
    // drover's own entry twice: a re-apply writes one; the compare does not vouch.
    let mine = r#"{"manager":"drover","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:key":{}}}}"#.to_string();
    let c = verdict(&live_text(&data, &[mine]), &cm(data));
    assert_eq!(c.owners, ["drover"], "{c:?}");
}

#[test]
fn ten_thousand_managers_a_hundred_thousand_members_and_malformed_json() {
    let data = json!({"key": "good"});
    let many: Vec<String> = (0..10_000).map(|i| entry(&format!("m{i}"), &format!(r#"{{"f:data":{{"f:k{i}":{{}}}}}}"#))).collect();
    assert!(verdict(&live_text(&data, &many), &cm(data.clone())).is_none());
    let members: Vec<String> = (0..100_000).map(|i| format!("\"f:k{i}\":{{}}")).collect();
    let wide = entry("wide", &format!("{{\"f:data\":{{{}}}}}", members.join(",")));
    // 100,000 fields would take more than the read's bound once read: refused by name,
    // the rest of the object (its metadata) still read.
    let text = live_text(&json!({"key": "evil"}), &[wide]);
    let live = Live::parse(&text).unwrap();
    assert_eq!(live.resource_version(), "7");
    assert!(live.heap <= drover_ssa::live::MAX_HEAP + (1 << 20), "{}", live.heap);
    let c = verdict(&text, &cm(data));
    assert_eq!(c.unknown.as_deref(), Some("not compared: it takes more than 8 MiB in memory once read (drover compares objects up to that)"));
    for bad in ["", "{", "[]", "{\"metadata\":", "{\"data\":{\"password\":\"hunter2\"}"] {
        let e = Live::parse(bad).unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }
}
