//! drover-ssa against the real structured-merge-diff, beyond the recorded corpus: seeded,
//! generated sequences of server-side applies (drover, a second applier, forced or not)
//! and updates (an edit of the live object: a value changed, an item added or removed, a
//! label, a finalizer) on Deployments (keyed containers, env, ports with a defaulted key
//! field, volumes; atomic tolerations, selector, nodeSelector; a finalizer set) and on a
//! custom resource (keyed items with a key default, atomic list and map, preserve-unknown
//! subtrees). Each sequence runs through both; the objects, every manager's field set and
//! which ops were refused with conflicts must agree.
//!
//! The oracle is Debian's package of the library (v4.1.2, what the machines can install;
//! the corpus was recorded with v4.4.1). The two differ where drover-ssa follows v4.4.1:
//! the order of a merged keyed list (compared here as sets) and duplicate list items
//! (never generated). Run: `cargo test -p drover-tests --test ssa_oracle`; a seed and a
//! count can be set with SSA_ORACLE_SEED and SSA_ORACLE_CASES.

use drover_ssa::fieldpath::Set;
use drover_ssa::schema::{Schema, Type};
use drover_ssa::update::{self, Managers, Scope};
use drover_tests::oracle;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const MANAGERS: &[&str] = &["drover", "mesh", "kubectl-edit"];

fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

fn some<T: Clone>(rng: &mut StdRng, xs: &[T]) -> Vec<T> {
    xs.iter().filter(|_| rng.random_bool(0.5)).cloned().collect()
}

fn container(rng: &mut StdRng, name: &str) -> Value {
    let mut c = json!({"name": name, "image": pick(rng, &["nginx:1", "nginx:2", "envoy:1"])});
    let env = some(rng, &[json!({"name": "MODE", "value": "prod"}), json!({"name": "DEBUG", "value": "1"}), json!({"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "db", "key": "p"}}})]);
    if !env.is_empty() || rng.random_bool(0.2) {
        c["env"] = json!(env);
    }
    let ports = some(rng, &[json!({"containerPort": 80}), json!({"containerPort": 80, "protocol": "UDP"}), json!({"containerPort": 8080, "name": "http", "protocol": "TCP"})]);
    if !ports.is_empty() {
        c["ports"] = json!(ports);
    }
    if rng.random_bool(0.4) {
        c["resources"] = json!({"limits": {"cpu": pick(rng, &["1", "500m"])}});
    }
    if rng.random_bool(0.3) {
        c["args"] = json!(some(rng, &["--a", "--b", "--c"]));
    }
    c
}

/// A Deployment as one manager would apply it (any subset of the fields below).
fn deployment(rng: &mut StdRng, manager: &str) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "n"}, "spec": {}});
    let names: Vec<&str> = if manager == "drover" { some(rng, &["main", "side"]) } else { vec!["proxy"] };
    let names = if names.is_empty() { vec!["main"] } else { names };
    let mut spec = json!({"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": names.iter().map(|n| container(rng, n)).collect::<Vec<_>>()}}});
    if manager == "drover" {
        if rng.random_bool(0.6) {
            spec["replicas"] = json!(*pick(rng, &[1, 2, 3]));
        }
        if rng.random_bool(0.4) {
            spec["template"]["spec"]["tolerations"] = json!(some(rng, &[json!({"key": "a", "operator": "Exists"}), json!({"key": "b", "value": "x", "effect": "NoSchedule"})]));
        }
        if rng.random_bool(0.4) {
            spec["template"]["spec"]["nodeSelector"] = json!({"pool": pick(rng, &["a", "b"])});
        }
        if rng.random_bool(0.4) {
            spec["template"]["spec"]["volumes"] = json!([{"name": "cfg", "configMap": {"name": pick(rng, &["c1", "c2"])}}]);
        }
        let labels = some(rng, &[("app", "web"), ("tier", "front")]);
        if !labels.is_empty() {
            d["metadata"]["labels"] = labels.into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>().into();
        }
        let fin = some(rng, &["a.example/x", "b.example/y"]);
        if !fin.is_empty() {
            d["metadata"]["finalizers"] = json!(fin);
        }
    } else if rng.random_bool(0.5) {
        d["metadata"]["labels"] = json!({"mesh": "on"});
    }
    d["spec"] = spec;
    d
}

fn widget(rng: &mut StdRng, manager: &str) -> Value {
    let mut w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "n"}, "spec": {}});
    let spec = &mut w["spec"];
    if manager == "drover" {
        spec["size"] = json!(*pick(rng, &[1, 3]));
        spec["tags"] = json!(some(rng, &["a", "b", "c"]));
        spec["selector"] = json!({"app": pick(rng, &["web", "api"])});
    }
    let items: Vec<Value> = some(rng, &[json!({"weight": 1}), json!({"name": "x", "weight": 2}), json!({"name": "y", "kind": "k"})]);
    if !items.is_empty() {
        spec["items"] = json!(items);
    }
    let mut values = json!({});
    if rng.random_bool(0.6) {
        values["image"] = json!({"tag": pick(rng, &["v1", "v2"])});
    }
    if rng.random_bool(0.5) {
        values[if manager == "drover" { "replicas" } else { "extra" }] = json!(2);
    }
    spec["values"] = values;
    w
}

/// An edit of the live object (an Update): a value changed, an item added or removed.
fn edit(rng: &mut StdRng, live: &Value) -> Value {
    let mut v = live.clone();
    match rng.random_range(0..6) {
        0 => {
            if let Some(c) = v.pointer_mut("/spec/template/spec/containers/0") {
                c["image"] = json!("edited:9");
            } else if let Some(s) = v.pointer_mut("/spec/size") {
                *s = json!(9);
            }
        }
        1 => {
            if let Some(c) = v.pointer_mut("/spec/template/spec/containers/0") {
                let env = c.as_object_mut().unwrap().entry("env").or_insert(json!([]));
                let env = env.as_array_mut().unwrap();
                if !env.iter().any(|e| e["name"] == "ADDED") {
                    env.push(json!({"name": "ADDED", "value": "1"}));
                }
            } else if let Some(items) = v.pointer_mut("/spec/items").and_then(Value::as_array_mut) {
                if !items.iter().any(|e| e["name"] == "z") {
                    items.push(json!({"name": "z", "weight": 5}));
                }
            }
        }
        2 => {
            if let Some(env) = v.pointer_mut("/spec/template/spec/containers/0/env").and_then(Value::as_array_mut) {
                env.pop();
            } else if let Some(t) = v.pointer_mut("/spec/tags").and_then(Value::as_array_mut) {
                t.push(json!("edited"));
            }
        }
        3 => {
            v["metadata"]["labels"]["edited"] = json!("yes");
        }
        4 => {
            if let Some(f) = v.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut) {
                f.clear();
            } else if let Some(t) = v.pointer_mut("/spec/template/spec/tolerations/0") {
                t["tolerationSeconds"] = json!(30);
            } else if let Some(sel) = v.pointer_mut("/spec/selector/matchLabels").and_then(Value::as_object_mut) {
                sel.insert("extra".into(), json!("x"));
            } else if let Some(sel) = v.pointer_mut("/spec/selector").and_then(Value::as_object_mut) {
                sel.insert("extra".into(), json!("x"));
            }
        }
        _ => {
            if let Some(vals) = v.pointer_mut("/spec/values").and_then(Value::as_object_mut) {
                vals.insert("image".into(), json!({"tag": "edited"}));
            } else if let Some(r) = v.pointer_mut("/spec/replicas") {
                *r = json!(7);
            }
        }
    }
    v
}

/// Arrays sorted (merged keyed lists may be ordered differently by v4.1.2 and v4.4.1).
fn canon(v: &Value) -> Value {
    match v {
        Value::Array(a) => {
            let mut items: Vec<Value> = a.iter().map(canon).collect();
            items.sort_by_key(|i| i.to_string());
            Value::Array(items)
        }
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), canon(v))).collect()),
        v => v.clone(),
    }
}

struct Outcome {
    object: Value,
    managers: Vec<(String, Set)>,
    refused: Vec<bool>,
}

/// Generates one sequence, running it through drover-ssa as it goes (edits are made of
/// the live object).
fn generate_and_run(rng: &mut StdRng, ty: &Type, gen: fn(&mut StdRng, &str) -> Value) -> (Vec<Value>, Outcome) {
    let empty = Set::new();
    let scope = Scope { ty, ignored: &empty, version: "v1" };
    let mut live = json!({});
    let mut managers = Managers::new();
    let mut ops = Vec::new();
    let mut refused = Vec::new();
    let n = rng.random_range(2..6);
    for i in 0..n {
        let manager = if i == 0 { "drover" } else { *pick(rng, MANAGERS) };
        if manager == "kubectl-edit" {
            let new = edit(rng, &live);
            update::update(&live, &new, scope, &mut managers, manager);
            live = new;
            ops.push(json!({"op": "update", "manager": manager, "object": live}));
            refused.push(false);
            continue;
        }
        let cfg = gen(rng, manager);
        let force = rng.random_bool(0.5);
        let mut trial = managers.clone();
        match update::apply(&live, &cfg, scope, &mut trial, manager, force) {
            Ok(new) => {
                live = new;
                managers = trial;
                refused.push(false);
            }
            Err(_) => refused.push(true),
        }
        ops.push(json!({"op": "apply", "manager": manager, "object": cfg, "force": force}));
    }
    let managers = managers.into_iter().map(|(m, o)| (m, o.set)).collect();
    (ops, Outcome { object: live, managers, refused })
}

fn check(kind: &str, ty: &Type, gen: fn(&mut StdRng, &str) -> Value, bin: &std::path::Path, seed: u64, cases: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (schema, type_name) = oracle::schema(ty);
    let runs: Vec<(Vec<Value>, Outcome)> = (0..cases).map(|_| generate_and_run(&mut rng, ty, gen)).collect();
    let sequences: Vec<Vec<Value>> = runs.iter().map(|(ops, _)| ops.clone()).collect();
    let real = oracle::run(bin, &schema, &type_name, &sequences);
    let mut wrong = Vec::new();
    for (i, ((ops, mine), theirs)) in runs.iter().zip(&real).enumerate() {
        let refused: Vec<bool> = theirs["errors"].as_array().unwrap().iter().map(|e| !e.is_null()).collect();
        let mut problems = Vec::new();
        if refused != mine.refused {
            problems.push(format!("conflicts: real {refused:?}, drover-ssa {:?} ({})", mine.refused, theirs["errors"]));
        }
        if canon(&theirs["object"]) != canon(&mine.object) {
            problems.push(format!("object:\n    real       {}\n    drover-ssa {}", theirs["object"], mine.object));
        }
        let mut real_sets: Vec<(String, Set)> = theirs["managers"].as_object().unwrap().iter().map(|(m, f)| (m.clone(), Set::from_fields_v1(f).unwrap())).collect();
        real_sets.sort_by(|a, b| a.0.cmp(&b.0));
        let mut mine_sets = mine.managers.clone();
        mine_sets.sort_by(|a, b| a.0.cmp(&b.0));
        if real_sets != mine_sets {
            let show = |s: &[(String, Set)]| s.iter().map(|(m, s)| format!("{m}: {}", s.to_fields_v1())).collect::<Vec<_>>().join("\n      ");
            problems.push(format!("field sets:\n    real\n      {}\n    drover-ssa\n      {}", show(&real_sets), show(&mine_sets)));
        }
        if !problems.is_empty() {
            wrong.push(format!("{kind} case {i} (seed {seed}) ops {}:\n  {}", serde_json::to_string(ops).unwrap(), problems.join("\n  ")));
        }
    }
    assert!(wrong.is_empty(), "{} of {cases} {kind} sequences differ from the real library:\n{}", wrong.len(), wrong.iter().take(3).cloned().collect::<Vec<_>>().join("\n\n"));
}

#[test]
fn generated_sequences_agree_with_the_real_library() {
    let dir = tempfile::tempdir().unwrap();
    let bin = oracle::build(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let seed = std::env::var("SSA_ORACLE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(24);
    let cases = std::env::var("SSA_ORACLE_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let deploy = Schema::builtin("apps/v1", "Deployment").unwrap().root;
    check("Deployment", &deploy, deployment, &bin, seed, cases);
    let crd: Value = serde_json::from_str(include_str!("../fixtures/kube-fidelity/widget-crd.json")).unwrap();
    let widget_ty = drover_ssa::crd::schema_for(&crd, "v1").unwrap().root;
    check("Widget", &widget_ty, widget, &bin, seed + 1, cases);
}
