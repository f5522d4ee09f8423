//! The renderer recipes of docs/platform.md run as written, all the way to a cluster
//! (issue 33: the plain-script recipe failed on its first apply, its namespace never
//! created): the platform's Namespace template and the recipe's `workload.yaml` and script
//! are taken from the documentation, `drover publish` renders, signs and pushes, and the
//! real `drover-agent run --target kube` applies to the FAKE API server or a real cluster.
//! The workload's namespace is the one thing changed (a name of this scenario, so runs on
//! a real cluster never meet); Kustomize is a stand-in (not installable here).

mod kube_support;
mod platform_support;

use std::path::Path;

use drover_tests::run;
use kube_support::{Agent, Env};
use platform_support::*;

scenarios!(plain_script_recipe_applies_on_the_kube_target, kustomize_recipe_applies_on_the_kube_target);

/// A platform of [`base`] (its workload `app` removed) with the documented Namespace template and the recipe under
/// `heading` as workload `name` (script `script`), its namespace renamed to `namespace`.
fn recipe_platform(root: &Path, name: &str, heading: &str, script: &str, namespace: &str, documented: &str) {
    base(root);
    // Only the recipe's workload (base's `app` would make a namespace `app` on a real cluster).
    std::fs::remove_dir_all(root.join("workloads/app")).unwrap();
    let template = recipe("#### Every recipe: the workload's Namespace");
    let (_, yaml) = template.iter().find(|(l, _)| l == "yaml").expect("the documented Namespace template");
    write(root, &[("namespace/namespace.yaml", yaml)]);
    recipe_workload(root, name, heading, script);
    let file = root.join(format!("workloads/{name}/workload.yaml"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(&format!("namespace: {documented}\n")), "{text}");
    std::fs::write(&file, text.replace(&format!("namespace: {documented}\n"), &format!("namespace: {namespace}\n"))).unwrap();
}

/// `drover publish` of `root` for dev under `REG/fleet` (PATH may carry stand-in tools),
/// then the agent of cluster type `cluster_type` applies its channel.
fn publish_and_apply(env: &Env, root: &Path, cluster_type: &str, path: Option<&str>) {
    // The agent's own namespace (its state ConfigMap, its Events), as the install makes it.
    env.kubectl_apply(&env.namespace());
    let prefix = env.reg.reference("fleet");
    let key = env.path("keys/drover.key");
    let mut vars = vec![("DROVER_KEY_PASSWORD", "")];
    if let Some(p) = path {
        vars.push(("PATH", p));
    }
    // --allow-empty: cluster types the recipe's selector does not pick get empty bundles.
    let args = ["publish", root.to_str().unwrap(), "--env", "dev", "--registry", &prefix, "--key", key.to_str().unwrap(), "--plain-http", "--revision", "r1", "--allow-empty"];
    let out = run("drover", &args, &vars);
    assert_eq!(out.code, 0, "publish:\n{}\n{}", out.stdout, out.stderr);
    let agent = Agent { source: Some(env.reg.reference(&format!("fleet/{cluster_type}:dev"))), ..Agent::default() };
    env.agent_ok_in(&agent, &["--expect-cluster-type", cluster_type, "--expect-environment", "dev"]);
}

fn plain_script_recipe_applies_on_the_kube_target(env: &Env) {
    let root = env.path("platform");
    let ns = env.extra_namespace("reports");
    recipe_platform(&root, "reports", "#### Recipe: a plain script", "render.py", &ns, "reports");
    publish_and_apply(env, &root, "cloud", None);
    assert_eq!(env.kubectl(&["get", "namespace", &ns], "").code, 0, "the Namespace template made {ns}");
    for i in 0..2 {
        let cm = env.get_in(&ns, "configmap", &format!("shard-{i}")).unwrap_or_else(|| panic!("shard-{i} applied in {ns}"));
        assert_eq!(cm["data"]["clusterType"], "cloud");
    }
}

fn kustomize_recipe_applies_on_the_kube_target(env: &Env) {
    let root = env.path("platform");
    let ns = env.extra_namespace("web");
    recipe_platform(&root, "web", "#### Recipe: Kustomize", "render.sh", &ns, "web");
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}}},
    });
    write(
        &root,
        &[
            ("workloads/web/base/kustomization.yaml", "resources: [deployment.yaml]\n"),
            ("workloads/web/base/deployment.yaml", &deployment.to_string()),
            ("bin/kustomize", FAKE_KUSTOMIZE),
        ],
    );
    chmod_x(&root.join("bin/kustomize"));
    let path = format!("{}:{}", root.join("bin").display(), std::env::var("PATH").unwrap());
    publish_and_apply(env, &root, "cloud", Some(&path));
    let d = env.get_in(&ns, "deployment", "web").expect("the Deployment applied");
    assert_eq!(d["spec"]["replicas"], 2, "the values patch reached it: {d:#}");
}
