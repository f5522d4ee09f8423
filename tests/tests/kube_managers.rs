//! Other field managers, as a real API server treats them (issue 24): what kubectl and a
//! second applier do to drover's objects, and what the agent does on its next resync.
//! Real binaries, real registry, kubectl as the other client; the FAKE API server or a
//! real cluster with DROVER_E2E_KUBECONFIG.
//!
//! - a second manager server-side-applies only its own container: no conflict (containers
//!   are keyed by name), and it survives drover's resync, which writes nothing;
//! - `kubectl set env` adds a variable: not drover's field, so `--no-force` reports no
//!   conflict and the resync writes nothing (the variable stays);
//! - an unchanged bundle whose port has no `protocol` and whose CPU is `1000m` resyncs
//!   with 0 writes (the server defaulted one and canonicalised the other);
//! - a Service selector widened by hand is corrected (an atomic map: the edit took it);
//! - an object held by a finalizer and deleted with `--wait=false` stays, Terminating; the
//!   agent says so (and for how long) and recreates it once it is gone;
//! - a Terminating namespace refuses new objects with the server's reason.

mod kube_support;

use kube_support::Env;
use serde_json::Value;

scenarios!(other_managers_keep_their_fields_and_resync_writes_nothing, widened_service_selector_is_corrected, terminating_objects_are_reported_and_recreated);

fn web(env: &Env) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: main\n        image: nginx:1.27\n        ports:\n        - containerPort: 8080\n          name: http\n        resources:\n          limits:\n            cpu: 1000m\n            memory: 1Gi\n",
        ns = env.ns
    )
}

fn writes(attempt: &Value) -> u64 {
    ["create", "update", "patch", "delete"].iter().map(|v| attempt["writes"][v].as_u64().unwrap_or(0)).sum()
}

fn containers(env: &Env) -> Vec<Value> {
    env.get("deployment", "web").unwrap()["spec"]["template"]["spec"]["containers"].as_array().unwrap().clone()
}

fn other_managers_keep_their_fields_and_resync_writes_nothing(env: &Env) {
    env.push(&[env.namespace(), web(env)], &[]);
    env.agent_ok(&[]);
    let d = env.get("deployment", "web").unwrap();
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1", "stored canonical: {d:#}");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"], "TCP", "defaulted: {d:#}");

    // Unchanged bundle, defaulted protocol, canonicalised quantity: nothing to write.
    env.agent_ok(&[]);
    let a = env.last_attempt();
    assert_eq!((a["resync"].as_bool(), writes(&a)), (Some(true), 0), "{a:#}");

    // A second manager applies only its own container.
    let sidecar = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {}\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: proxy\n        image: envoyproxy/envoy:v1.30\n",
        env.ns
    );
    let out = env.kubectl(&["apply", "--server-side", "--field-manager", "mesh-injector", "-f", "-"], &sidecar);
    assert_eq!(out.code, 0, "no conflict: containers are keyed by name, the manager owns only its own\n{}", out.stderr);
    let names: Vec<String> = containers(env).iter().map(|c| c["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["main", "proxy"]);
    env.agent_ok(&[]);
    let a = env.last_attempt();
    assert_eq!(writes(&a), 0, "the other manager's container is not drover's business: {a:#}");
    assert!(containers(env).iter().any(|c| c["name"] == "proxy"), "it survives the resync");

    // kubectl set env: a variable drover does not own.
    env.kubectl_ok(&["set", "env", "deployment/web", "-n", &env.ns, "-c", "main", "DEBUG=1"]);
    let out = env.agent(&["--no-force"]);
    assert_eq!(out.code, 0, "--no-force: no conflict, nothing of drover's was touched\n{}", out.stderr);
    let a = env.last_attempt();
    assert_eq!((a["result"].as_str(), writes(&a)), (Some("Applied"), 0), "{a:#}");
    let main = containers(env).into_iter().find(|c| c["name"] == "main").unwrap();
    assert!(main["env"].as_array().unwrap().iter().any(|e| e["name"] == "DEBUG"), "kubectl's variable stays: {main:#}");
}

fn widened_service_selector_is_corrected(env: &Env) {
    env.push(&[env.namespace(), env.service("web", 80)], &[]);
    env.agent_ok(&[]);
    env.kubectl_ok(&["patch", "service", "web", "-n", &env.ns, "--type", "merge", "-p", r#"{"spec":{"selector":{"tier":"canary"}}}"#]);
    assert_eq!(env.get("service", "web").unwrap()["spec"]["selector"]["tier"], "canary");
    env.agent_ok(&[]);
    let a = env.last_attempt();
    assert_eq!(Env::action(&a, "Service", "web").0, "configured", "{a:#}");
    assert_eq!(a["drift"], 1, "{a:#}");
    assert_eq!(env.get("service", "web").unwrap()["spec"]["selector"], serde_json::json!({"app": "web"}), "the selector is one value: drover's again");
}

fn held(env: &Env, name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {}\n  finalizers:\n  - example.com/keep\ndata:\n  value: \"1\"\n", env.ns)
}

fn terminating_objects_are_reported_and_recreated(env: &Env) {
    env.push(&[env.namespace(), held(env, "kept"), env.configmap("plain", "1", &[])], &[]);
    env.agent_ok(&[]);
    env.kubectl_ok(&["delete", "configmap", "kept", "-n", &env.ns, "--wait=false"]);
    let cm = env.get("configmap", "kept").expect("held by its finalizer, the object is still there");
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "{cm:#}");

    env.agent_ok(&[]);
    let a = env.last_attempt();
    let (action, message) = Env::action(&a, "ConfigMap", "kept");
    assert_eq!(action, "terminating", "{a:#}");
    assert!(message.contains("Terminating for") && message.contains("example.com/keep"), "{message}");
    assert_eq!(a["health"], "Progressing", "{a:#}");
    let status = env.status();
    assert_eq!(status["health"], "Progressing", "{status:#}");
    assert!(status["lastAttempt"]["reason"].as_str().unwrap().contains("Terminating"), "{status:#}");

    // The finalizer lets go: the object goes, and the next resync brings it back.
    env.kubectl_ok(&["patch", "configmap", "kept", "-n", &env.ns, "--type", "merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    assert!(env.get("configmap", "kept").is_none(), "gone once the last finalizer is removed");
    env.agent_ok(&[]);
    let a = env.last_attempt();
    assert_eq!(Env::action(&a, "ConfigMap", "kept").0, "created", "{a:#}");
    assert_eq!(a["health"], "Healthy", "{a:#}");

    // A namespace being deleted (held by the finalizer of what is in it) refuses new objects.
    env.kubectl_ok(&["delete", "namespace", &env.ns, "--wait=false"]);
    let ns = env.kubectl_ok(&["get", "namespace", &env.ns, "-o", "json"]).json();
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns:#}");
    env.push(&[held(env, "kept"), env.configmap("newcomer", "1", &[])], &[]);
    let out = env.agent(&[]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    let a = env.last_attempt();
    let (action, message) = Env::action(&a, "ConfigMap", "newcomer");
    assert_eq!(action, "failed", "{a:#}");
    assert!(message.contains("being terminated"), "the server's reason: {message}");
    env.kubectl_ok(&["patch", "configmap", "kept", "-n", &env.ns, "--type", "merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
}
