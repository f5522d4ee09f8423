//! A resync (the applied digest again) writes only what drifted (real binaries, real
//! registry, `kubectl` as the independent client that makes the drift, FAKE API server or
//! a real cluster):
//!
//! - drift made with kubectl — a changed ConfigMap value, a removed label, a Deployment
//!   scaled with `kubectl scale`, a field another manager took over with
//!   `--force-conflicts`, a field whose value is back but whose ownership is not, a
//!   deleted object — is corrected on the next resync and counted as drift;
//! - an unchanged cluster gets no write at all (the FAKE API server counts requests), and
//!   1,000 unchanged objects are read with one LIST per kind and namespace (plus pages);
//!   their first apply is one request per object besides those LISTs (no GET each).

mod kube_support;

use drover_tests::fakekube::{FakeApiServer, Verb};
use kube_support::{state_name, Cluster, Env};
use serde_json::Value;

scenarios!(drift_made_with_kubectl_is_corrected_on_resync);

/// Write requests the fake counted (POST, PUT, PATCH, DELETE on any resource).
fn writes(fake: &FakeApiServer) -> u64 {
    let c = fake.request_counts();
    [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete, Verb::DeleteCollection].iter().map(|v| c.verb(*v)).sum()
}

/// One more resync of an unchanged cluster: every object `unchanged`, no drift, and on
/// the fake not a single write request (the in-cluster state record included).
fn resync_writes_nothing(env: &Env) {
    if let Some(fake) = env.cluster.fake_server() {
        fake.reset_request_counts();
        fake.clear_requests();
    }
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["resync"], true, "{attempt:#}");
    assert_eq!(attempt["drift"], 0, "{attempt:#}");
    let changed: Vec<&Value> = attempt["objects"].as_array().unwrap().iter().filter(|o| o["action"] != "unchanged").collect();
    assert!(changed.is_empty(), "an unchanged cluster: every object unchanged, got {changed:#?}");
    // What the agent itself counted, on the fake and on a real cluster alike.
    assert_eq!(attempt["writes"], serde_json::json!({"create": 0, "update": 0, "patch": 0, "delete": 0}), "{attempt:#}");
    assert_eq!(env.status()["lastAttempt"]["writes"]["patch"], 0);
    if let Some(fake) = env.cluster.fake_server() {
        let sent: Vec<String> = fake
            .requests()
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}?{} ({})", r.method, r.path, r.query, r.content_type.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(writes(fake), 0, "an unchanged resync writes nothing, it sent: {sent:#?}");
    }
}

/// drover's own server-side apply entry (field manager `drover`, operation Apply) of a
/// live object, as `kubectl get --show-managed-fields` prints it.
fn drover_fields(env: &Env, resource: &str, name: &str) -> Value {
    let obj = env.kubectl_ok(&["get", resource, name, "-n", &env.ns, "-o", "json", "--show-managed-fields"]).json();
    let entries = obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    entries
        .into_iter()
        .find(|e| e["manager"] == "drover" && e["operation"] == "Apply")
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

fn labelled_configmap(env: &Env, name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {}\n  labels:\n    tier: web\ndata:\n  value: \"1\"\n", env.ns)
}

fn deployment(env: &Env, name: &str, replicas: u32) -> String {
    env.deployment(name, "nginx:1.27").replace("replicas: 1", &format!("replicas: {replicas}"))
}

fn drift_made_with_kubectl_is_corrected_on_resync(env: &Env) {
    let docs = [
        env.namespace(),
        env.configmap("edited", "1", &[]),
        labelled_configmap(env, "labelled"),
        env.configmap("taken", "1", &[]),
        env.configmap("owned", "1", &[]),
        env.configmap("doomed", "1", &[]),
        deployment(env, "web", 2),
    ];
    let digest = env.push(&docs, &[]);
    env.agent_ok(&[]);
    assert_eq!(env.last_attempt()["result"], "Applied");
    resync_writes_nothing(env);

    // Drift, each made with kubectl, the way an operator would.
    let ns = env.ns.as_str();
    env.kubectl_ok(&["patch", "configmap", "edited", "-n", ns, "--type", "json", "-p", r#"[{"op":"replace","path":"/data/value","value":"tampered"}]"#]);
    env.kubectl_ok(&["label", "configmap", "labelled", "-n", ns, "tier-"]);
    env.kubectl_ok(&["scale", "deployment", "web", "-n", ns, "--replicas", "5"]);
    let theirs = |name: &str, value: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  value: \"{value}\"\n");
    let intruder = |yaml: String, force: bool| {
        let mut args = vec!["apply", "--server-side", "--field-manager", "intruder", "-f", "-"];
        if force {
            args.push("--force-conflicts");
        }
        let out = env.kubectl(&args, &yaml);
        assert_eq!(out.code, 0, "kubectl apply:\n{yaml}\n{}\n{}", out.stdout, out.stderr);
    };
    // Another manager takes a field over with force (a different value) ...
    intruder(theirs("taken", "theirs"), true);
    // ... and on another object takes it, then puts drover's value back: the value is
    // right but drover no longer manages the field (a value-only compare misses this).
    intruder(theirs("owned", "theirs"), true);
    intruder(theirs("owned", "1"), false);
    assert_eq!(env.get("configmap", "owned").unwrap()["data"]["value"], "1");
    assert!(drover_fields(env, "configmap", "owned").pointer("/f:data/f:value").is_none(), "the intruder owns data.value now");
    env.kubectl_ok(&["delete", "configmap", "doomed", "-n", ns]);
    // The in-cluster record is rewritten when it is gone.
    env.kubectl_ok(&["delete", "configmap", &state_name(&env.reference), "-n", ns]);

    assert_eq!(env.get("configmap", "edited").unwrap()["data"]["value"], "tampered");
    assert!(env.get("configmap", "labelled").unwrap()["metadata"]["labels"].get("tier").is_none());
    assert_eq!(env.get("deployment", "web").unwrap()["spec"]["replicas"], 5);
    assert_eq!(env.get("configmap", "taken").unwrap()["data"]["value"], "theirs");

    // The next resync corrects every one of them.
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["digest"], digest.as_str());
    assert_eq!(attempt["resync"], true, "{attempt:#}");
    assert_eq!(attempt["drift"], 6, "{attempt:#}");
    for (kind, name, action) in [
        ("Namespace", ns, "unchanged"),
        ("ConfigMap", "edited", "configured"),
        ("ConfigMap", "labelled", "configured"),
        ("ConfigMap", "taken", "configured"),
        ("ConfigMap", "owned", "configured"),
        ("ConfigMap", "doomed", "created"),
        ("Deployment", "web", "configured"),
    ] {
        assert_eq!(Env::action(&attempt, kind, name).0, action, "{kind} {name}: {attempt:#}");
    }
    assert_eq!(env.get("configmap", "edited").unwrap()["data"]["value"], "1");
    assert_eq!(env.get("configmap", "labelled").unwrap()["metadata"]["labels"]["tier"], "web");
    assert_eq!(env.get("deployment", "web").unwrap()["spec"]["replicas"], 2);
    assert_eq!(env.get("configmap", "taken").unwrap()["data"]["value"], "1");
    assert!(drover_fields(env, "configmap", "taken").pointer("/f:data/f:value").is_some());
    assert!(drover_fields(env, "configmap", "owned").pointer("/f:data/f:value").is_some(), "drover manages data.value again");
    assert_eq!(env.get("configmap", "doomed").unwrap()["data"]["value"], "1");
    assert!(env.get("configmap", &state_name(&env.reference)).is_some(), "the state record is written again");

    // And then nothing is written any more.
    resync_writes_nothing(env);
}

/// `n` objects of `kind` in `ns`: ConfigMaps, Secrets, ServiceAccounts or Services.
fn objects(kind: &str, ns: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match kind {
            "ConfigMap" => format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:04}\n  namespace: {ns}\n  labels:\n    app: bench\ndata:\n  index: \"{i}\"\n  payload: \"{}\"\n", "x".repeat(200)),
            "Secret" => format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-{i:04}\n  namespace: {ns}\ntype: Opaque\ndata:\n  token: c2VjcmV0\n"),
            "ServiceAccount" => format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-{i:04}\n  namespace: {ns}\n"),
            "Service" => format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i:04}\n  namespace: {ns}\nspec:\n  selector:\n    app: svc-{i:04}\n  ports:\n  - name: http\n    port: 80\n    protocol: TCP\n"),
            other => panic!("no such test kind {other}"),
        })
        .collect()
}

/// The request-counting test (fake only: a real cluster does not count requests for us).
#[test]
fn first_apply_sends_one_request_per_object_and_unchanged_resync_lists_once_per_kind_and_namespace_fake_only() {
    let env = Env::new(Cluster::fake(), "resync_requests");
    let fake = env.cluster.fake_server().expect("fake");
    let (a, b, c) = (env.ns.clone(), env.extra_namespace("b"), env.extra_namespace("c"));
    let mut docs: Vec<String> = [&a, &b, &c].iter().map(|n| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {n}\n")).collect();
    // (resource, namespace, objects): 7 kinds-and-namespaces, 550 ConfigMaps in one.
    let layout = [("ConfigMap", &a, 550), ("Secret", &a, 50), ("ConfigMap", &b, 200), ("ServiceAccount", &b, 50), ("Service", &c, 100), ("ConfigMap", &c, 47)];
    for (kind, ns, n) in layout {
        docs.extend(objects(kind, ns, n));
    }
    assert_eq!(docs.len(), 1000);
    env.push(&docs, &[]);
    fake.reset_request_counts();
    fake.clear_requests();
    env.agent_ok(&[]);
    let first = env.last_attempt();
    assert_eq!(first["result"], "Applied", "{first:#}");
    assert_eq!(first["objects"].as_array().unwrap().iter().filter(|o| o["action"] == "created").count(), 1000);
    // The first apply at the physical limit: one request per object besides the LISTs
    // (the LISTs find nothing; the apply's 201 says each object was created), not a GET
    // and a PATCH each. The few others: the agent's state record and its Events.
    let counts = fake.request_counts();
    println!("requests of the first apply: {:?}", counts.rows());
    let besides_lists: u64 = counts.rows().iter().filter(|r| r.verb != Verb::List && r.verb != Verb::Watch).map(|r| r.count).sum();
    assert!(besides_lists <= 1000 + 10, "{besides_lists} requests besides LISTs for 1,000 new objects: {:#?}", counts.rows());
    let state = format!("/configmaps/{}", state_name(&env.reference));
    let read: Vec<String> = fake.requests().iter().filter(|r| r.method == "GET" && r.path.contains(&env.ns) && !r.path.ends_with(&state) && r.path.rsplit('/').next().is_some_and(|n| n.contains('-'))).map(|r| r.path.clone()).collect();
    assert!(read.is_empty(), "new objects read one by one: {:?}", &read[..read.len().min(5)]);

    resync_writes_nothing(&env);
    let counts = fake.request_counts();
    let requests = fake.requests();
    println!("requests of the unchanged resync: {:?}", counts.rows());
    let continued = |resource: &str| requests.iter().filter(|r| r.path.ends_with(&format!("/{resource}")) && r.query.contains("continue=")).count() as u64;
    // At most one LIST per (kind, namespace) holding the bundle's objects; pages after the
    // first (continue=) do not count against it.
    for (resource, pairs) in [("namespaces", 1), ("configmaps", 3), ("secrets", 1), ("serviceaccounts", 1), ("services", 1)] {
        let lists = counts.get(Verb::List, resource);
        assert!(lists - continued(resource) <= pairs, "{resource}: {lists} LISTs ({} continued) for {pairs} kind-and-namespace pair(s): {:#?}", continued(resource), counts.rows());
    }
    // The LISTs replace every per-object read: the only GETs are of the agent's own state
    // record (read for the floor and for a hold).
    let state = format!("/configmaps/{}", state_name(&env.reference));
    let others: Vec<&String> = requests.iter().filter(|r| r.method == "GET" && r.path.contains("/configmaps/") && !r.path.ends_with(&state)).map(|r| &r.path).collect();
    assert!(others.is_empty(), "ConfigMaps read one by one: {others:#?}");
    for resource in ["namespaces", "secrets", "serviceaccounts", "services"] {
        assert_eq!(counts.get(Verb::Get, resource), 0, "{resource}: {:#?}", counts.rows());
    }
}
