//! The FAKE API server honours impersonation with RBAC as the real one does, checked with
//! the real `kubectl --as` (and the same scenario against a real cluster): a service
//! account bound to a Role for ConfigMaps may get and patch them in its namespace and
//! nothing else; the 403 messages are the real ones; a server-side apply that creates an
//! object also needs `create`; group subjects (`system:serviceaccounts:NS`) count.

use drover_tests::fakekube::{kubectl, kubectl_ok, KubeEnv};

drover_tests::kube_scenario!(impersonated_requests_are_authorised_by_rbac => scenario);

fn role(ns: &str, verbs: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: deployer\n  namespace: {ns}\nrules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\"]\n  verbs: {verbs}\n"
    )
}

fn scenario(env: KubeEnv) {
    let k = env.kubeconfig_path();
    let ns = env.unique_name("rbac");
    let user = format!("system:serviceaccount:{ns}:deployer");
    let admin = |yaml: &str| kubectl_ok(k, &["apply", "--server-side", "--field-manager", "e2e-admin", "-f", "-"], yaml);
    admin(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: {ns}\n---\n{}---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: deployer\nsubjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: {ns}\n",
        role(&ns, "[\"get\", \"patch\"]")
    ));
    let as_sa = |args: &[&str], stdin: &str| {
        let mut a = vec!["--as", user.as_str()];
        a.extend_from_slice(args);
        kubectl(k, &a, stdin)
    };
    let apply = |yaml: &str| as_sa(&["apply", "--server-side", "--field-manager", "e2e-deployer", "-f", "-"], yaml);

    // Cluster-scoped RBAC: refused with the real message.
    let crb = format!("{ns}-escalate");
    let out = apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {crb}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: {ns}\n"
    ));
    assert_ne!(out.code, 0);
    let want = format!(
        "clusterrolebindings.rbac.authorization.k8s.io \"{crb}\" is forbidden: User \"{user}\" cannot patch resource \"clusterrolebindings\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
    );
    assert!(out.stderr.contains(&want), "{}", out.stderr);

    // An apply that would create a ConfigMap needs create, which the Role lacks.
    let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: {ns}\ndata:\n  v: \"1\"\n");
    let out = apply(&cm);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(out.stderr.contains("configmaps \"x\" is forbidden"), "{}", out.stderr);
    assert!(kubectl(k, &["get", "configmap", "x", "-n", &ns], "").code != 0, "not created");

    // With create it may; other verbs, kinds and namespaces stay forbidden.
    admin(&role(&ns, "[\"get\", \"create\", \"patch\"]"));
    let out = apply(&cm);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(as_sa(&["get", "configmap", "x", "-n", &ns, "-o", "jsonpath={.data.v}"], "").stdout, "1");
    let out = as_sa(&["delete", "configmap", "x", "-n", &ns], "");
    assert!(out.stderr.contains(&format!("configmaps \"x\" is forbidden: User \"{user}\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"{ns}\"")), "{}", out.stderr);
    let out = as_sa(&["get", "secrets", "-n", &ns], "");
    assert!(out.stderr.contains(&format!("secrets is forbidden: User \"{user}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"{ns}\"")), "{}", out.stderr);
    let out = as_sa(&["get", "configmap", "x", "-n", "default"], "");
    assert!(out.stderr.contains("cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""), "{}", out.stderr);

    // A binding to the service accounts' group of the namespace counts for it.
    admin(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: all-sas-view-secrets\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: secrets-reader\nsubjects:\n- kind: Group\n  name: system:serviceaccounts:{ns}\n  apiGroup: rbac.authorization.k8s.io\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: secrets-reader\n  namespace: {ns}\nrules:\n- apiGroups: [\"\"]\n  resources: [\"secrets\"]\n  verbs: [\"list\"]\n"
    ));
    let out = as_sa(&["get", "secrets", "-n", &ns], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The admin (no impersonation) is not restricted.
    kubectl_ok(k, &["delete", "configmap", "x", "-n", &ns], "");
    let _ = kubectl(k, &["delete", "namespace", &ns, "--wait=false"], "");
}
