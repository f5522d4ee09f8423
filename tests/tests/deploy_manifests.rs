//! `deploy/kubernetes` (the agent's install) is accepted by the API server, and the
//! agent configuration it ships works: the kustomization's resources are bundled with the
//! real `drover push` and applied by the real `drover-agent --target kube` (drover's own
//! loader, not kubectl), then the shipped `agent.yaml` runs the agent — leader election
//! and its fleet report included — with only the site-specific values (source, key,
//! state dir) overridden.

mod kube_support;

use std::path::Path;

use kube_support::{Agent, Env};
use serde_json::Value;

scenarios!(deploy_kubernetes_is_accepted_and_its_config_runs);

fn deploy_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// The documents of every resource the kustomization lists, in its order.
fn kustomization_documents() -> Vec<String> {
    let dir = deploy_dir();
    let k: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap()).unwrap();
    assert_eq!(k["namespace"], "drover-system");
    let mut docs = Vec::new();
    for file in k["resources"].as_array().expect("resources") {
        let text = std::fs::read_to_string(dir.join(file.as_str().unwrap())).unwrap();
        for doc in text.split("\n---\n") {
            let v: Value = serde_yaml_ng::from_str(doc).unwrap();
            if v.is_object() {
                docs.push(format!("{}\n", doc.trim_end()));
            }
        }
    }
    docs
}

fn deploy_kubernetes_is_accepted_and_its_config_runs(env: &Env) {
    let docs = kustomization_documents();
    assert!(docs.len() >= 9, "namespace, SA, RBAC, lease role+binding, config, secret, daemonset: {}", docs.len());
    // The shipped agent.yaml expects cluster type cloud-standard in prod.
    env.push(&docs, &["--cluster-type", "cloud-standard", "--environment", "prod"]);

    let config = docs.iter().find(|d| d.contains("kind: ConfigMap")).expect("agent ConfigMap");
    let cm: Value = serde_yaml_ng::from_str(config).unwrap();
    let agent_yaml = cm["data"]["agent.yaml"].as_str().expect("data.agent.yaml");
    let config_path = env.dir.path().join("agent.yaml");
    std::fs::write(&config_path, agent_yaml).unwrap();

    // 1. The install is accepted: drover applies every object of deploy/kubernetes
    //    (this is what `kubectl apply -k` does before the agent's first start).
    let out = env.agent(&["--expect-cluster-type", "cloud-standard", "--expect-environment", "prod"]);
    let attempt = env.last_attempt();
    assert_eq!(out.code, 0, "{}\n{attempt:#}", out.stderr);
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    for o in attempt["objects"].as_array().expect("objects") {
        assert_eq!(o["action"], "created", "{o:#}");
    }

    // 2. The shipped config itself (leader election in drover-system, kube target,
    //    expectations, limits) runs, with only the site values overridden by flags.
    // As the DaemonSet runs it: POD_NAMESPACE=drover-system (the downward API).
    let in_drover_system = Agent { namespace: Some("drover-system".into()), ..Agent::default() };
    let out = env.agent_in(&in_drover_system, &["--config", config_path.to_str().unwrap()]);
    let attempt = env.last_attempt();
    assert_eq!(out.code, 0, "{}\n{attempt:#}", out.stderr);
    assert!(matches!(attempt["result"].as_str(), Some("Applied" | "Unchanged")), "{attempt:#}");
    let status = env.status();
    assert_eq!(status["inventory"], docs.len(), "{status:#}");

    let ds = env.kubectl_ok(&["get", "daemonset", "drover-agent", "-n", "drover-system", "-o", "json"]).json();
    let pod = &ds["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(c["resources"]["requests"]["memory"], "16Mi");
    assert!(c["resources"]["limits"]["memory"].is_string(), "a memory limit is set");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(pod["tolerations"][0]["operator"], "Exists");
    assert_eq!(ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"], "true");
    // The agent took the Lease named in the shipped config (and released it on exit).
    let lease = env.kubectl_ok(&["get", "lease", "drover-agent", "-n", "drover-system", "-o", "json"]).json();
    assert!(lease["spec"]["acquireTime"].is_string(), "{lease:#}");
    assert!(lease["spec"]["renewTime"].is_string(), "{lease:#}");

    // 3. The shipped config reports (docs/fleet.md): the cluster name comes from the
    //    ConfigMap and the report lands next to the source, read back as an operator
    //    would; the report credentials are their own optional docker-config Secret,
    //    mounted where `reportDockerConfig` points (not the trust keys, not the source's).
    let cfg: Value = serde_yaml_ng::from_str(agent_yaml).unwrap();
    let cluster_name = cfg["clusterName"].as_str().expect("clusterName in the shipped agent.yaml");
    let reports = env.reg.reference("fleet/drover-reports");
    // Its report is signed with the cluster's report key, kept in a Secret of the agent's
    // namespace (the shipped Role lets it get and create exactly that).
    let secret = env.get_in("drover-system", "secret", "drover-report-key").unwrap_or_else(|| panic!("no report key Secret:\n{}", out.stderr));
    assert!(secret["data"]["key.pem"].is_string(), "{secret:#}");
    let (key, public) = (env.dir.path().join("keys/drover.key"), env.dir.path().join("keys/drover.pub"));
    let tag = format!("cloud-standard.{cluster_name}");
    let enroll = [
        "-o", "json", "fleet", "enroll", "--reports", &reports, "--plain-http", "--key", key.to_str().unwrap(), "--cluster", &tag,
    ];
    let out = drover_tests::run("drover", &enroll, &[("DROVER_KEY_PASSWORD", "")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = drover_tests::run(
        "drover",
        &["-o", "json", "fleet", "status", "--reports", &reports, "--plain-http", "--stale", "1h", "--trust-key", public.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let fleet = out.json();
    let reported = fleet["clusters"].as_array().expect("clusters");
    assert_eq!(reported.len(), 1, "one cluster reported: {fleet:#}");
    let r = &reported[0];
    assert_eq!(r["clusterName"], cluster_name, "{r:#}");
    assert_eq!(r["clusterType"], "cloud-standard", "{r:#}");
    assert_eq!(r["environment"], "prod", "{r:#}");
    assert_eq!(r["appliedDigest"], status["appliedDigest"], "{r:#}");
    assert_eq!(r["lastResult"], attempt["result"], "{r:#}");
    assert!(r["untrusted"].is_null(), "the enrolled cluster's signed report counts: {r:#}");
    let credentials = Path::new(cfg["reportDockerConfig"].as_str().expect("reportDockerConfig in the shipped agent.yaml"));
    let dir = credentials.parent().unwrap().to_str().unwrap();
    let mount = c["volumeMounts"].as_array().unwrap().iter().find(|m| m["mountPath"] == dir).unwrap_or_else(|| panic!("nothing mounted at {dir}: {c:#}"));
    assert_eq!(mount["readOnly"], true, "{mount:#}");
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == mount["name"]).expect("the mounted volume");
    let secret = &volume["secret"];
    let trust = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "trust-keys").expect("trust-keys volume");
    assert!(secret["secretName"].is_string() && secret["secretName"] != trust["secret"]["secretName"], "a Secret of its own: {volume:#}");
    assert_eq!(secret["optional"], true, "the agent starts (and reports anonymously) before the Secret exists: {volume:#}");
    assert_eq!(secret["items"][0]["key"], ".dockerconfigjson", "`kubectl create secret docker-registry` key: {volume:#}");
    assert_eq!(secret["items"][0]["path"], credentials.file_name().unwrap().to_str().unwrap(), "{volume:#}");

    // A typo in the config is refused at start, naming the field, with nothing applied.
    std::fs::write(&config_path, format!("{agent_yaml}maxPruneRatoi: 0.9\n")).unwrap();
    let bad = env.agent(&["--config", config_path.to_str().unwrap()]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("maxPruneRatoi") && bad.stderr.contains("agent.yaml"), "{}", bad.stderr);
}
