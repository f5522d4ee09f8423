//! The kube target end to end: the real `drover push --key` to the real registry, the
//! real `drover-agent run --once --target kube` against the FAKE API server (or a real
//! cluster: the `real_cluster` variants, see `kube_support`), and `kubectl` reading back.
//! CRD + custom resource in one bundle, update, drift corrected on resync, conflicts
//! surfaced with `--no-force`.

mod kube_support;

use kube_support::Env;
use std::time::Duration;

scenarios!(crd_and_custom_resource_in_one_bundle, update_changes_and_adds, drift_corrected_on_resync, conflict_surfaced_with_no_force);

fn crd_and_custom_resource_in_one_bundle(env: &Env) {
    if let Some(fake) = env.cluster.fake_server() {
        // The custom resource can only be applied once the CRD is Established.
        fake.set_crd_establish_delay(Duration::from_millis(700));
    }
    let digest = env.push(&[env.namespace(), env.crd(), env.widget("gizmo", 3), env.configmap("settings", "1", &[])], &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    assert_eq!(attempt["health"], "Healthy", "{attempt:#}");
    for (kind, name) in [("Namespace", env.ns.as_str()), ("Widget", "gizmo"), ("ConfigMap", "settings")] {
        assert_eq!(Env::action(&attempt, kind, name).0, "created", "{kind} {name}");
    }
    let w = env.get(&format!("widgets.{}", env.group), "gizmo").expect("the Widget exists");
    assert_eq!(w["spec"]["size"], 3);
    assert_eq!(w["metadata"]["labels"]["app.kubernetes.io/managed-by"], "drover");
    assert_eq!(w["metadata"]["annotations"]["drover.dev/source"], env.reference.as_str());
    assert!(w["metadata"]["annotations"].get("drover.dev/digest").is_none(), "objects do not carry the bundle digest (a new bundle writes only what changed): {w:#}");
    assert_eq!(env.status()["appliedDigest"], digest.as_str());
    let full = env.kubectl_ok(&["get", &format!("widgets.{}", env.group), "gizmo", "-n", &env.ns, "-o", "json", "--show-managed-fields"]).json();
    let managers: Vec<String> = full["metadata"]["managedFields"].as_array().unwrap().iter().map(|m| format!("{}/{}", m["manager"].as_str().unwrap(), m["operation"].as_str().unwrap())).collect();
    assert!(managers.contains(&"drover/Apply".to_string()), "{managers:?}");
    // kubectl, a second client, lists what drover applied through the same kubeconfig.
    let table = env.kubectl_ok(&["get", "widgets", "-n", &env.ns]).stdout;
    assert!(table.contains("gizmo"), "{table}");
    let table = env.kubectl_ok(&["get", "configmaps", "-n", &env.ns, "-l", "app.kubernetes.io/managed-by=drover", "-o", "name"]).stdout;
    assert!(table.contains("configmap/settings"), "{table}");
    // A second run of the same bundle changes nothing.
    env.agent_ok(&[]);
    let again = env.last_attempt();
    assert_eq!(again["drift"], 0, "{again:#}");
    assert!(again["objects"].as_array().unwrap().iter().all(|o| o["action"] == "unchanged"), "{again:#}");
}

/// A new bundle that changes one object of three (and adds one) writes only those: the
/// unchanged Deployment is not sent, so its resourceVersion stays and no watcher wakes.
fn update_changes_and_adds(env: &Env) {
    env.push(&[env.namespace(), env.configmap("settings", "1", &[]), env.deployment("web", "nginx:1.27")], &[]);
    env.agent_ok(&[]);
    let web_rv = env.get("deployment", "web").unwrap()["metadata"]["resourceVersion"].clone();
    let d2 = env.push(&[env.namespace(), env.configmap("settings", "2", &[]), env.configmap("extra", "x", &[]), env.deployment("web", "nginx:1.27")], &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["digest"], d2.as_str());
    assert_eq!(attempt["resync"], false);
    assert_eq!(Env::action(&attempt, "ConfigMap", "settings").0, "configured");
    assert_eq!(Env::action(&attempt, "ConfigMap", "extra").0, "created");
    let cm = env.get("configmap", "settings").unwrap();
    assert_eq!(cm["data"]["value"], "2");
    assert!(env.get("configmap", "extra").is_some());
    assert_eq!(Env::action(&attempt, "Deployment", "web").0, "unchanged", "{attempt:#}");
    let patches = attempt["writes"]["patch"].as_u64().expect("the attempt counts its writes");
    assert!(patches >= 2, "settings and extra were applied: {attempt:#}");
    assert_eq!(Env::action(&attempt, "Namespace", &env.ns).0, "unchanged", "{attempt:#}");
    assert_eq!(env.get("deployment", "web").unwrap()["metadata"]["resourceVersion"], web_rv, "the unchanged Deployment was not written");
    assert_eq!(env.status()["appliedDigest"], d2.as_str());
}

fn drift_corrected_on_resync(env: &Env) {
    // Four ConfigMaps: their versions come from one labelled LIST (the GET-free path).
    let digest = env.push(
        &[env.namespace(), env.configmap("settings", "1", &[]), env.configmap("other", "o", &[]), env.configmap("x1", "1", &[]), env.configmap("x2", "2", &[])],
        &[],
    );
    env.agent_ok(&[]);
    // Another manager (kubectl, merge patch) edits a field drover applied.
    env.kubectl_ok(&["patch", "configmap", "settings", "-n", &env.ns, "--type", "merge", "-p", r#"{"data":{"value":"tampered"}}"#]);
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "tampered");
    // Same digest, --resync 0s: the bundle is re-applied and the drift corrected.
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["digest"], digest.as_str());
    assert_eq!(attempt["resync"], true, "{attempt:#}");
    assert_eq!(attempt["drift"], 1, "{attempt:#}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "settings").0, "configured");
    assert_eq!(Env::action(&attempt, "ConfigMap", "other").0, "unchanged");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "1");
}

fn conflict_surfaced_with_no_force(env: &Env) {
    env.push(&[env.namespace(), env.configmap("settings", "1", &[]), env.deployment("web", "nginx:1.27")], &[]);
    env.agent_ok(&[]);
    env.kubectl_ok(&["patch", "configmap", "settings", "-n", &env.ns, "--type", "merge", "-p", r#"{"data":{"value":"theirs"}}"#]);
    let out = env.agent(&["--no-force"]);
    assert_eq!(out.code, 1, "a conflict fails the attempt:\n{}", out.stderr);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Failed", "{attempt:#}");
    let (action, message) = Env::action(&attempt, "ConfigMap", "settings");
    assert_eq!(action, "failed");
    assert!(message.contains("409") && message.to_lowercase().contains("conflict") && message.contains(".data.value"), "{message}");
    assert!(message.contains("--no-force"), "{message}");
    assert_eq!(Env::action(&attempt, "Deployment", "web").0, "unchanged", "a failed object stops nothing: the later group is applied");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "theirs", "the other manager's value stays");
    // With force (the default) drover takes the field back.
    env.agent_ok(&[]);
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "1");
}
