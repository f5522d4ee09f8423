//! The FAKE API server's test hooks (error injection, rollout modes, status, request
//! log) in process and over HTTP from the `fake-apiserver` binary, plus validation (422),
//! JSON patch, watch, and Lease optimistic concurrency, through the real `kube` client.

mod fakekube_support;

use drover_tests::fakekube::{ErrorRule, FakeApiProcess, FakeApiServer, RolloutMode};
use fakekube_support::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use std::time::Duration;

#[tokio::test]
async fn hooks_inject_errors_set_status_and_log_requests() {
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "app");

    fake.inject(ErrorRule::new(
        "PATCH",
        "/api/v1/namespaces/*/configmaps/bad",
        422,
        "ConfigMap \"bad\" is invalid: data: Too long",
    ));
    let (code, reason, msg) = api_err(
        cms.patch("bad", &ssa("drover"), &Patch::Apply(cm("bad", json!({}))))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, reason.as_str(), msg.as_str()),
        (
            422,
            "Invalid",
            "ConfigMap \"bad\" is invalid: data: Too long"
        )
    );
    cms.patch("bad", &ssa("drover"), &Patch::Apply(cm("bad", json!({}))))
        .await
        .expect("rule used up after one request");
    fake.inject(
        ErrorRule::new(
            "GET",
            "/api/v1/namespaces/app/configmaps/bad",
            500,
            "etcd is sad",
        )
        .times(2),
    );
    assert_eq!(api_err(cms.get("bad").await.unwrap_err()).0, 500);
    assert_eq!(api_err(cms.get("bad").await.unwrap_err()).0, 500);
    cms.get("bad").await.unwrap();
    fake.inject(ErrorRule::delay(
        "GET",
        "/api/v1/namespaces/app/configmaps/bad",
        300,
    ));
    let t = std::time::Instant::now();
    cms.get("bad").await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        fake.count("GET", "/api/v1/namespaces/app/configmaps/bad"),
        4
    );
    assert_eq!(fake.requests().iter().filter(|r| r.injected).count(), 4);

    // Rollout modes and explicit status.
    fake.set_rollout_for("app", "stuck", RolloutMode::Stuck);
    deps.patch(
        "stuck",
        &ssa("drover"),
        &Patch::Apply(deployment("stuck", 2)),
    )
    .await
    .unwrap();
    let st = deps.get("stuck").await.unwrap().status.unwrap();
    assert_eq!(
        (
            st.observed_generation,
            st.updated_replicas,
            st.ready_replicas.unwrap_or(0)
        ),
        (Some(1), Some(2), 0)
    );
    fake.set_status(
        "apps/v1",
        "Deployment",
        Some("app"),
        "stuck",
        json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 1}),
    )
    .expect("set status");
    assert_eq!(
        deps.get("stuck")
            .await
            .unwrap()
            .status
            .unwrap()
            .ready_replicas,
        Some(1)
    );
    let mut unpullable = deployment("pull", 1);
    unpullable["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.invalid/app:1");
    deps.patch("pull", &ssa("drover"), &Patch::Apply(unpullable))
        .await
        .unwrap();
    let st = deps.get("pull").await.unwrap().status.unwrap();
    assert_eq!(
        (st.observed_generation, st.ready_replicas.unwrap_or(0)),
        (Some(1), 0),
        "a .invalid image never becomes ready"
    );
    fake.set_rollout_mode(RolloutMode::None);
    deps.patch(
        "plain",
        &ssa("drover"),
        &Patch::Apply(deployment("plain", 1)),
    )
    .await
    .unwrap();
    assert!(deps.get("plain").await.unwrap().status.is_none());
}

#[tokio::test]
async fn binary_serves_kube_and_http_hooks() {
    let fake = FakeApiProcess::start(&[]);
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    cms.patch(
        "c",
        &ssa("drover"),
        &Patch::Apply(cm("c", json!({"a": "1"}))),
    )
    .await
    .expect("apply via binary");
    let http = reqwest::Client::new();
    let rule = json!({"method": "GET", "path": "/api/v1/namespaces/app/configmaps/c", "code": 403, "message": "forbidden by test"});
    let r = http
        .post(format!("{}/fake/errors", fake.url()))
        .json(&rule)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(
        api_err(cms.get("c").await.unwrap_err()),
        (403, "Forbidden".into(), "forbidden by test".into())
    );
    let log: Vec<Value> = http
        .get(format!("{}/fake/requests", fake.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        log.iter().any(|r| r["method"] == "PATCH"
            && r["fieldManager"] == "drover"
            && r["contentType"] == "application/apply-patch+yaml"),
        "{log:?}"
    );

    // Rollout mode and status over HTTP.
    let r = http
        .put(format!("{}/fake/rollout/app/web", fake.url()))
        .json(&json!({"mode": "stuck"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "app");
    deps.patch("web", &ssa("drover"), &Patch::Apply(deployment("web", 3)))
        .await
        .unwrap();
    assert_eq!(
        deps.get("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .ready_replicas
            .unwrap_or(0),
        0
    );
    let st = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3});
    let r = http
        .put(format!(
            "{}/fake/status/apis/apps/v1/namespaces/app/deployments/web",
            fake.url()
        ))
        .json(&st)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(
        deps.get("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .ready_replicas,
        Some(3)
    );
}

#[tokio::test]
async fn invalid_names_and_labels_get_422_and_json_patch_works() {
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    let (code, reason, msg) = api_err(
        cms.patch(
            "Bad_Name",
            &ssa("drover"),
            &Patch::Apply(cm("Bad_Name", json!({}))),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(msg.starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{msg}");
    let bad_label = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l", "labels": {"x": "not valid!"}}});
    assert_eq!(
        api_err(
            cms.patch("l", &ssa("drover"), &Patch::Apply(bad_label))
                .await
                .unwrap_err()
        )
        .0,
        422
    );
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "app");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 70000}]}});
    let (code, _, msg) = api_err(
        svcs.patch("s", &ssa("drover"), &Patch::Apply(svc))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, msg.as_str()), (422, "Service \"s\" is invalid: spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive"));
    assert!(
        fake.object("v1", "ConfigMap", Some("app"), "l").is_none(),
        "a rejected object is not stored"
    );

    cms.patch(
        "j",
        &ssa("drover"),
        &Patch::Apply(cm("j", json!({"a": "1"}))),
    )
    .await
    .unwrap();
    let ops = json!([{"op": "replace", "path": "/data/a", "value": "2"}, {"op": "add", "path": "/data/b", "value": "3"}]);
    let r = reqwest::Client::new()
        .patch(format!("{}/api/v1/namespaces/app/configmaps/j", fake.url()))
        .header("content-type", "application/json-patch+json")
        .body(ops.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let data = cms.get("j").await.unwrap().data.unwrap();
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("2", "3"));
}

#[tokio::test]
async fn watch_streams_changes_and_drop_does_not_wait_for_it() {
    use futures::StreamExt;
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut events = cms
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    cms.patch(
        "w",
        &ssa("drover"),
        &Patch::Apply(cm("w", json!({"a": "1"}))),
    )
    .await
    .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("event in time")
        .expect("stream open")
        .expect("event");
    assert!(
        matches!(ev, kube::api::WatchEvent::Added(ref o) if o.metadata.name.as_deref() == Some("w")),
        "{ev:?}"
    );
    let t = std::time::Instant::now();
    drop(fake);
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "stopping took {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn lease_updates_use_optimistic_concurrency() {
    use k8s_openapi::api::coordination::v1::Lease;
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "drover-leader"}, "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15}})).unwrap();
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let mut a = created.clone();
    a.spec.as_mut().unwrap().holder_identity = Some("pod-a".into());
    a.spec.as_mut().unwrap().lease_transitions = Some(1);
    let renewed = leases
        .replace("drover-leader", &PostParams::default(), &a)
        .await
        .expect("holder renews");
    let mut b = created; // stale resourceVersion
    b.spec.as_mut().unwrap().holder_identity = Some("pod-b".into());
    let (code, reason, msg) = api_err(
        leases
            .replace("drover-leader", &PostParams::default(), &b)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(msg.starts_with("Operation cannot be fulfilled on leases.coordination.k8s.io \"drover-leader\": the object has been modified"), "{msg}");
    assert_eq!(
        leases
            .get("drover-leader")
            .await
            .unwrap()
            .metadata
            .resource_version,
        renewed.metadata.resource_version
    );
}

#[tokio::test]
async fn requests_are_counted_per_verb_and_resource() {
    use drover_tests::fakekube::{kubectl_ok, Verb};
    use kube::api::{DeleteParams, ListParams, WatchParams};
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    assert_eq!(fake.request_counts().get(Verb::Patch, "namespaces"), 1);
    fake.reset_request_counts();
    assert_eq!(fake.request_counts().total(), 0, "reset forgets every count");

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "app");
    let created: ConfigMap = serde_json::from_value(cm("a", json!({"k": "1"}))).unwrap();
    let created = cms.create(&PostParams::default(), &created).await.unwrap();
    cms.get("a").await.unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    cms.replace("a", &PostParams::default(), &created).await.unwrap();
    cms.patch("b", &ssa("drover"), &Patch::Apply(cm("b", json!({})))).await.unwrap();
    deps.patch("web", &ssa("drover"), &Patch::Apply(deployment("web", 1))).await.unwrap();
    deps.patch_status("web", &PatchParams::default(), &Patch::Merge(json!({"status": {"replicas": 1}})))
        .await
        .unwrap();
    drop(cms.watch(&WatchParams::default().timeout(1), "0").await.unwrap());
    fake.inject(ErrorRule::new("GET", "/api/v1/namespaces/app/configmaps/b", 500, "etcd is sad"));
    assert_eq!(api_err(cms.get("b").await.unwrap_err()).0, 500);
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    cms.delete_collection(&DeleteParams::default(), &ListParams::default()).await.unwrap();
    // kubectl's LIST counts; its discovery requests do not (they address no resource).
    kubectl_ok(fake.kubeconfig_path(), &["get", "configmaps", "-n", "app"], "");

    let counts = fake.request_counts();
    let expect = [
        (Verb::Create, "configmaps", 1),
        (Verb::Get, "configmaps", 2), // the injected 500 is a request too
        (Verb::List, "configmaps", 2),
        (Verb::Update, "configmaps", 1),
        (Verb::Patch, "configmaps", 1),
        (Verb::Watch, "configmaps", 1),
        (Verb::Delete, "configmaps", 1),
        (Verb::DeleteCollection, "configmaps", 1),
        (Verb::Patch, "deployments.apps", 1),
        (Verb::Patch, "deployments.apps/status", 1),
    ];
    for (verb, resource, n) in expect {
        assert_eq!(counts.get(verb, resource), n, "{verb:?} {resource}: {counts:?}");
    }
    assert_eq!(counts.total(), 12, "{counts:?}");
    assert_eq!(counts.verb(Verb::Patch), 3);
    assert_eq!(counts.resource("configmaps"), 10);

    // The same counts over HTTP, for the fake-apiserver binary.
    let http = reqwest::Client::new();
    let url = format!("{}/fake/request-counts", fake.url());
    let listed: Vec<Value> = http.get(&url).send().await.unwrap().json().await.unwrap();
    assert!(listed.contains(&json!({"verb": "DELETECOLLECTION", "resource": "configmaps", "count": 1})), "{listed:?}");
    assert_eq!(listed.iter().map(|e| e["count"].as_u64().unwrap()).sum::<u64>(), 12);
    assert!(http.delete(&url).send().await.unwrap().status().is_success());
    assert_eq!(fake.request_counts().total(), 0);
}
