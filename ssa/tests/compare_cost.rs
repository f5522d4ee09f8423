//! What the resync's compare of one object costs against its size (`bench/compare.sh`,
//! release build; ignored in the suite: no timed tests). For each hostile shape a tenant
//! can make an API server store — a keyed list (env items), a set (finalizers), many
//! managers, one wide entry, one deep entry — and growing sizes: the JSON size, the time
//! to read the object and to decide ([`Live::parse`] + [`apply_change`], CPU time of the
//! measuring thread, the mean of a few rounds), and the heap
//! the decision holds at its peak (a counting allocator). Linear work shows as a constant
//! time per item down each shape's rows.

use drover_ssa::live::Live;
use drover_ssa::verdict::apply_change;
use drover_ssa::Schema;
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// CPU time of this thread so far (user and system).
fn cpu() -> Duration {
    // SAFETY: an all-zero rusage is valid; getrusage writes it for this thread only.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer for the call.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let t = |v: libc::timeval| Duration::from_secs(v.tv_sec as u64) + Duration::from_micros(v.tv_usec as u64);
    t(u.ru_utime) + t(u.ru_stime)
}

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let n = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(n, Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn entry(manager: &str, operation: &str, fields: Value) -> Value {
    json!({"manager": manager, "operation": operation, "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
}

fn cm(extra_meta: Value, entries: Vec<Value>) -> (Value, Value) {
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": {"value": "1"}});
    let mut live = desired.clone();
    let mut all = vec![entry("drover", "Apply", json!({"f:data": {"f:value": {}}}))];
    all.extend(entries);
    live["metadata"]["managedFields"] = Value::Array(all);
    live["metadata"]["resourceVersion"] = json!("1");
    if let Some(m) = extra_meta.as_object() {
        for (k, v) in m {
            live["metadata"][k] = v.clone();
        }
    }
    (live, desired)
}

/// A live object and the apply body of `shape` at size `n`.
fn shape(name: &str, n: usize) -> (String, Value, &'static str, &'static str) {
    let (live, desired, av, kind) = match name {
        "env items" => {
            let env: Vec<Value> = (0..n).map(|i| json!({"name": format!("e{i:x}")})).collect();
            let keys: serde_json::Map<String, Value> = (0..n).map(|i| (format!("k:{{\"name\":\"e{i:x}\"}}"), json!({".": {}, "f:name": {}}))).collect();
            let pod = |env: Value| json!({"containers": [{"name": "main", "image": "i", "env": env}]});
            let desired = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
                "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod(json!([]))}}});
            let schema = Schema::builtin("apps/v1", "Deployment").unwrap();
            let w = drover_ssa::server::Write { manager: "drover", api_version: "apps/v1", subresource: None, now: "2026-01-01T00:00:00Z" };
            let mut live = drover_ssa::server::apply(&schema, None, &desired, &w, true).unwrap();
            live["spec"]["template"]["spec"]["containers"][0]["env"] = Value::Array(env);
            let list = live["metadata"]["managedFields"].as_array_mut().unwrap();
            list.push(entry("tenant", "Update", json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {"f:env": Value::Object(keys)}}}}}})));
            (live, desired, "apps/v1", "Deployment")
        }
        "finalizers" => {
            let fins: Vec<Value> = (0..n).map(|i| json!(format!("t/{i:x}"))).collect();
            let members: serde_json::Map<String, Value> = (0..n).map(|i| (format!("v:\"t/{i:x}\""), json!({}))).collect();
            let (live, desired) = cm(json!({"finalizers": fins}), vec![entry("tenant", "Update", json!({"f:metadata": {"f:finalizers": Value::Object(members)}}))]);
            (live, desired, "v1", "ConfigMap")
        }
        "managers" => {
            let entries = (0..n).map(|i| entry(&format!("m{i}"), "Apply", json!({"f:data": {format!("f:k{i}"): {}}}))).collect();
            let (live, desired) = cm(json!({}), entries);
            (live, desired, "v1", "ConfigMap")
        }
        "members" => {
            let fields: serde_json::Map<String, Value> = (0..n).map(|i| (format!("f:{i:x}"), json!({}))).collect();
            let (live, desired) = cm(json!({}), vec![entry("wide", "Update", json!({"f:data": Value::Object(fields)}))]);
            (live, desired, "v1", "ConfigMap")
        }
        _ => unreachable!(),
    };
    (serde_json::to_string(&live).unwrap(), desired, av, kind)
}

/// `depth` nested elements in a tenant's entry (as JSON text: too deep for a Value here).
fn deep(depth: usize) -> (String, Value) {
    let (_, desired) = cm(json!({}), vec![]);
    let mut fields = String::new();
    for i in 0..depth {
        fields.push_str(&format!("{{\"f:x{i}\":"));
    }
    fields.push_str("{}");
    fields.push_str(&"}".repeat(depth));
    let text = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","namespace":"n","resourceVersion":"1","managedFields":[{},{{"manager":"tenant","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{fields}}}]}},"data":{{"value":"1"}}}}"#,
        serde_json::to_string(&entry("drover", "Apply", json!({"f:data": {"f:value": {}}}))).unwrap()
    );
    (text, desired)
}

fn measure(label: &str, size: usize, text: &str, desired: &Value, av: &str, kind: &str) {
    let schema = Schema::builtin(av, kind).unwrap();
    let rounds = if text.len() > 200_000 { 5 } else { 20 };
    let mut took = Duration::ZERO;
    let mut heap = 0;
    let mut read = 0;
    for _ in 0..rounds {
        let base = NOW.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let start = cpu();
        let live = Live::parse(text).unwrap();
        read = NOW.load(Ordering::Relaxed) - base;
        let change = apply_change(&schema, live, desired, "drover");
        took += cpu() - start;
        heap = PEAK.load(Ordering::Relaxed) - base;
        if let Some(why) = &change.unknown {
            let heap = PEAK.load(Ordering::Relaxed) - base;
            println!("{label:>11} {size:>7} {:>9} KiB {:>8} KiB read {:>8} KiB peak, {why}", text.len() >> 10, read >> 10, heap >> 10);
            return;
        }
        assert!(change.is_none(), "{label} {size}: {change:?}");
    }
    let took = took / rounds;
    println!("{label:>11} {size:>7} {:>9} KiB {:>10.3} ms {:>8.2} µs/item {:>8} KiB read {:>8} KiB peak", text.len() >> 10, took.as_secs_f64() * 1e3, took.as_secs_f64() * 1e6 / size as f64, read >> 10, heap >> 10);
}

#[test]
#[ignore = "a measurement: bench/compare.sh"]
fn compare_cost() {
    println!("{:>11} {:>7} {:>13} {:>13} {:>16} {:>13} {:>13}", "shape", "size", "JSON", "read+decide", "per item", "heap: read", "peak");
    let sizes: &[(&str, &[usize])] = &[
        ("env items", &[1_000, 5_000, 20_000, 24_000]),
        ("finalizers", &[1_000, 20_000, 40_000]),
        ("managers", &[1_000, 5_000, 10_000]),
        ("members", &[10_000, 100_000]),
    ];
    let only = std::env::var("SHAPE").ok();
    for (name, ns) in sizes.iter().filter(|(n, _)| only.as_deref().is_none_or(|o| o == *n)) {
        for &n in *ns {
            let (text, desired, av, kind) = shape(name, n);
            measure(name, n, &text, &desired, av, kind);
        }
    }
    for depth in [200, 1_000, 9_990].into_iter().filter(|_| only.as_deref().is_none_or(|o| o == "depth")) {
        let (text, desired) = deep(depth);
        measure("depth", depth, &text, &desired, "v1", "ConfigMap");
    }
}
