//! The server the agent talks to decides the schema of its compare (docs/kubernetes.md,
//! "Which schema"):
//! - a kind the built-in table lacks (an aggregated API) takes its schema from the
//!   server's own `/openapi/v3/apis/GROUP/VERSION`: a keyed list there is keyed in the
//!   compare, so another manager's field in one item costs no write; the document's
//!   `…/status` path makes `status` a subresource (a `status` in the bundle is not
//!   applied and costs no write); and `status` says the kind's schema came from the
//!   server's OpenAPI;
//! - the table answers as the server's Kubernetes minor (`/version`): a field newer than
//!   the server is one its schema does not declare, so the compare never vouches for the
//!   object and the server's refusal (`field not declared in schema`, naming the field) is
//!   the outcome on every resync, never a silent drop; on a server that has the field it is
//!   stored and an unchanged resync writes nothing.
//!
//! FAKE API server only: a real cluster is one version and has no aggregated API a test
//! can register; the fake plays a minor (`FakeOptions::minor`) and serves an aggregated
//! API with its OpenAPI document (`add_aggregated_api`), as a real aggregated server
//! serves its own.

mod kube_support;

use drover_tests::fakekube::resources::ResourceInfo;
use drover_tests::fakekube::{FakeApiServer, FakeOptions};
use kube_support::{Cluster, Env};
use serde_json::{json, Value};

fn env_at(minor: u8, name: &str) -> Env {
    let fake = FakeApiServer::start_with(FakeOptions { minor, ..FakeOptions::default() }).expect("fake API server");
    Env::new(Cluster::Fake(fake), name)
}

/// Writes the last agent run sent to objects named `name`.
fn writes_to(env: &Env, name: &str) -> usize {
    let reqs = env.cluster.fake_server().unwrap().requests();
    reqs.iter().filter(|r| r.method != "GET" && r.path.ends_with(&format!("/{name}"))).count()
}

fn gauge_openapi(group: &str) -> Value {
    let r = |n: &str| json!({"$ref": format!("#/components/schemas/{n}")});
    json!({"components": {"schemas": {
        "com.example.metrics.v1.Gauge": {"type": "object", "x-kubernetes-group-version-kind": [{"group": group, "version": "v1", "kind": "Gauge"}],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"allOf": [r("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")]},
                "spec": r("com.example.metrics.v1.GaugeSpec"), "status": r("com.example.metrics.v1.GaugeStatus")}},
        "com.example.metrics.v1.GaugeStatus": {"type": "object", "properties": {"reading": {"type": "string"}}},
        "com.example.metrics.v1.GaugeSpec": {"type": "object", "properties": {
            "interval": {"type": "string"},
            "targets": {"type": "array", "items": r("com.example.metrics.v1.Target"), "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}}},
        "com.example.metrics.v1.Target": {"type": "object", "properties": {"name": {"type": "string"}, "weight": {"type": "integer"}, "note": {"type": "string"}}},
    }}})
}

#[test]
fn a_kind_the_table_lacks_takes_the_servers_openapi() {
    let env = env_at(34, "aggregated");
    let group = format!("metrics.{}", env.group);
    let res = ResourceInfo {
        group: group.clone(),
        version: "v1".into(),
        kind: "Gauge".into(),
        plural: "gauges".into(),
        singular: "gauge".into(),
        namespaced: true,
        short_names: vec![],
        status_subresource: true,
        custom: false,
    };
    env.cluster.fake_server().unwrap().add_aggregated_api(res, gauge_openapi(&group));
    let gauge = format!(
        "apiVersion: {group}/v1\nkind: Gauge\nmetadata:\n  name: load\n  namespace: {}\nspec:\n  interval: 30s\n  targets:\n  - {{name: a, weight: 1}}\n  - {{name: b, weight: 2}}\nstatus:\n  reading: exported\n",
        env.ns
    );
    env.push(&[env.namespace(), gauge], &[]);
    env.agent_ok(&[]);
    assert_eq!(Env::action(&env.last_attempt(), "Gauge", "load").0, "created");
    // `status` is a subresource (the document's `…/status` path): the apply leaves it out,
    // as the server does, and the resync below has nothing to write for it.
    assert!(env.get(&format!("gauges.{group}"), "load").unwrap().get("status").is_none());

    // Another manager notes something on target a (an update: kubectl edit's way).
    let resource = format!("gauges.{group}");
    let mut live = env.get(&resource, "load").expect("the gauge");
    live["spec"]["targets"][0]["note"] = json!("checked by hand");
    let out = env.kubectl(&["replace", "--field-manager", "kubectl-edit", "-f", "-", "-o", "json"], &live.to_string());
    assert_eq!(out.code, 0, "kubectl replace: {}", out.stderr);

    let fake = env.cluster.fake_server().unwrap();
    fake.clear_requests();
    env.agent_ok(&[]);
    assert_eq!(writes_to(&env, "load"), 0, "the note is the other manager's field of a keyed item: nothing to write ({:?})", Env::action(&env.last_attempt(), "Gauge", "load"));
    assert_eq!(env.get(&resource, "load").unwrap()["spec"]["targets"][0]["note"], "checked by hand");

    let schemas = env.status()["schemas"].clone();
    let source = |kind: &str| schemas.as_array().unwrap().iter().find(|s| s["kind"] == kind).unwrap_or_else(|| panic!("{kind} in {schemas:#}")).clone();
    assert_eq!(source("Gauge")["source"], "server-openapi", "{schemas:#}");
    assert_eq!(source("Namespace"), json!({"apiVersion": "v1", "kind": "Namespace", "source": "builtin", "minor": 34}));
    let text = drover_tests::run("drover-agent", &["status", "--state-dir", env.path("state").to_str().unwrap(), "--endpoint", "http://127.0.0.1:1"], &[]);
    assert!(text.stdout.contains(&format!("the server's OpenAPI: {group}/v1/Gauge")), "{}", text.stdout);
}

/// `hostnameOverride` (PodSpec) is served from 1.34 on.
fn deployment(env: &Env) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {}\nspec:\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      hostnameOverride: web-1\n      containers:\n      - {{name: web, image: nginx:1.27}}\n",
        env.ns
    )
}

#[test]
fn a_field_newer_than_the_server_is_refused_on_every_resync_and_kept_where_served() {
    for minor in [30, 34] {
        let env = env_at(minor, &format!("minor{minor}"));
        env.push(&[env.namespace(), deployment(&env)], &[]);
        for pass in ["first apply", "resync"] {
            env.cluster.fake_server().unwrap().clear_requests();
            let out = env.agent(&[]);
            let (action, message) = Env::action(&env.last_attempt(), "Deployment", "web");
            if minor < 34 {
                assert_ne!(out.code, 0, "1.{minor} {pass}: the apply must fail");
                assert_eq!(action, "failed", "1.{minor} {pass}");
                assert!(message.contains("hostnameOverride") && message.contains("not declared"), "1.{minor} {pass}: the server's reason names the field: {message}");
            } else {
                assert_eq!(out.code, 0, "1.{minor} {pass}: {}", out.stderr);
                let d = env.get("deployment", "web").expect("the deployment");
                assert_eq!(d["spec"]["template"]["spec"]["hostnameOverride"], "web-1", "1.{minor}");
                if pass == "resync" {
                    assert_eq!(writes_to(&env, "web"), 0, "1.{minor}: an unchanged resync writes nothing ({action})");
                }
            }
        }
        let schemas = env.status()["schemas"].clone();
        assert!(schemas.as_array().unwrap().iter().any(|s| s["kind"] == "Deployment" && s["minor"] == minor), "1.{minor}: {schemas:#}");
    }
}
