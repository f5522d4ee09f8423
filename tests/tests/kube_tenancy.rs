//! Tenancy: with `--service-account NS/NAME` every request the kube target makes about
//! the bundle's objects impersonates that service account, so the API server's RBAC is
//! the enforcement (as Flux's `serviceAccountName`). The agent's own state ConfigMap
//! keeps the agent's identity. Real binaries against the FAKE API server (which honours
//! impersonation with RBAC as the real one does) or a real cluster.

mod kube_support;

use kube_support::{Agent, Env};

scenarios!(service_account_rbac_is_enforced);

/// The team namespace, a service account `deployer` and a Role allowing it ConfigMaps only.
fn team_rbac(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: {ns}\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: deployer\n  namespace: {ns}\nrules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\"]\n  verbs: [\"get\", \"list\", \"create\", \"patch\", \"delete\"]\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: deployer\nsubjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: {ns}\n"
    )
}

fn escalation(name: &str, ns: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {name}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: {ns}\n"
    )
}

fn service_account_rbac_is_enforced(env: &Env) {
    env.kubectl_apply(&team_rbac(&env.ns));
    // The agent's own namespace, where the deployer may do nothing.
    let system = env.extra_namespace("sys");
    env.kubectl_apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {system}\n"));
    let agent = Agent { namespace: Some(system.clone()), ..Agent::default() };
    let sa = format!("{}/deployer", env.ns);
    let user = format!("system:serviceaccount:{}:deployer", env.ns);

    // ConfigMaps in the team namespace: allowed.
    env.push(&[env.configmap("a", "1", &[]), env.configmap("b", "1", &[])], &[]);
    let out = env.agent_ok_in(&agent, &["--service-account", &sa]);
    assert!(out.stderr.contains(&format!("as {user}")), "the log names the identity:\n{}", out.stderr);
    let attempt = env.last_attempt_in(&agent);
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "a").0, "created");
    assert!(env.get("configmap", "a").is_some() && env.get("configmap", "b").is_some());
    assert!(
        env.get_in(&system, "configmap", &kube_support::state_name(&env.reference)).is_some(),
        "the state ConfigMap is written with the agent's own identity (the deployer may not write in {system})"
    );

    // A ClusterRoleBinding: the API server refuses the deployer; the rest goes on.
    let crb = format!("{}-escalate", env.ns);
    env.push(&[env.configmap("a", "2", &[]), escalation(&crb, &env.ns)], &[]);
    let out = env.agent_in(&agent, &["--service-account", &sa]);
    let attempt = env.last_attempt_in(&agent);
    assert_eq!(out.code, 1, "{}\n{attempt:#}", out.stderr);
    assert_eq!(attempt["result"], "Failed", "{attempt:#}");
    let (action, message) = Env::action(&attempt, "ClusterRoleBinding", &crb);
    assert_eq!(action, "failed", "{attempt:#}");
    let want = format!("clusterrolebindings.rbac.authorization.k8s.io \"{crb}\" is forbidden: User \"{user}\" cannot ");
    assert!(message.contains("403") && message.contains(&want), "the API server's 403: {message}");
    assert!(message.contains("resource \"clusterrolebindings\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"), "{message}");
    // That object's failure only (issue 36): the rest is applied, the dropped b pruned.
    assert_eq!(Env::action(&attempt, "ConfigMap", "a").0, "configured", "{attempt:#}");
    assert!(env.kubectl(&["get", "clusterrolebinding", &crb], "").code != 0, "the binding does not exist");
    assert!(env.get("configmap", "b").is_none(), "what the bundle dropped is pruned beside the failed object");
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "2");

    // Without --service-account the agent applies as itself (the cluster's admin here).
    env.push(&[env.configmap("a", "3", &[]), env.configmap("b", "1", &[])], &[]);
    env.agent_ok_in(&agent, &[]);
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "3");
}
