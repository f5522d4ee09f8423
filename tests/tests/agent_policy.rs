//! `--allow-namespace` holds: with an allow list, a signed bundle may not reach outside it
//! with a cluster-scoped object (a ClusterRoleBinding to cluster-admin), not even one
//! disguised with a `metadata.namespace` from the list, unless its kind is allowed with
//! `--allow-cluster-kind` (config `allowedClusterKinds`). A Namespace named in the list
//! stays allowed. Refused with reason `policy`, naming the object and the flag; the target
//! does not change. On the dir: target, and on the kube target against the FAKE API server
//! (plus the `real_cluster` variant, see `kube_support`).

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

/// A ClusterRoleBinding to cluster-admin that claims to live in `namespace`: `drover push`
/// would drop the namespace (it knows the kind is cluster-scoped), so it is assembled by
/// hand and pushed with the proto code as any OCI tool could, then signed with a trusted
/// key (a publisher the allow list is meant to confine). Returns the digest.
fn push_disguised_binding(reference: &str, name: &str, namespace: &str, extra: &[(ObjectRef, String)], sequence: u64) -> String {
    let id = ObjectRef {
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "ClusterRoleBinding".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    };
    let mut objects = BTreeMap::from([(id, binding_yaml(name, Some(namespace)).into_bytes())]);
    objects.extend(extra.iter().map(|(id, y)| (id.clone(), y.clone().into_bytes())));
    let meta = BundleMeta { cluster_type: "edge".into(), environment: "prod".into(), sequence, ..Default::default() };
    let bundle = assemble(&objects, &meta);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() }).unwrap();
        let (repo, _) = Repo::open(&Reference::parse(reference).unwrap(), &client, true).unwrap();
        repo.push_bundle(&bundle, &["prod"]).await.unwrap()
    })
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

    // Signed, with a ClusterRoleBinding to cluster-admin next to an allowed ConfigMap.
    let crb = ("crb".to_string(), binding_yaml("pwned", None));
    fx.push(&objs(&[ns.clone(), cm("team-a", "settings", "2"), crb.clone()]), 2, Some("k1"), &[]);
    let out = fx.once(&allow);
    assert_eq!(out.code, 1, "a cluster-scoped object outside the allow list must be refused:\n{}", out.stderr);
    assert!(out.stderr.contains("reason=\"policy\""), "{}", out.stderr);
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("ClusterRoleBinding pwned") && reason.contains("--allow-cluster-kind ClusterRoleBinding"), "{reason}");
    assert_eq!(st["appliedDigest"], d1.as_str());
    assert_eq!(snapshot(&fx.target()), before, "the target changed");

    // Disguised with a namespace from the allow list: still cluster-scoped, still refused.
    let digest = push_disguised_binding(&fx.tag_ref, "pwned", "team-a", &[], 3);
    fx.sign(&digest, "k1");
    let out = fx.once(&allow);
    assert_eq!(out.code, 1, "a ClusterRoleBinding claiming namespace team-a must be refused:\n{}", out.stderr);
    let reason = fx.status()["lastAttempt"]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("ClusterRoleBinding") && reason.contains("--allow-cluster-kind"), "{reason}");
    assert_eq!(snapshot(&fx.target()), before, "the target changed");

    // A Namespace not in the list is refused as before.
    let other = ("other".to_string(), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n".to_string());
    fx.push(&objs(&[ns.clone(), other, cm("team-a", "settings", "4")]), 4, Some("k1"), &[]);
    let out = fx.once(&allow);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(fx.status()["lastAttempt"]["reason"].as_str().unwrap().contains("team-b"));
    assert_eq!(snapshot(&fx.target()), before);

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
    assert_eq!(out.code, 1, "without allowedClusterKinds the resync is refused:\n{}", out.stderr);
}

scenarios!(cluster_role_binding_refused_under_allow_namespace);

fn cluster_role_binding_refused_under_allow_namespace(env: &Env) {
    let name = format!("{}-pwned", env.ns);
    let allow = ["--allow-namespace", env.ns.as_str()];
    env.push(&[env.namespace(), env.configmap("settings", "1", &[])], &[]);
    env.agent_ok(&allow);

    // The plain binding, pushed and signed with `drover push`.
    env.push(&[env.namespace(), env.configmap("settings", "2", &[]), binding_yaml(&name, None)], &[]);
    let out = env.agent(&allow);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Rejected", "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("ClusterRoleBinding {name}")) && reason.contains("--allow-cluster-kind ClusterRoleBinding"), "{reason}");
    assert!(env.kubectl(&["get", "clusterrolebinding", &name], "").code != 0, "the binding must not exist");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "1", "nothing of the refused bundle is applied");

    // Disguised with the allowed namespace (the kube target would drop it): refused too.
    let cm = (configmap_id(&env.ns, "settings"), env.configmap("settings", "3", &[]));
    let digest = push_disguised_binding(&env.reference, &name, &env.ns, &[cm], 900);
    let key = env.dir.path().join("keys/drover.key");
    let r = format!("{}/fleet/edge@{digest}", env.reg.addr);
    drover_tests::run_ok("drover", &["sign", &r, "--key", key.to_str().unwrap(), "--plain-http"], &[("DROVER_KEY_PASSWORD", "")]);
    let out = env.agent(&allow);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Rejected", "{attempt:#}");
    assert!(attempt["reason"].as_str().unwrap().contains("--allow-cluster-kind"), "{attempt:#}");
    assert!(env.kubectl(&["get", "clusterrolebinding", &name], "").code != 0, "the disguised binding must not exist");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "1");
}
