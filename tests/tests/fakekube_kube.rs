//! The FAKE API server (in process and as the `fake-apiserver` binary) driven by the real
//! `kube` client: discovery, server-side apply with managed fields, conflicts, force,
//! removal of fields a manager stopped applying, dryRun, CRDs, selectors, delete, watch,
//! and the test hooks.

use drover_tests::fakekube::{ErrorRule, FakeApiProcess, FakeApiServer, RolloutMode};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, Scope};
use kube::{Client, Config};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

async fn client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(cfg).expect("kube client")
}

fn ssa(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

fn api_err(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    api.patch(
        name,
        &ssa("drover").force(),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})),
    )
    .await
    .expect("apply namespace");
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "web"}}, "data": data})
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}
    })
}

fn managed(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn discovery_lists_builtin_kinds_with_scope() {
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    for discovery in [
        Discovery::new(client.clone())
            .run()
            .await
            .expect("discovery"),
        Discovery::new(client.clone())
            .run_aggregated()
            .await
            .expect("aggregated discovery"),
    ] {
        let find = |g: &str, v: &str, k: &str| {
            discovery
                .resolve_gvk(&kube::api::GroupVersionKind::gvk(g, v, k))
                .unwrap_or_else(|| panic!("{g}/{v} {k} not discovered"))
        };
        let (cm, caps) = find("", "v1", "ConfigMap");
        assert_eq!(cm.plural, "configmaps");
        assert_eq!(caps.scope, Scope::Namespaced);
        assert_eq!(find("", "v1", "Namespace").1.scope, Scope::Cluster);
        assert_eq!(find("apps", "v1", "Deployment").0.plural, "deployments");
        assert_eq!(
            find("rbac.authorization.k8s.io", "v1", "ClusterRole")
                .1
                .scope,
            Scope::Cluster
        );
        assert_eq!(
            find("coordination.k8s.io", "v1", "Lease").1.scope,
            Scope::Namespaced
        );
        find("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
        find(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        );
        assert!(caps.supports_operation("patch"));
    }
    let v = client.apiserver_version().await.expect("version");
    assert_eq!(v.major, "1");
}

#[tokio::test]
async fn apply_is_idempotent_and_records_managed_fields() {
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "app");

    let first = cms
        .patch(
            "settings",
            &ssa("drover").force(),
            &Patch::Apply(cm("settings", json!({"a": "1"}))),
        )
        .await
        .expect("apply cm");
    let first = serde_json::to_value(&first).unwrap();
    let mf = managed(&first);
    assert_eq!(mf.len(), 1, "{mf:?}");
    assert_eq!(mf[0]["manager"], "drover");
    assert_eq!(mf[0]["operation"], "Apply");
    assert_eq!(mf[0]["apiVersion"], "v1");
    assert_eq!(mf[0]["fieldsType"], "FieldsV1");
    assert_eq!(
        mf[0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );
    assert!(first["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| u.len() == 36));
    assert!(first["metadata"]["creationTimestamp"].is_string());

    let again = serde_json::to_value(
        cms.patch(
            "settings",
            &ssa("drover").force(),
            &Patch::Apply(cm("settings", json!({"a": "1"}))),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        again["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "a no-op apply must not bump resourceVersion"
    );
    assert_eq!(
        managed(&again),
        mf,
        "managedFields stay stable on a no-op apply"
    );

    let d1 = deps
        .patch(
            "web",
            &ssa("drover").force(),
            &Patch::Apply(deployment("web", 2)),
        )
        .await
        .expect("apply deployment");
    assert_eq!(d1.metadata.generation, Some(1));
    let rv = fake.resource_version();
    let d2 = deps
        .patch(
            "web",
            &ssa("drover").force(),
            &Patch::Apply(deployment("web", 2)),
        )
        .await
        .unwrap();
    assert_eq!(d2.metadata.generation, Some(1));
    assert_eq!(
        fake.resource_version(),
        rv,
        "re-applying an unchanged Deployment writes nothing"
    );
    let live = deps.get("web").await.unwrap();
    let st = live.status.expect("auto rollout status");
    assert_eq!(
        (
            st.observed_generation,
            st.ready_replicas,
            st.updated_replicas,
            st.available_replicas
        ),
        (Some(1), Some(2), Some(2), Some(2))
    );
    let d3 = deps
        .patch(
            "web",
            &ssa("drover").force(),
            &Patch::Apply(deployment("web", 3)),
        )
        .await
        .unwrap();
    assert_eq!(
        d3.metadata.generation,
        Some(2),
        "a spec change bumps generation"
    );
}

#[tokio::test]
async fn conflicts_force_and_removal_of_dropped_fields() {
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "app");
    cms.patch(
        "c",
        &ssa("drover"),
        &Patch::Apply(cm("c", json!({"a": "1", "b": "2", "shared": "s"}))),
    )
    .await
    .unwrap();

    // Another applier wants a different value: 409 with the real message, unless forced.
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9"}});
    let (code, reason, msg) = api_err(
        cms.patch("c", &ssa("other"), &Patch::Apply(other.clone()))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        msg,
        "Apply failed with 1 conflict: conflict with \"drover\": .data.a"
    );
    let forced = serde_json::to_value(
        cms.patch("c", &ssa("other").force(), &Patch::Apply(other))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(forced["data"]["a"], "9");
    let owners: Vec<(String, Value)> = managed(&forced)
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["fieldsV1"]["f:data"].clone(),
            )
        })
        .collect();
    assert!(
        owners.contains(&("other".into(), json!({"f:a": {}}))),
        "{owners:?}"
    );
    assert!(
        owners
            .iter()
            .any(|(m, d)| m == "drover" && d.get("f:a").is_none()),
        "force moved .data.a away from drover: {owners:?}"
    );

    // Co-own `shared` with the same value, then drover stops applying b and shared:
    // b is removed, shared stays because "other" still owns it.
    cms.patch("c", &ssa("other"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9", "shared": "s"}}))).await.unwrap();
    let after = cms.patch("c", &ssa("drover"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}))).await.unwrap();
    let data = after.data.unwrap_or_default();
    assert!(
        !data.contains_key("b"),
        "b was dropped by its only manager: {data:?}"
    );
    assert_eq!(data.get("shared").map(String::as_str), Some("s"));
    assert_eq!(data.get("a").map(String::as_str), Some("9"));

    // A merge patch by another client takes .spec.replicas; drover's apply conflicts
    // without force and takes it back with force.
    deps.patch(
        "web",
        &ssa("drover").force(),
        &Patch::Apply(deployment("web", 2)),
    )
    .await
    .unwrap();
    deps.patch(
        "web",
        &PatchParams {
            field_manager: Some("kubectl-patch".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    let (code, _, msg) = api_err(
        deps.patch("web", &ssa("drover"), &Patch::Apply(deployment("web", 2)))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 409);
    assert!(
        msg.starts_with(
            "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using apps/v1 at "
        ) && msg.ends_with(": .spec.replicas"),
        "{msg}"
    );
    let fixed = deps
        .patch(
            "web",
            &ssa("drover").force(),
            &Patch::Apply(deployment("web", 2)),
        )
        .await
        .unwrap();
    assert_eq!(fixed.spec.replicas, Some(2));
    assert_eq!(fixed.metadata.generation, Some(3));
}

#[tokio::test]
async fn dry_run_persists_nothing_and_selectors_and_delete_work() {
    let fake = FakeApiServer::start();
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    let mut dry = ssa("drover");
    dry.dry_run = true;
    let would = cms
        .patch("ghost", &dry, &Patch::Apply(cm("ghost", json!({"k": "v"}))))
        .await
        .expect("dry-run apply");
    assert_eq!(would.data.unwrap()["k"], "v");
    assert_eq!(
        api_err(cms.get("ghost").await.unwrap_err()).0,
        404,
        "dryRun=All created nothing"
    );

    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "fe"})),
        ("b", json!({"app": "web", "tier": "be"})),
        ("c", json!({"app": "db"})),
    ] {
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let (code, reason, msg) = api_err(
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (code, reason.as_str(), msg.as_str()),
        (409, "AlreadyExists", "configmaps \"a\" already exists")
    );
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
        ),
        ["a", "b"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("app!=web"))
                .await
                .unwrap()
        ),
        ["c"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("tier"))
                .await
                .unwrap()
        ),
        ["a", "b"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("!tier"))
                .await
                .unwrap()
        ),
        ["c"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("tier in (be,x)"))
                .await
                .unwrap()
        ),
        ["b"]
    );

    let mut stale = DeleteParams::background();
    stale.preconditions = Some(kube::api::Preconditions {
        uid: Some("not-the-uid".into()),
        resource_version: None,
    });
    let (code, _, msg) = api_err(cms.delete("a", &stale).await.unwrap_err());
    assert!(
        code == 409 && msg.contains("Precondition failed: UID in precondition: not-the-uid"),
        "{msg}"
    );
    cms.delete("a", &DeleteParams::background())
        .await
        .expect("delete");
    assert_eq!(
        api_err(cms.get("a").await.unwrap_err()),
        (404, "NotFound".into(), "configmaps \"a\" not found".into())
    );
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.delete("app", &DeleteParams::default())
        .await
        .expect("delete namespace");
    assert!(
        fake.object("v1", "ConfigMap", Some("app"), "b").is_none(),
        "namespace deletion removes its objects"
    );
    let (code, _, msg) = api_err(
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "z"}})).unwrap(),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((code, msg.as_str()), (404, "namespaces \"app\" not found"));
}

fn crd(delay_versions: &[&str]) -> Value {
    let versions: Vec<Value> = delay_versions.iter().enumerate().map(|(i, v)| json!({"name": v, "served": true, "storage": i == 0, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}, "subresources": {"status": {}}})).collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]}, "versions": versions}
    })
}

#[tokio::test]
async fn crd_adds_its_resource_and_custom_resources_apply() {
    let fake = FakeApiServer::start();
    fake.set_crd_establish_delay(Duration::from_millis(300));
    let client = client(fake.kubeconfig_path()).await;
    namespace(&client, "app").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "widgets.example.com",
        &ssa("drover").force(),
        &Patch::Apply(crd(&["v1", "v1beta1"])),
    )
    .await
    .expect("apply crd");
    let gvk = kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget");
    assert!(
        Discovery::new(client.clone())
            .run()
            .await
            .unwrap()
            .resolve_gvk(&gvk)
            .is_none(),
        "not served before Established"
    );

    // Wait through a watch, as agents do.
    let est = kube::runtime::wait::await_condition(
        crds.clone(),
        "widgets.example.com",
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(5), est)
        .await
        .expect("established in time")
        .expect("watch");
    let live = crds.get("widgets.example.com").await.unwrap();
    let conds = live.status.unwrap().conditions.unwrap();
    assert!(conds
        .iter()
        .any(|c| c.type_ == "NamesAccepted" && c.status == "True"));

    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .resolve_gvk(&gvk)
        .expect("Widget discovered after Established");
    assert_eq!(
        (ar.plural.as_str(), caps.scope.clone()),
        ("widgets", Scope::Namespaced)
    );
    assert!(
        discovery
            .resolve_gvk(&kube::api::GroupVersionKind::gvk(
                "example.com",
                "v1beta1",
                "Widget"
            ))
            .is_some(),
        "every served version"
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "app", &ar);
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}});
    let created = widgets
        .patch("w1", &ssa("drover").force(), &Patch::Apply(w))
        .await
        .expect("apply CR");
    assert_eq!(created.data["spec"]["size"], 3);
    assert_eq!(
        widgets.get("w1").await.unwrap().metadata.generation,
        Some(1)
    );

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        Discovery::new(client.clone())
            .run()
            .await
            .unwrap()
            .resolve_gvk(&gvk)
            .is_none(),
        "deleting the CRD removes the resource"
    );
    assert_eq!(api_err(widgets.get("w1").await.unwrap_err()).0, 404);
}

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

/// Runs on the fake and (ignored unless DROVER_E2E_KUBECONFIG + --include-ignored) on a
/// real cluster: SSA create, idempotent re-apply, kubectl sees it, namespace delete.
async fn apply_roundtrip_scenario(env: drover_tests::fakekube::KubeEnv) {
    let client = env.client().await;
    let ns = env.unique_name("fk-roundtrip");
    namespace(&client, &ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rt", "namespace": ns, "labels": {"app": "rt"}}, "data": {"k": "v"}});
    let first = cms
        .patch("rt", &ssa("drover-test"), &Patch::Apply(&body))
        .await
        .expect("apply");
    let again = cms
        .patch("rt", &ssa("drover-test"), &Patch::Apply(&body))
        .await
        .expect("re-apply");
    assert_eq!(
        first.metadata.resource_version,
        again.metadata.resource_version
    );
    let out = drover_tests::fakekube::kubectl_ok(
        env.kubeconfig_path(),
        &["get", "configmaps", "-n", &ns, "-l", "app=rt", "-o", "name"],
        "",
    );
    assert_eq!(out.stdout.trim(), "configmap/rt");
    Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::background())
        .await
        .expect("delete namespace");
}

drover_tests::kube_scenario!(async apply_roundtrip => apply_roundtrip_scenario);

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
