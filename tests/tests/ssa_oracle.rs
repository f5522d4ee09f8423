//! drover-ssa against the real structured-merge-diff, beyond the recorded corpus: seeded,
//! generated sequences of server-side applies (drover, a second applier, forced or not)
//! and updates (an edit of the live object: a value changed, an item added or removed, a
//! label, a finalizer) on Deployments (keyed containers, env, ports with a defaulted key
//! field, volumes; atomic tolerations, selector, nodeSelector; a finalizer set), on
//! PersistentVolumes (a granular claimRef the PV controller completes), ControllerRevisions
//! (RawExtension `data`, untyped and atomic), webhook configurations and APIServices (a
//! `caBundle` another manager injects), CustomResourceDefinitions (atomic `versions` with
//! untyped JSONSchemaProps inside, a conversion webhook's `caBundle`), DeviceClasses
//! (resource.k8s.io/v1) and a custom resource (keyed items with a key default, atomic list
//! and map, preserve-unknown subtrees). Each sequence runs through both; the objects, every
//! manager's field set and which ops were refused with conflicts must agree.
//!
//! The real library runs the built-in kinds with the schema a real API server of that
//! minor builds from its published OpenAPI v3 (`oracle::spec_schema`: schemaconv's rules,
//! field-level overrides included), drover-ssa with its own table: the schema is under test
//! as much as the algorithm. The custom resource runs with drover-ssa's schema of its CRD
//! on both sides.
//!
//! The oracle is Debian's package of the library (v4.1.2, what the machines can install;
//! the corpus was recorded with v4.4.1). The two differ where drover-ssa follows v4.4.1:
//! the order of a merged keyed list (compared here as sets) and duplicate list items
//! (never generated). Run: `cargo test -p drover-tests --test ssa_oracle`; a seed, a count
//! and a minor for every built-in kind can be set with SSA_ORACLE_SEED, SSA_ORACLE_CASES
//! and SSA_ORACLE_MINOR.

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
    if live["kind"] != "Deployment" && live["kind"] != "Widget" {
        return edit_more(rng, live);
    }
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

struct Outcome {
    object: Value,
    managers: Vec<(String, Set)>,
    refused: Vec<bool>,
}

/// Generates one sequence, running it through drover-ssa as it goes (edits are made of
/// the live object).
fn generate_and_run(rng: &mut StdRng, kind: &str, ty: &Type, gen: Gen) -> (Vec<Value>, Outcome) {
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
        let mut cfg = gen(rng, manager);
        // One generator serves both webhook configuration kinds.
        cfg["kind"] = json!(kind);
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

type Gen = fn(&mut StdRng, &str) -> Value;

/// `cases` sequences of `kind` objects (drover-ssa's type `ty`) through both, the real
/// library with `schema` and its type `type_name`.
fn check(kind: &str, ty: &Type, (schema, type_name): (Value, String), gen: Gen, bin: &std::path::Path, seed: u64, cases: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let runs: Vec<(Vec<Value>, Outcome)> = (0..cases).map(|_| generate_and_run(&mut rng, kind, ty, gen)).collect();
    let sequences: Vec<Vec<Value>> = runs.iter().map(|(ops, _)| ops.clone()).collect();
    let real = oracle::run(bin, &schema, &type_name, &sequences);
    let mut wrong = Vec::new();
    for (i, ((ops, mine), theirs)) in runs.iter().zip(&real).enumerate() {
        let refused: Vec<bool> = theirs["errors"].as_array().unwrap().iter().map(|e| !e.is_null()).collect();
        let mut problems = Vec::new();
        if refused != mine.refused {
            problems.push(format!("conflicts: real {refused:?}, drover-ssa {:?} ({})", mine.refused, theirs["errors"]));
        }
        if oracle::canon(&theirs["object"]) != oracle::canon(&mine.object) {
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
    let minor: Option<u8> = std::env::var("SSA_ORACLE_MINOR").ok().and_then(|s| s.parse().ok());
    let kinds: [(&str, &str, &str, Gen, u8); 8] = [
        ("apps/v1", "Deployment", "io.k8s.api.apps.v1.Deployment", deployment, 30),
        ("v1", "PersistentVolume", "io.k8s.api.core.v1.PersistentVolume", persistent_volume, 35),
        ("apps/v1", "ControllerRevision", "io.k8s.api.apps.v1.ControllerRevision", controller_revision, 35),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration", webhooks, 35),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration", webhooks, 29),
        ("apiregistration.k8s.io/v1", "APIService", "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService", api_service, 35),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition", crd_object, 35),
        ("resource.k8s.io/v1", "DeviceClass", "io.k8s.api.resource.v1.DeviceClass", device_class, 34),
    ];
    for (i, (av, kind, type_name, gen, default_minor)) in kinds.into_iter().enumerate() {
        let m = minor.unwrap_or(default_minor);
        let ty = Schema::builtin_at(m, av, kind).unwrap_or_else(|| panic!("1.{m} serves {kind}")).root;
        check(kind, &ty, (oracle::spec_schema(m), type_name.to_string()), gen, &bin, seed + 2 + i as u64, cases);
    }
    let crd: Value = serde_json::from_str(include_str!("../fixtures/kube-fidelity/widget-crd.json")).unwrap();
    let widget_ty = drover_ssa::crd::schema_for(&crd, "v1").unwrap().root;
    check("Widget", &widget_ty, oracle::schema(&widget_ty), widget, &bin, seed + 1, cases);
}

fn drover_meta(d: &mut Value, manager: &str) {
    if manager == "drover" {
        d["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "drover"});
    }
}

/// A PersistentVolume: drover's (pre-bound to a claim), or the PV controller's apply of
/// the claim's uid and kind inside claimRef.
fn persistent_volume(rng: &mut StdRng, manager: &str) -> Value {
    let mut pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {}});
    if manager == "drover" {
        pv["spec"] = json!({
            "capacity": {"storage": pick(rng, &["1Gi", "2Gi"])},
            "accessModes": some(rng, &["ReadWriteOnce", "ReadOnlyMany"]),
            "hostPath": {"path": pick(rng, &["/data", "/srv"])},
            "claimRef": {"namespace": "n", "name": pick(rng, &["data", "logs"])},
            "storageClassName": pick(rng, &["manual", "fast"]),
        });
        if rng.random_bool(0.3) {
            pv["spec"]["mountOptions"] = json!(some(rng, &["ro", "noatime"]));
        }
    } else {
        pv["spec"]["claimRef"] = json!({"uid": pick(rng, &["u-1", "u-2"]), "kind": "PersistentVolumeClaim", "apiVersion": "v1"});
        if rng.random_bool(0.3) {
            pv["spec"]["claimRef"]["name"] = json!(pick(rng, &["data", "other"]));
        }
    }
    drover_meta(&mut pv, manager);
    pv
}

/// A ControllerRevision: `data` is a RawExtension (one untyped value, owned whole).
fn controller_revision(rng: &mut StdRng, manager: &str) -> Value {
    let mut cr = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "rev", "namespace": "n"}});
    if manager == "drover" {
        cr["revision"] = json!(*pick(rng, &[1, 2]));
        cr["data"] = json!({"spec": {"template": {"metadata": {"labels": {"app": pick(rng, &["a", "b"])}}, "spec": {"containers": [{"name": "c", "image": pick(rng, &["x:1", "x:2"])}]}}}});
    } else {
        cr["data"] = json!({"spec": {"template": {"metadata": {"annotations": {"mesh": "on"}}}}});
    }
    drover_meta(&mut cr, manager);
    cr
}

/// A webhook configuration (kind set by the caller's edit; webhooks keyed by name): drover's
/// hooks, or another manager's `caBundle` in one of them.
fn webhooks(rng: &mut StdRng, manager: &str) -> Value {
    let mut w = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "hooks"}});
    let names = ["a.example.com", "b.example.com"];
    if manager == "drover" {
        let hooks: Vec<Value> = some(rng, &names).into_iter().map(|n| json!({
            "name": n, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "n", "name": "hook", "path": pick(rng, &["/v", "/w"])}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": some(rng, &["pods", "services"])}],
        })).collect();
        w["webhooks"] = json!(hooks);
    } else {
        w["webhooks"] = json!([{"name": pick(rng, &names), "clientConfig": {"caBundle": pick(rng, &["Y2E=", "Y2I="])}}]);
    }
    drover_meta(&mut w, manager);
    w
}

/// An APIService: drover's, or another manager's `caBundle`.
fn api_service(rng: &mut StdRng, manager: &str) -> Value {
    let mut a = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.metrics.example.com"}, "spec": {}});
    if manager == "drover" {
        a["spec"] = json!({"group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": *pick(rng, &[100, 200]), "versionPriority": 15,
            "service": {"namespace": "n", "name": pick(rng, &["metrics", "m2"]), "port": 443}});
    } else {
        a["spec"]["caBundle"] = json!(pick(rng, &["Y2E=", "Y2I="]));
    }
    drover_meta(&mut a, manager);
    a
}

/// A CustomResourceDefinition: drover's (atomic `versions`, untyped JSONSchemaProps
/// values inside), or another manager's conversion webhook `caBundle`.
fn crd_object(rng: &mut StdRng, manager: &str) -> Value {
    let mut c = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}, "spec": {}});
    if manager == "drover" {
        let mut props = json!({"size": {"type": "integer", "default": *pick(rng, &[1, 3])}, "tags": {"type": "array", "items": {"type": "string"}}});
        if rng.random_bool(0.5) {
            props["extra"] = json!({"type": "object", "additionalProperties": {"type": "string"}});
        }
        c["spec"] = json!({"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}],
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"service": {"namespace": "n", "name": pick(rng, &["conv", "c2"])}}}}});
    } else {
        c["spec"]["conversion"] = json!({"webhook": {"clientConfig": {"caBundle": pick(rng, &["Y2E=", "Y2I="])}}});
    }
    drover_meta(&mut c, manager);
    c
}

/// A DeviceClass (resource.k8s.io/v1): atomic lists of selectors and configurations.
fn device_class(rng: &mut StdRng, manager: &str) -> Value {
    let mut d = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}});
    if manager == "drover" {
        d["spec"]["selectors"] = json!(some(rng, &[json!({"cel": {"expression": "device.driver == 'gpu.example.com'"}}), json!({"cel": {"expression": "device.attributes['gpu.example.com'].model == 'a'"}})]));
        if rng.random_bool(0.5) {
            d["spec"]["config"] = json!([{"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": pick(rng, &["time", "mps"])}}}]);
        }
    } else {
        d["metadata"]["labels"] = json!({"mesh": "on"});
        d["spec"]["extendedResourceName"] = json!("example.com/gpu");
    }
    drover_meta(&mut d, manager);
    d
}

/// Edits of the kinds beyond Deployments and Widgets: the PV controller completing
/// claimRef, a nested `kubectl edit` inside untyped data or a CRD's schema, a caBundle
/// injected by an update, a label.
fn edit_more(rng: &mut StdRng, live: &Value) -> Value {
    let mut v = live.clone();
    match (live["kind"].as_str().unwrap_or_default(), rng.random_range(0..3)) {
        ("PersistentVolume", 0) => {
            if let Some(c) = v.pointer_mut("/spec/claimRef").and_then(Value::as_object_mut) {
                c.insert("uid".into(), json!("u-9"));
                c.insert("resourceVersion".into(), json!("12"));
            }
        }
        ("PersistentVolume", 1) => v["spec"]["storageClassName"] = json!("edited"),
        ("ControllerRevision", 0) => {
            if let Some(t) = v.pointer_mut("/data/spec/template/metadata").and_then(Value::as_object_mut) {
                t.insert("annotations".into(), json!({"edited": "yes"}));
            }
        }
        ("ControllerRevision", 1) => v["revision"] = json!(7),
        ("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration", 0) => {
            if let Some(w) = v.pointer_mut("/webhooks/0/clientConfig").and_then(Value::as_object_mut) {
                w.insert("caBundle".into(), json!("ZWQ="));
            }
        }
        ("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration", 1) => {
            if let Some(w) = v.pointer_mut("/webhooks/0").and_then(Value::as_object_mut) {
                w.insert("failurePolicy".into(), json!("Ignore"));
            }
        }
        ("APIService", 0) => v["spec"]["caBundle"] = json!("ZWQ="),
        ("APIService", 1) => v["spec"]["versionPriority"] = json!(99),
        ("CustomResourceDefinition", 0) => {
            if let Some(p) = v.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size").and_then(Value::as_object_mut) {
                p.insert("description".into(), json!("edited"));
            }
        }
        ("CustomResourceDefinition", 1) => {
            if let Some(c) = v.pointer_mut("/spec/conversion/webhook/clientConfig").and_then(Value::as_object_mut) {
                c.insert("caBundle".into(), json!("ZWQ="));
            }
        }
        ("DeviceClass", 0) => v["spec"]["selectors"] = json!([{"cel": {"expression": "true"}}]),
        _ => {
            v["metadata"]["labels"]["edited"] = json!("yes");
        }
    }
    v
}
