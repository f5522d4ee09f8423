//! Object names are checked per kind, as the real API server checks them (its
//! `ValidateNameFunc` per resource): RBAC names are path segments (`system:aggregate-to-view`,
//! `telemetry:reader`), Namespaces DNS-1123 labels, Services DNS-1035 labels, CRDs
//! `<plural>.<group>`, CronJobs at most 52 characters, most others DNS-1123 subdomains.
//! Valid RBAC names go through kubectl and through the real `drover-agent`; invalid names
//! get the real 422 and nothing is stored. Every scenario also runs against a real cluster
//! (`real_cluster` variants, DROVER_E2E_KUBECONFIG).

mod kube_support;

use drover_tests::fakekube::{kubectl, KubeEnv};
use drover_tests::kube_scenario;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube_support::Env;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Deletes cluster-scoped objects a scenario made on a REAL cluster (the fake forgets
/// everything when it stops).
struct Cleanup {
    kubeconfig: Option<PathBuf>,
    objects: Vec<Vec<String>>,
}

impl Cleanup {
    fn new(real: bool, kubeconfig: &Path) -> Cleanup {
        Cleanup { kubeconfig: real.then(|| kubeconfig.to_path_buf()), objects: Vec::new() }
    }

    fn add(&mut self, resource: &str, name: &str) {
        self.objects.push(vec![resource.into(), name.into()]);
    }

    fn add_in(&mut self, resource: &str, name: &str, namespace: &str) {
        self.objects.push(vec![resource.into(), name.into(), "-n".into(), namespace.into()]);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(k) = &self.kubeconfig {
            for object in &self.objects {
                let mut args = vec!["delete", "--ignore-not-found", "--wait=false"];
                args.extend(object.iter().map(String::as_str));
                let _ = kubectl(k, &args, "");
            }
        }
    }
}

fn ok(out: drover_tests::Out, what: &str) -> drover_tests::Out {
    assert_eq!(out.code, 0, "{what} failed:\nstdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    out
}

// ---------------------------------------------------------------------------------------
// (a) kubectl applies RBAC objects named like the built-in `system:*` roles.

kube_scenario!(kubectl_applies_rbac_names_with_colons => kubectl_rbac_names);

fn kubectl_rbac_names(env: KubeEnv) {
    let k = |args: &[&str], stdin: &str| kubectl(env.kubeconfig_path(), args, stdin);
    // Unique on a shared real cluster, shaped like `system:aggregate-to-view`.
    let tag = env.unique_name("e2e");
    let role = format!("system:aggregate-to-view:drover-{tag}");
    let binding = format!("system:drover-{tag}:viewers");
    let ns_role = format!("team:reader-{tag}");
    let mut cleanup = Cleanup::new(!env.is_fake(), env.kubeconfig_path());
    cleanup.add("clusterrole", &role);
    cleanup.add("clusterrolebinding", &binding);
    cleanup.add_in("role", &ns_role, "default");
    let manifest = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: \"{role}\"\nrules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\"]\n  verbs: [\"get\", \"list\", \"watch\"]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: \"{binding}\"\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: \"{role}\"\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: Group\n  name: \"drover:viewers\"\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: \"{ns_role}\"\n  namespace: default\nrules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\"]\n  verbs: [\"get\"]\n"
    );
    let out = ok(k(&["apply", "--server-side", "--field-manager", "drover-e2e", "-f", "-"], &manifest), "kubectl apply --server-side");
    for line in [
        format!("clusterrole.rbac.authorization.k8s.io/{role} serverside-applied"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{binding} serverside-applied"),
        format!("role.rbac.authorization.k8s.io/{ns_role} serverside-applied"),
    ] {
        assert!(out.stdout.contains(&line), "missing {line:?} in:\n{}", out.stdout);
    }
    let got = ok(k(&["get", "clusterrole", &role, "-o", "json"], ""), "kubectl get clusterrole").json();
    assert_eq!(got["metadata"]["name"], role.as_str());
    assert_eq!(got["rules"][0]["verbs"], json!(["get", "list", "watch"]));
    let got = ok(k(&["get", "clusterrolebinding", &binding, "-o", "jsonpath={.roleRef.name}"], ""), "kubectl get clusterrolebinding");
    assert_eq!(got.stdout, role);
    let got = ok(k(&["get", "role", &ns_role, "-n", "default", "-o", "jsonpath={.metadata.name}"], ""), "kubectl get role");
    assert_eq!(got.stdout, ns_role);
    // Deleting by such a name works too (the name is a path segment of the URL).
    ok(k(&["delete", "clusterrolebinding", &binding], ""), "kubectl delete clusterrolebinding");
    let gone = k(&["get", "clusterrolebinding", &binding], "");
    assert!(gone.code != 0 && gone.stderr.contains("not found"), "{}", gone.stderr);
}

// ---------------------------------------------------------------------------------------
// Invalid names: 422 Invalid with the real server's message and causes; nothing stored.

kube_scenario!(async invalid_names_get_the_real_422 => invalid_names);

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Applies `obj` (server-side apply, like the agent) and returns (code, reason, message,
/// causes) of the refusal; panics when it is accepted.
async fn refused(client: &kube::Client, gvk: (&str, &str, &str, &str), ns: Option<&str>, obj: Value) -> (u16, String, String, Value) {
    let (group, version, kind, plural) = gvk;
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let err = api.patch(&name, &PatchParams::apply("drover-e2e").force(), &Patch::Apply(&obj)).await.expect_err("the server must refuse this name");
    let kube::Error::Api(status) = err else { panic!("expected an API error, got {err:?}") };
    let not_stored = api.get_opt(&name).await.expect("GET after the refusal");
    assert!(not_stored.is_none(), "{kind} {name:?} was refused but stored");
    let raw = serde_json::to_value(&status).unwrap();
    (status.code, status.reason.clone(), status.message.clone(), raw["details"]["causes"].clone())
}

async fn invalid_names(env: KubeEnv) {
    let client = env.client().await;
    let exact = env.is_fake();
    let mut cleanup = Cleanup::new(!env.is_fake(), env.kubeconfig_path());

    // A Namespace name is a DNS-1123 label: no dots.
    let (code, reason, msg, causes) =
        refused(&client, ("", "v1", "Namespace", "namespaces"), None, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}})).await;
    cleanup.add("namespace", "team.a");
    assert_eq!((code, reason.as_str()), (422, "Invalid"), "{msg}");
    assert!(msg.starts_with("Namespace \"team.a\" is invalid: metadata.name: Invalid value: \"team.a\": "), "{msg}");
    if exact {
        // Current Kubernetes (apimachinery IsDNS1123Label); older servers print the regex.
        assert_eq!(msg, "Namespace \"team.a\" is invalid: metadata.name: Invalid value: \"team.a\": must not contain dots");
    }
    assert_eq!(causes[0]["field"], "metadata.name", "{causes}");
    assert_eq!(causes[0]["reason"], "FieldValueInvalid", "{causes}");

    // A ConfigMap name is a DNS-1123 subdomain: no colon (RBAC names may have one).
    let (code, _, msg, _) = refused(
        &client,
        ("", "v1", "ConfigMap", "configmaps"),
        Some("default"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app:settings", "namespace": "default"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(msg, format!("ConfigMap \"app:settings\" is invalid: metadata.name: Invalid value: \"app:settings\": {SUBDOMAIN}"));

    // A Service name is a DNS-1035 label: it starts with a letter.
    let (code, _, msg, _) = refused(
        &client,
        ("", "v1", "Service", "services"),
        Some("default"),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1web", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(msg, format!("Service \"1web\" is invalid: metadata.name: Invalid value: \"1web\": {DNS1035}"));

    // A CRD must be named <spec.names.plural>.<spec.group>; the message names the group kind.
    let group = format!("{}.drover.dev", env.unique_name("e2e"));
    let crd_name = format!("widget.{group}");
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let (code, _, msg, causes) = refused(&client, ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"), None, crd).await;
    cleanup.add("customresourcedefinition", &crd_name);
    assert_eq!(code, 422);
    assert_eq!(
        msg,
        format!("CustomResourceDefinition.apiextensions.k8s.io \"{crd_name}\" is invalid: metadata.name: Invalid value: \"{crd_name}\": must be spec.names.plural+\".\"+spec.group")
    );
    assert_eq!(causes[0]["field"], "metadata.name", "{causes}");

    // A CronJob name leaves room for the 11-character suffix of its Jobs.
    let long = "nightly-report-for-the-whole-fleet-of-edge-clusters-x"; // 53 characters
    assert_eq!(long.len(), 53);
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": long, "namespace": "default"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "registry.invalid/report:1"}]}}}}}});
    let (code, _, msg, _) = refused(&client, ("batch", "v1", "CronJob", "cronjobs"), Some("default"), cron).await;
    assert_eq!(code, 422);
    assert_eq!(msg, format!("CronJob.batch \"{long}\" is invalid: metadata.name: Invalid value: \"{long}\": must be no more than 52 characters"));

    // kubectl shows the user the same refusal.
    let out = kubectl(env.kubeconfig_path(), &["apply", "--server-side", "-f", "-"], "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"app:settings\"\n  namespace: default\n");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("metadata.name: Invalid value: \"app:settings\": a lowercase RFC 1123 subdomain"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------------
// (b) The real agent applies (and prunes) RBAC objects named with colons.

scenarios!(agent_applies_and_prunes_rbac_names_with_colons);

/// `base` on the fake; unique per run on a shared real cluster.
fn cluster_name(env: &Env, base: &str) -> String {
    match env.cluster {
        kube_support::Cluster::Fake(_) => base.to_string(),
        kube_support::Cluster::Real(_) => format!("{base}-{}", env.ns),
    }
}

fn agent_applies_and_prunes_rbac_names_with_colons(env: &Env) {
    let role = cluster_name(env, "telemetry:reader");
    let binding = cluster_name(env, "team:readers");
    let mut cleanup = Cleanup::new(env.cluster.fake_server().is_none(), env.cluster.kubeconfig());
    cleanup.add("clusterrole", &role);
    cleanup.add("clusterrolebinding", &binding);
    let cluster_role = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: \"{role}\"\nrules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\", \"services\"]\n  verbs: [\"get\", \"list\", \"watch\"]\n"
    );
    let cluster_binding = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: \"{binding}\"\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: \"{role}\"\nsubjects:\n- kind: ServiceAccount\n  name: telemetry\n  namespace: {ns}\n",
        ns = env.ns
    );
    let role_binding = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: \"config:readers\"\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: \"{role}\"\nsubjects:\n- kind: ServiceAccount\n  name: telemetry\n  namespace: {ns}\n",
        ns = env.ns
    );
    let sa = format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: telemetry\n  namespace: {}\n", env.ns);
    let digest = env.push(&[env.namespace(), sa.clone(), cluster_role.clone(), cluster_binding, role_binding, env.configmap("settings", "1", &[])], &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    for (kind, name) in [("ClusterRole", role.as_str()), ("ClusterRoleBinding", binding.as_str()), ("RoleBinding", "config:readers")] {
        assert_eq!(Env::action(&attempt, kind, name).0, "created", "{kind} {name}: {attempt:#}");
    }
    let cr = env.get("clusterrole", &role).expect("the ClusterRole exists");
    assert_eq!(cr["metadata"]["labels"]["app.kubernetes.io/managed-by"], "drover");
    assert!(cr["metadata"]["annotations"].get("drover.dev/digest").is_none(), "objects do not carry the bundle digest: {cr:#}");
    assert_eq!(env.status()["appliedDigest"], digest.as_str());
    assert_eq!(cr["rules"][0]["resources"], json!(["configmaps", "services"]));
    let crb = env.get("clusterrolebinding", &binding).expect("the ClusterRoleBinding exists");
    assert_eq!(crb["roleRef"]["name"], role.as_str());
    assert!(env.get("rolebinding", "config:readers").is_some());

    // The next bundle drops both bindings: the agent deletes them by their colon names.
    env.push(&[env.namespace(), sa, cluster_role, env.configmap("settings", "1", &[])], &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    assert_eq!(attempt["pruned"], 2, "{attempt:#}");
    assert_eq!(Env::action(&attempt, "ClusterRoleBinding", &binding).0, "deleted", "{attempt:#}");
    assert_eq!(Env::action(&attempt, "RoleBinding", "config:readers").0, "deleted", "{attempt:#}");
    assert!(env.get("clusterrolebinding", &binding).is_none(), "pruned");
    assert!(env.get("rolebinding", "config:readers").is_none(), "pruned");
    assert!(env.get("clusterrole", &role).is_some(), "still in the bundle");
}
