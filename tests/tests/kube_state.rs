//! The anti-rollback floor and the prune inventory live in the cluster (one ConfigMap per
//! source in the agent's namespace), so they survive what a DaemonSet with an `emptyDir`
//! state goes through: a new leader, a drained node, a recreated pod. Attacks as the
//! unlucky operator meets them (real binaries, real registry, skopeo for the attacker's
//! write, FAKE API server or a real cluster):
//!
//! - the channel is pointed back at an older signed bundle (skopeo copies its history
//!   tag onto the channel tag) and a NEW agent with an EMPTY state directory polls: it
//!   must refuse the rollback;
//! - a NEW agent with an EMPTY state directory gets a bundle that drops an object an
//!   earlier agent applied: it must prune it;
//! - an agent that applied seq 1, then lost the lease to one that applied seq 2, comes
//!   back: the higher floor (the cluster's) wins;
//! - the ConfigMap cannot be written (its namespace does not exist): the agent applies,
//!   reports it and keeps its local state.

mod kube_support;

use drover_tests::tool_ok;
use kube_support::{inventory_names as names, state_in, state_name, Agent, Env};
use serde_json::Value;

scenarios!(
    new_agent_refuses_a_rollback_below_the_cluster_floor,
    new_agent_prunes_with_the_cluster_inventory,
    returning_agent_takes_the_higher_cluster_floor,
    agent_keeps_working_when_the_state_cannot_be_written,
);

fn state_of(env: &Env) -> (Value, Vec<Value>) {
    state_in(env, &env.ns, &env.reference).expect("the agent's state ConfigMap exists in its namespace")
}

/// The attacker's write: skopeo copies the history tag `prod-<sequence>` onto `prod`.
fn repoint_channel(env: &Env, sequence: u64) {
    let from = format!("docker://{}", env.reg.reference(&format!("fleet/edge:prod-{sequence}")));
    let to = format!("docker://{}", env.reference);
    tool_ok("skopeo", &["copy", "--quiet", "--src-tls-verify=false", "--dest-tls-verify=false", &from, &to]);
}

fn new_agent_refuses_a_rollback_below_the_cluster_floor(env: &Env) {
    let prod = ["--environment", "prod"];
    let v1 = env.push_to(&env.reference, &[env.namespace(), env.configmap("a", "1", &[]), env.configmap("b", "1", &[])], &prod);
    env.agent_ok(&[]);
    let v2 = env.push_to(&env.reference, &[env.namespace(), env.configmap("a", "2", &[])], &prod);
    env.agent_ok(&[]);
    assert!(env.get("configmap", "b").is_none(), "seq 2 dropped b: pruned");

    // The attacker points the channel back at the signed seq-1 bundle.
    repoint_channel(env, v1["sequence"].as_u64().unwrap());
    // A new leader (new pod, empty emptyDir) polls.
    let fresh = Agent::with_state("state-new");
    let out = env.agent_in(&fresh, &[]);
    let attempt = env.last_attempt_in(&fresh);
    assert_eq!(out.code, 1, "the rollback must be refused:\n{}\n{attempt:#}", out.stderr);
    assert_eq!(attempt["result"], "Rejected", "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains("lower than the applied") && reason.contains(v2["digest"].as_str().unwrap()), "{reason}");
    assert!(env.get("configmap", "b").is_none(), "the old bundle is not applied: b stays deleted");
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "2");
    assert_eq!(env.status_in(&fresh)["appliedDigest"], v2["digest"], "the new agent knows the cluster's floor");

    // The in-cluster record of what is applied (the new agent's refusal left it as it was).
    let (cm, inventory) = state_of(env);
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"], "drover-agent", "{cm:#}");
    assert_eq!(cm["metadata"]["labels"]["drover.dev/state"], "true", "{cm:#}");
    assert_eq!(cm["metadata"]["annotations"]["drover.dev/source"], env.reference.as_str(), "{cm:#}");
    assert_eq!(cm["data"]["appliedDigest"], v2["digest"], "{cm:#}");
    assert_eq!(cm["data"]["appliedSequence"], v2["sequence"].as_u64().unwrap().to_string(), "{cm:#}");
    assert!(cm["data"]["appliedAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{cm:#}");
    assert!(cm["data"].get("policyFingerprint").is_some(), "{cm:#}");
    assert_eq!(names(&inventory), vec!["ConfigMap/a".to_string(), format!("Namespace/{}", env.ns)]);
    let full = env.kubectl_ok(&["get", "configmap", &state_name(&env.reference), "-n", &env.ns, "-o", "json", "--show-managed-fields"]).json();
    let managers: Vec<&str> = full["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
    assert_eq!(managers, vec!["drover-agent"], "written with server-side apply by drover-agent");
}

fn new_agent_prunes_with_the_cluster_inventory(env: &Env) {
    env.push(&[env.namespace(), env.configmap("a", "1", &[]), env.configmap("b", "1", &[])], &[]);
    env.agent_ok(&[]);
    env.push(&[env.namespace(), env.configmap("a", "1", &[])], &[]);
    env.agent_ok(&[]);
    // seq 3 drops a; the agent that applies it has an empty state directory.
    env.push(&[env.namespace(), env.configmap("c", "1", &[])], &[]);
    let fresh = Agent::with_state("state-new");
    env.agent_ok_in(&fresh, &[]);
    let attempt = env.last_attempt_in(&fresh);
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "a").0, "deleted", "{attempt:#}");
    assert_eq!(attempt["pruned"], 1, "{attempt:#}");
    assert!(env.get("configmap", "a").is_none(), "a is pruned although the new agent's local inventory was empty");
    assert!(env.get("configmap", "c").is_some());
    let (_, inventory) = state_of(env);
    assert_eq!(names(&inventory), vec!["ConfigMap/c".to_string(), format!("Namespace/{}", env.ns)]);
}

fn returning_agent_takes_the_higher_cluster_floor(env: &Env) {
    let prod = ["--environment", "prod"];
    let (a, b) = (Agent::with_state("state-a"), Agent::with_state("state-b"));
    let v1 = env.push_to(&env.reference, &[env.namespace(), env.configmap("x", "1", &[]), env.configmap("old", "1", &[])], &prod);
    env.agent_ok_in(&a, &[]);
    // Agent b leads for a while: seq 2 drops "old".
    let v2 = env.push_to(&env.reference, &[env.namespace(), env.configmap("x", "2", &[])], &prod);
    env.agent_ok_in(&b, &[]);
    assert!(env.get("configmap", "old").is_none());
    // The channel goes back to seq 1 and agent a, whose own record says seq 1, leads again.
    repoint_channel(env, v1["sequence"].as_u64().unwrap());
    let out = env.agent_in(&a, &[]);
    let attempt = env.last_attempt_in(&a);
    assert_eq!(out.code, 1, "a's local floor is lower than the cluster's: refused\n{}\n{attempt:#}", out.stderr);
    assert_eq!(attempt["result"], "Rejected", "{attempt:#}");
    assert!(attempt["reason"].as_str().unwrap().contains("lower than the applied"), "{attempt:#}");
    assert_eq!(env.get("configmap", "x").unwrap()["data"]["value"], "2", "seq 2 stays applied");
    assert!(env.get("configmap", "old").is_none(), "seq 1 is not re-applied");
    assert_eq!(env.status_in(&a)["appliedDigest"], v2["digest"]);
}

fn agent_keeps_working_when_the_state_cannot_be_written(env: &Env) {
    // The agent's namespace does not exist: the state ConfigMap cannot be written.
    let missing = Agent { namespace: Some(env.extra_namespace("missing")), ..Agent::default() };
    let d1 = env.push(&[env.namespace(), env.configmap("a", "1", &[])], &[]);
    let out = env.agent_ok_in(&missing, &[]);
    let attempt = env.last_attempt_in(&missing);
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains("in-cluster state") && reason.contains("not saved") && reason.contains("not found"), "reported: {reason}");
    assert!(out.stderr.contains("in-cluster state"), "logged:\n{}", out.stderr);
    assert!(env.get("configmap", "a").is_some());
    assert_eq!(env.status_in(&missing)["appliedDigest"], d1.as_str(), "the local state is kept");
    // The next bundle applies, pruning with the local inventory.
    env.push(&[env.namespace(), env.configmap("b", "1", &[])], &["--allow-mass-prune"]);
    env.agent_ok_in(&missing, &[]);
    assert!(env.get("configmap", "a").is_none(), "pruned with the local inventory");
    assert!(env.get("configmap", "b").is_some());
}

/// The operator's mistake the issue found: no `drover-system` namespace and POD_NAMESPACE
/// unset. The agent used to warn that its floor could not be saved and apply anyway (a
/// new leader then replays an older signed bundle); now it refuses to start. Fake API
/// server only: a real cluster may well have a `drover-system`.
#[test]
fn a_missing_state_namespace_is_refused_at_start_naming_it_and_pod_namespace() {
    let env = Env::new(kube_support::Cluster::fake(), "nostatens");
    env.push(&[env.namespace(), env.configmap("a", "1", &[])], &[]);
    let key = env.path("keys/drover.pub");
    let state = env.path("state");
    let out: drover_tests::Out = std::process::Command::new(drover_tests::bin("drover-agent"))
        .args(["run", "--once", "--target", "kube", "--source", &env.reference, "--plain-http", "--trust-key", key.to_str().unwrap()])
        .args(["--state-dir", state.to_str().unwrap()])
        .env("KUBECONFIG", env.cluster.kubeconfig())
        .env_remove("POD_NAMESPACE")
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("drover-system") && out.stderr.contains("POD_NAMESPACE"), "{}", out.stderr);
    assert!(env.get("configmap", "a").is_none(), "nothing applied");
}
