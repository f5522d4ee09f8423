//! `--allow-namespace` holds: with an allow list, a signed bundle may not reach outside it
//! with a cluster-scoped object (a ClusterRoleBinding to cluster-admin), not even one
//! disguised with a `metadata.namespace` from the list, unless its kind is allowed with
//! `--allow-cluster-kind` (config `allowedClusterKinds`). A Namespace named in the list
//! stays allowed. Each object outside the policy is refused by itself (outcome `refused`,
//! named with the flag in the attempt's reason, `drover_verification_failures_total
//! {reason="policy"}`) and never reaches the target; the rest of the bundle is applied
//! (one stray object of a tenant does not stop its others). On the dir: target, and on the
//! kube target against the FAKE API server (plus the `real_cluster` variant, see
//! `kube_support`).

mod agent_support;
mod kube_support;

use std::collections::BTreeMap;

use agent_support::*;
use drover_proto::bundle::{assemble, BundleMeta};
use drover_proto::object::ObjectRef;
use drover_proto::registry::{RegistryClient, RegistryOptions};
use drover_proto::{Reference, Repo};
use kube_support::Env;

fn binding_yaml(name: &str, namespace: Option<&str>) -> String {
    let ns = namespace.map(|n| format!("  namespace: {n}\n")).unwrap_or_default();
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {name}\n{ns}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: User\n  name: mallory\n  apiGroup: rbac.authorization.k8s.io\n"
    )
}

/// Assembles a bundle of `objects` by hand and pushes it with the proto code, as any OCI
/// tool could (`drover push` would drop a namespace given to a cluster-scoped kind it
/// knows). Returns the digest; sign it with a trusted key to play a publisher the allow
/// list is meant to confine.
fn push_assembled(reference: &str, objects: &[(ObjectRef, String)], sequence: u64) -> String {
    let objects: BTreeMap<ObjectRef, Vec<u8>> = objects.iter().map(|(id, y)| (id.clone(), y.clone().into_bytes())).collect();
    let meta = BundleMeta { cluster_type: "edge".into(), environment: "prod".into(), sequence, ..Default::default() };
    let bundle = assemble(&objects, &meta);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() }).unwrap();
        let (repo, _) = Repo::open(&Reference::parse(reference).unwrap(), &client, true).unwrap();
        repo.push_bundle(&bundle, &["prod"]).await.unwrap()
    })
}

/// A ClusterRoleBinding to cluster-admin that claims to live in `namespace`.
fn disguised_binding(name: &str, namespace: &str) -> (ObjectRef, String) {
    let id = ObjectRef {
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "ClusterRoleBinding".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    };
    (id, binding_yaml(name, Some(namespace)))
}

fn configmap_id(ns: &str, name: &str) -> ObjectRef {
    ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some(ns.into()), name: name.into() }
}

#[test]
fn allow_namespace_refuses_cluster_scoped_objects_on_the_dir_target() {
    let fx = Fx::new();
    let allow = ["--allow-namespace", "team-a"];
    let ns = ("ns".to_string(), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n".to_string());
    let d1 = fx.push(&objs(&[ns.clone(), cm("team-a", "settings", "1")]), 1, Some("k1"), &[]);
    let out = fx.once(&allow);
    assert_eq!(out.code, 0, "a Namespace named in the allow list stays allowed:\n{}", out.stderr);
    let before = snapshot(&fx.target());
    assert_eq!(before.len(), 2, "{:?}", before.keys());

    // Signed, with a ClusterRoleBinding to cluster-admin next to an allowed ConfigMap:
    // the binding is refused and named, the ConfigMap applied.
    let crb = ("crb".to_string(), binding_yaml("pwned", None));
    let binding_file = fx.target().join("manifests/_cluster/ClusterRoleBinding.rbac.authorization.k8s.io.pwned.yaml");
    let d2 = fx.push(&objs(&[ns.clone(), cm("team-a", "settings", "2"), crb.clone()]), 2, Some("k1"), &[]);
    let out = fx.once(&allow);
    assert_eq!(out.code, 0, "the allowed objects are applied:\n{}", out.stderr);
    assert!(out.stderr.contains("1 object(s) refused by this source's policy"), "{}", out.stderr);
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Applied", "{st}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("ClusterRoleBinding pwned") && reason.contains("--allow-cluster-kind ClusterRoleBinding"), "{reason}");
    assert_eq!(st["appliedDigest"], d2.as_str());
    assert_ne!(st["appliedDigest"], d1.as_str());
    let refused = fx.history()[0]["objects"].as_array().unwrap().iter().find(|o| o["object"]["kind"] == "ClusterRoleBinding").cloned().expect("the binding's outcome");
    assert_eq!(refused["action"], "refused", "{refused:#}");
    assert!(!binding_file.exists(), "the binding never reaches the target");
    assert_eq!(snapshot(&fx.target()).len(), before.len(), "only the allowed objects");

    // Disguised with a namespace from the allow list: still cluster-scoped, still refused.
    let parts = [(namespace_id("team-a"), ns.1.clone()), (configmap_id("team-a", "settings"), cm("team-a", "settings", "3").1), disguised_binding("pwned", "team-a")];
    let digest = push_assembled(&fx.tag_ref, &parts, 3);
    fx.sign(&digest, "k1");
    fx.place(&digest, "k1");
    let out = fx.once(&allow);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reason = fx.status()["lastAttempt"]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("ClusterRoleBinding") && reason.contains("--allow-cluster-kind"), "a ClusterRoleBinding claiming namespace team-a is refused: {reason}");
    assert!(!binding_file.exists(), "the disguised binding never reaches the target");

    // A Namespace not in the list is refused as before.
    let other = ("other".to_string(), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n".to_string());
    fx.push(&objs(&[ns.clone(), other, cm("team-a", "settings", "4")]), 4, Some("k1"), &[]);
    let out = fx.once(&allow);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(fx.status()["lastAttempt"]["reason"].as_str().unwrap().contains("\"team-b\" is not allowed"));
    assert!(!snapshot(&fx.target()).keys().any(|k| k.contains("team-b")), "the Namespace team-b never reaches the target");

    // Allowed explicitly (flag, then the config file field): applied.
    let d5 = fx.push(&objs(&[ns, cm("team-a", "settings", "5"), crb]), 5, Some("k1"), &[]);
    let out = fx.once(&["--allow-namespace", "team-a", "--allow-cluster-kind", "ClusterRoleBinding"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(fx.status()["appliedDigest"], d5.as_str());
    assert!(fx.target().join("manifests/_cluster/ClusterRoleBinding.rbac.authorization.k8s.io.pwned.yaml").is_file());
    let cfg = fx.p("agent.yaml");
    std::fs::write(&cfg, "allowedNamespaces: [team-a]\nallowedClusterKinds: [ClusterRoleBinding]\n").unwrap();
    let out = fx.once(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::write(&cfg, "allowedNamespaces: [team-a]\n").unwrap();
    let out = fx.once(&["--config", cfg.to_str().unwrap(), "--resync", "0s"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reason = fx.status()["lastAttempt"]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("ClusterRoleBinding pwned"), "without allowedClusterKinds the resync refuses the binding: {reason}");
    assert!(binding_file.is_file(), "what the source applied before is neither applied nor pruned");
}

scenarios!(cluster_scoped_objects_refused_under_allow_namespace);

fn namespace_id(ns: &str) -> ObjectRef {
    ObjectRef { api_version: "v1".into(), kind: "Namespace".into(), namespace: None, name: ns.into() }
}

/// Signs `digest` and places it on `prod` with its signed channel statement (the release
/// key signed this content: the agent's policy must still refuse it).
fn sign(env: &Env, digest: &str) {
    let (key, public) = (env.dir.path().join("keys/drover.key"), env.dir.path().join("keys/drover.pub"));
    let r = format!("{}/fleet/edge@{digest}", env.reg.addr);
    let pw = [("DROVER_KEY_PASSWORD", "")];
    drover_tests::run_ok("drover", &["sign", &r, "--key", key.to_str().unwrap(), "--plain-http"], &pw);
    let place = ["promote", &r, "prod", "--key", key.to_str().unwrap(), "--trust-key", public.to_str().unwrap(), "--plain-http"];
    drover_tests::run_ok("drover", &place, &pw);
}

/// Runs the agent expecting an object refused by the policy, named with `what` in the
/// reason; the rest of the bundle is applied.
fn refused(env: &Env, flags: &[&str], what: &str) {
    let out = env.agent(flags);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("refused by this source's policy"), "{}", out.stderr);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains(what), "{reason} lacks {what:?}");
    let outcomes = attempt["objects"].as_array().unwrap();
    assert!(outcomes.iter().any(|o| o["action"] == "refused" && o["message"].as_str().unwrap_or("").contains(what)), "{attempt:#}");
}

fn cluster_scoped_objects_refused_under_allow_namespace(env: &Env) {
    let name = format!("{}-pwned", env.ns);
    let allow = ["--allow-namespace", env.ns.as_str()];
    env.push(&[env.namespace(), env.configmap("settings", "1", &[])], &[]);
    env.agent_ok(&allow);

    // The plain binding, pushed and signed with `drover push`.
    env.push(&[env.namespace(), env.configmap("settings", "2", &[]), binding_yaml(&name, None)], &[]);
    refused(env, &allow, &format!("ClusterRoleBinding {name}"));
    assert!(env.last_attempt()["reason"].as_str().unwrap().contains("--allow-cluster-kind ClusterRoleBinding"));
    assert!(env.kubectl(&["get", "clusterrolebinding", &name], "").code != 0, "the binding must not exist");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "2", "the rest of the bundle is applied");

    // Disguised with the allowed namespace (the API server would drop it): refused too.
    let (ns, cm) = ((namespace_id(&env.ns), env.namespace()), (configmap_id(&env.ns, "settings"), env.configmap("settings", "3", &[])));
    let digest = push_assembled(&env.reference, &[ns.clone(), cm.clone(), disguised_binding(&name, &env.ns)], 900);
    sign(env, &digest);
    refused(env, &allow, "--allow-cluster-kind ClusterRoleBinding");
    assert!(env.kubectl(&["get", "clusterrolebinding", &name], "").code != 0, "the disguised binding must not exist");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "3");

    // A custom cluster-scoped kind claiming the allowed namespace, CRDs allowed explicitly.
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.{g}\nspec:\n  group: {g}\n  scope: Cluster\n  names:\n    plural: gadgets\n    singular: gadget\n    kind: Gadget\n    listKind: GadgetList\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n",
        g = env.group
    );
    let crd = (
        ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: None,
            name: format!("gadgets.{}", env.group),
        },
        crd,
    );
    let gadget_id = ObjectRef { api_version: format!("{}/v1", env.group), kind: "Gadget".into(), namespace: Some(env.ns.clone()), name: name.clone() };
    let gadget = (gadget_id, format!("apiVersion: {}/v1\nkind: Gadget\nmetadata:\n  name: {name}\n  namespace: {}\nspec:\n  size: 1\n", env.group, env.ns));
    let with_crds = ["--allow-namespace", env.ns.as_str(), "--allow-cluster-kind", "CustomResourceDefinition"];
    let no_gadgets = || env.kubectl(&["get", &format!("gadgets.{}", env.group), &name], "").code != 0;

    // Its CRD in the same bundle says `scope: Cluster`: the Gadget is refused before
    // anything is applied (the CRD, allowed, is applied).
    let digest = push_assembled(&env.reference, &[ns.clone(), cm.clone(), crd.clone(), gadget.clone()], 940);
    sign(env, &digest);
    refused(env, &with_crds, "--allow-cluster-kind Gadget");
    assert!(no_gadgets());

    // Its CRD applied earlier, the Gadget alone: discovery says it is cluster-scoped.
    let settings = (configmap_id(&env.ns, "settings"), env.configmap("settings", "1", &[]));
    let digest = push_assembled(&env.reference, &[ns.clone(), settings, crd], 950);
    sign(env, &digest);
    env.agent_ok(&with_crds);
    let digest = push_assembled(&env.reference, &[ns, cm, gadget], 951);
    sign(env, &digest);
    refused(env, &with_crds, "--allow-cluster-kind Gadget");
    assert!(no_gadgets(), "the Gadget must not exist");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "3");
    if env.cluster.fake_server().is_none() {
        let _ = env.kubectl(&["delete", "customresourcedefinition", &format!("gadgets.{}", env.group), "--ignore-not-found", "--wait=false"], "");
    }
}
