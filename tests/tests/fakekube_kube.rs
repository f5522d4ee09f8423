//! The FAKE API server driven by the real `kube` client: discovery, server-side apply
//! with managed fields, conflicts, force, removal of fields a manager stopped applying,
//! dryRun, label selectors, delete, CRDs that add their resource.

mod fakekube_support;

use drover_tests::fakekube::FakeApiServer;
use fakekube_support::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde_json::{json, Value};
use std::time::Duration;

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

/// Field management as a real API server does it, through the kube client: keyed lists
/// (a second applier's container, a conflict named with its item selector), a set
/// (another manager's finalizer survives drover's re-apply), an atomic map (an edit takes
/// it whole), a replace carrying managedFields (kept), a field the schema does not have
/// (refused), deletion held by a finalizer. On the fake and (ignored unless
/// DROVER_E2E_KUBECONFIG) a real cluster.
async fn server_field_management_scenario(env: drover_tests::fakekube::KubeEnv) {
    let client = env.client().await;
    let ns = env.unique_name("fk-fields");
    namespace(&client, &ns).await;
    let deps: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &kube::api::ApiResource::erase::<Deployment>(&()));
    let d = |containers: Value, extra: Value| {
        let mut v = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}}});
        if let (Some(v), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                if k == "metadata" {
                    for (mk, mv) in x.as_object().unwrap() {
                        v["metadata"].as_object_mut().unwrap().insert(mk.clone(), mv.clone());
                    }
                } else {
                    v.insert(k.clone(), x.clone());
                }
            }
        }
        v
    };
    let mine = d(json!([{"name": "main", "image": "nginx:1", "ports": [{"containerPort": 80}]}]), json!({"metadata": {"finalizers": ["example.com/drover"]}}));
    deps.patch("web", &ssa("drover"), &Patch::Apply(&mine)).await.expect("apply");

    // Another applier's own container: merged, no conflict.
    deps.patch("web", &ssa("mesh"), &Patch::Apply(d(json!([{"name": "proxy", "image": "envoy:1"}]), json!({})))).await.expect("no conflict on another item");
    // The same item's image with another value: a conflict named by its key.
    let err = deps.patch("web", &ssa("mesh"), &Patch::Apply(d(json!([{"name": "main", "image": "evil:1"}]), json!({})))).await.unwrap_err();
    let (code, _, msg) = api_err(err);
    assert_eq!(code, 409);
    assert_eq!(msg, "Apply failed with 1 conflict: conflict with \"drover\": .spec.template.spec.containers[name=\"main\"].image");

    // A controller adds its finalizer (an update): drover's re-apply keeps it (a set).
    let live = deps.get("web").await.unwrap();
    let mut edited = serde_json::to_value(&live).unwrap();
    edited["metadata"]["finalizers"] = json!(["example.com/drover", "example.com/controller"]);
    let pp = PostParams { field_manager: Some("a-controller".into()), ..Default::default() };
    deps.replace("web", &pp, &serde_json::from_value(edited).unwrap()).await.expect("update");
    let again = deps.patch("web", &ssa("drover"), &Patch::Apply(&mine)).await.unwrap();
    let fin = serde_json::to_value(&again).unwrap()["metadata"]["finalizers"].clone();
    assert_eq!(fin, json!(["example.com/drover", "example.com/controller"]), "both finalizers stay");
    let v = serde_json::to_value(&again).unwrap();
    let ports = &v["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    assert_eq!(ports["protocol"], "TCP", "defaulted");
    let entry = v["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "drover").unwrap().clone();
    assert!(
        entry["fieldsV1"].pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"main\"}/f:ports/k:{\"containerPort\":80,\"protocol\":\"TCP\"}").is_some(),
        "the port's key holds the defaulted protocol: {entry:#}"
    );

    // A replace that sets managedFields keeps them as sent.
    let mut replaced = v.clone();
    let mf = replaced["metadata"]["managedFields"].as_array().unwrap().iter().filter(|e| e["manager"] != "mesh").cloned().collect::<Vec<_>>();
    replaced["metadata"]["managedFields"] = json!(mf);
    let stored = deps.replace("web", &PostParams::default(), &serde_json::from_value(replaced).unwrap()).await.unwrap();
    let managers: Vec<String> = stored.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|e| e.manager).collect();
    assert!(!managers.contains(&"mesh".to_string()), "{managers:?}");

    // A field the schema does not have is refused by an apply.
    let (code, _, msg) = api_err(deps.patch("web", &ssa("drover"), &Patch::Apply(d(json!([{"name": "main", "image": "nginx:1"}]), json!({"spec": {"bogus": 1}})))).await.unwrap_err());
    assert!(code == 400 || code == 422 || code == 500, "{code} {msg}");
    assert!(msg.contains("bogus"), "{msg}");

    // Deleting an object with finalizers leaves it Terminating.
    deps.delete("web", &DeleteParams::default()).await.unwrap();
    let held = deps.get("web").await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    deps.patch("web", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    assert_eq!(api_err(deps.get("web").await.unwrap_err()).0, 404, "gone once the finalizers are");
    Api::<Namespace>::all(client).delete(&ns, &DeleteParams::background()).await.expect("delete namespace");
}

drover_tests::kube_scenario!(async server_field_management => server_field_management_scenario);
