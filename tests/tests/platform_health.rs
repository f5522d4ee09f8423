//! Health rules in the platform model and the agent a bundle needs, through the real
//! `drover publish` / `promote` against a real registry: rules from `fleet.yaml`, a cluster
//! type and a workload land in each cluster type's signed config (the most specific wins),
//! a change of rules alone is published, a rule that does not compile is refused naming
//! its file; `publish` and `promote` warn, naming the clusters, when reporting agents on
//! the target channel are older than the bundle's `minAgentVersion`.

mod fleet_support;
mod platform_support;

use std::path::Path;

use drover_tests::{run, Out, Registry};
use fleet_support::{Fleet, Target};
use platform_support::*;

fn publish(root: &Path, reg: &Registry, env: &str, key: &str, extra: &[&str]) -> Out {
    let prefix = reg.reference("fleet");
    let mut args = vec!["publish", root.to_str().unwrap(), "--env", env, "--registry", &prefix, "--key", key, "--plain-http", "-o", "json"];
    args.extend_from_slice(extra);
    run("drover", &args, &[("DROVER_KEY_PASSWORD", "")])
}

fn publish_ok(root: &Path, reg: &Registry, env: &str, key: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let o = publish(root, reg, env, key, extra);
    assert_eq!(o.code, 0, "publish {env} failed:\n{}\n{}", o.stdout, o.stderr);
    (o.json(), o.stderr)
}

fn changed(v: &serde_json::Value) -> Vec<String> {
    v["results"].as_array().unwrap().iter().filter(|r| r["changed"] == true).map(|r| r["clusterType"].as_str().unwrap().to_string()).collect()
}

/// The signed config of `REG/fleet/<cluster_type>:<tag>` as `drover inspect` shows it.
fn config(reg: &Registry, cluster_type: &str, tag: &str) -> serde_json::Value {
    let o = run("drover", &["inspect", &reg.reference(&format!("fleet/{cluster_type}:{tag}")), "--plain-http", "-o", "json"], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    o.json()["config"].clone()
}

fn rule(kind: &str, current: &str) -> String {
    format!("  - apiVersion: x.drover.dev/v1\n    kind: {kind}\n    current: {current:?}\n")
}

#[test]
fn health_rules_of_the_platform_travel_in_each_bundle() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("platform");
    base(&root);
    let (key, _) = keygen(&tmp.path().join("keys"));
    let key = key.to_str().unwrap().to_string();
    let fleet = format!("apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, staging, prod]\n  healthChecks:\n{}", rule("Widget", "false"));
    let edge = |current: &str| {
        format!("apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  name: edge\n  labels: {{site: factory, gpu: \"true\"}}\nhealthChecks:\n{}", rule("Widget", current))
    };
    let workload = |current: &str| format!("apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {{}}\n  healthChecks:\n{}values:\n  x: defaults\n", rule("Gadget", current));
    write(&root, &[("fleet.yaml", &fleet), ("cluster-types/edge.yaml", &edge("true")), ("workloads/app/workload.yaml", &workload("status.ok"))]);

    let (first, _) = publish_ok(&root, &reg, "dev", &key, &["--revision", "r1"]);
    assert_eq!(changed(&first).len(), 3);
    let rules = |t: &str| -> Vec<(String, String)> {
        config(&reg, t, "dev")["healthChecks"].as_array().unwrap().iter().map(|r| (r["kind"].as_str().unwrap().into(), r["current"].as_str().unwrap().into())).collect()
    };
    let pair = |k: &str, c: &str| (k.to_string(), c.to_string());
    assert_eq!(rules("edge"), [pair("Gadget", "status.ok"), pair("Widget", "true")], "the cluster type's rule wins over fleet.yaml's");
    assert_eq!(rules("cloud"), [pair("Gadget", "status.ok"), pair("Widget", "false")]);
    assert_eq!(config(&reg, "edge", "dev")["minAgentVersion"], "0.2.0", "rules need an agent that knows them");
    assert_eq!(first["results"][0]["minAgentVersion"], "0.2.0", "{first:#}");

    // Unchanged: nothing pushed. A change of one cluster type's rules alone: that one.
    let (again, _) = publish_ok(&root, &reg, "dev", &key, &["--revision", "r1"]);
    assert!(changed(&again).is_empty(), "{again:#}");
    write(&root, &[("cluster-types/edge.yaml", &edge("has(status.ready)"))]);
    let (third, _) = publish_ok(&root, &reg, "dev", &key, &["--revision", "r2"]);
    assert_eq!(changed(&third), ["edge"], "{third:#}");
    assert_eq!(rules("edge")[1], pair("Widget", "has(status.ready)"));

    // A rule that does not compile: refused, naming the file and the rule; nothing pushed.
    write(&root, &[("workloads/app/workload.yaml", &workload("status.ok ==")), ("cluster-types/edge.yaml", &edge("true"))]);
    let o = publish(&root, &reg, "dev", &key, &["--revision", "r3"]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("workload.yaml") && o.stderr.contains("Gadget (x.drover.dev/v1)") && o.stderr.contains("does not compile"), "{}", o.stderr);
    assert_eq!(rules("edge")[1], pair("Widget", "has(status.ready)"), "nothing pushed");
}

#[test]
fn publish_and_promote_warn_about_older_agents() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("platform");
    base(&root);
    let f = Fleet::new(&reg.addr, tmp.path());
    let key = f.key();

    // Two clusters follow edge:dev and report; one of them reports an older agent.
    let (first, stderr) = publish_ok(&root, &reg, "dev", &key, &["--revision", "r1"]);
    assert!(first["results"][0]["minAgentVersion"].is_null(), "nothing new used: no minAgentVersion: {first:#}");
    assert!(!stderr.contains("older agent"), "{stderr}");
    for c in ["c1", "c2"] {
        f.agent_ok(c, "edge", "dev", "dev", Target::Dir, &[]);
    }
    f.rewrite_own_report("edge", "c1", |r| r["agentVersion"] = "0.1.0".into());

    // A bundle that needs more than c1's agent: publish warns, naming c1 only.
    let (second, stderr) = publish_ok(&root, &reg, "dev", &key, &["--revision", "r2", "--min-agent-version", "0.2.0"]);
    assert_eq!(changed(&second).len(), 3, "a raised minAgentVersion is a change: {second:#}");
    assert!(stderr.contains("edge/dev needs drover-agent 0.2.0 or newer") && stderr.contains("edge.c1 (agent 0.1.0"), "{stderr}");
    assert!(!stderr.contains("edge.c2"), "c2's agent is new enough: {stderr}");

    // promote: the clusters following the destination channel are the ones named.
    f.push("edge", "prod", "prod-ring0", 5, &["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: app}\ndata: {v: \"1\"}\n".to_string()]);
    f.agent_ok("c3", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.rewrite_own_report("edge", "c3", |r| r["agentVersion"] = "0.1.0".into());
    let input = tmp.path().join("candidate");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: app}\n").unwrap();
    let candidate = f.channel("edge", "prod-candidate");
    let o = f.drover(&["push", input.to_str().unwrap(), &candidate, "--key", &key, "--cluster-type", "edge", "--env", "prod", "--min-agent-version", "0.3.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = f.drover(&["promote", &candidate, "prod-ring0", "--key", &key, "--trust-key", &f.pubkey()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("edge/prod needs drover-agent 0.3.0 or newer") && o.stderr.contains("edge.c3 (agent 0.1.0"), "{}", o.stderr);
    assert!(!o.stderr.contains("edge.c1"), "c1 follows another channel: {}", o.stderr);
}
