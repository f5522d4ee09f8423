//! `deploy/kubernetes` (the agent's install, and its tenants' namespaces and RBAC in
//! `tenants/`) is accepted by the API server, and the agent configuration it ships works:
//! the kustomizations' resources are bundled with the real `drover push` and applied by
//! the real `drover-agent --target kube` (drover's own loader, not kubectl), then the
//! shipped `agent.yaml` — a platform source and two tenant sources — runs the agent,
//! leader election and fleet reports included, with only the site-specific values
//! (registry host, key files, state dir) replaced: each source applies its own bundle,
//! the tenants as their deployer service accounts.

mod kube_support;

use std::path::Path;

use kube_support::{Agent, Env};
use serde_json::Value;

scenarios!(deploy_kubernetes_is_accepted_and_its_config_runs);

fn deploy_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// The documents of every resource the kustomization of `dir` lists, in its order.
fn kustomization_documents(dir: &Path) -> Vec<String> {
    let k: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap()).unwrap();
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
    let k: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(deploy_dir().join("kustomization.yaml")).unwrap()).unwrap();
    assert_eq!(k["namespace"], "drover-system");
    let mut docs = kustomization_documents(&deploy_dir());
    assert!(docs.len() >= 9, "namespace, SA, RBAC, lease role+binding, config, secret, daemonset: {}", docs.len());
    let tenants = kustomization_documents(&deploy_dir().join("tenants"));
    assert!(tenants.len() >= 12, "two tenants: namespace, SA, Role, RoleBinding, impersonation Role and binding: {}", tenants.len());
    docs.extend(tenants);
    let config = docs.iter().find(|d| d.contains("kind: ConfigMap")).expect("agent ConfigMap");
    let cm: Value = serde_yaml_ng::from_str(config).unwrap();
    let agent_yaml = cm["data"]["agent.yaml"].as_str().expect("data.agent.yaml").to_string();
    let config_path = env.dir.path().join("agent.yaml");
    let cfg: Value = serde_yaml_ng::from_str(&agent_yaml).unwrap();
    let sources = cfg["sources"].as_array().expect("sources in the shipped agent.yaml");
    let names: Vec<&str> = sources.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["platform", "team-a", "team-b"]);
    let site_ref = |s: &Value| s["source"].as_str().unwrap().replace("registry.example.com", &env.reg.addr);
    // The platform's channel carries the install (the shipped agent.yaml expects cluster
    // type cloud-standard in prod), signed with the scenario's key.
    let platform_ref = site_ref(&sources[0]);
    env.push_to(&platform_ref, &docs, &["--cluster-type", "cloud-standard", "--environment", "prod"]);

    // 1. The install is accepted: drover applies every object of deploy/kubernetes
    //    (this is what `kubectl apply -k` does before the agent's first start).
    let platform = Agent { source: Some(platform_ref.clone()), ..Agent::default() };
    let out = env.agent_in(&platform, &["--expect-cluster-type", "cloud-standard", "--expect-environment", "prod"]);
    let attempt = env.last_attempt_in(&platform);
    assert_eq!(out.code, 0, "{}\n{attempt:#}", out.stderr);
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    for o in attempt["objects"].as_array().expect("objects") {
        assert_eq!(o["action"], "created", "{o:#}");
    }

    // 2. The shipped config itself (leader election in drover-system, kube target,
    //    expectations, limits, three sources) runs, with only the site values replaced:
    //    the registry host, the key files (one pair per source), the state directory.
    let keys = env.path("site-keys");
    std::fs::create_dir_all(&keys).unwrap();
    let mut site = agent_yaml.replace("registry.example.com", &env.reg.addr).replace("/etc/drover/keys/", &format!("{}/", keys.display()));
    site = format!("plainHttp: true\n{site}");
    std::fs::write(&config_path, &site).unwrap();
    std::fs::copy(env.path("keys/drover.pub"), keys.join("platform.pub")).unwrap();
    for s in &sources[1..] {
        // A tenant: its own key pair; its bundle a ConfigMap in its namespace.
        let name = s["name"].as_str().unwrap();
        let (private, public) = env.keygen(name);
        std::fs::copy(&public, keys.join(format!("{name}.pub"))).unwrap();
        let ns = s["allowedNamespaces"][0].as_str().unwrap();
        let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-settings\n  namespace: {ns}\ndata:\n  owner: {name}\n");
        env.push_signed(&site_ref(s), &[cm], &private, &["--cluster-type", "cloud-standard", "--environment", "prod"]);
    }
    // As the DaemonSet runs it: POD_NAMESPACE=drover-system (the downward API).
    let state = env.path("state");
    let out = drover_tests::run(
        "drover-agent",
        &["run", "--once", "--config", config_path.to_str().unwrap(), "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0"],
        &[("KUBECONFIG", env.cluster.kubeconfig().to_str().unwrap()), ("POD_NAMESPACE", "drover-system")],
    );
    let status = env.status();
    assert_eq!(out.code, 0, "{}\n{status:#}", out.stderr);
    let source = |name: &str| status["sources"].as_array().unwrap().iter().find(|s| s["name"] == name).cloned().unwrap_or_else(|| panic!("{name}: {status:#}"));
    let platform = source("platform");
    let attempt = platform["lastAttempt"].clone();
    assert!(matches!(attempt["result"].as_str(), Some("Applied" | "Unchanged")), "{platform:#}");
    assert_eq!(platform["inventory"], docs.len(), "{platform:#}");
    for tenant in ["team-a", "team-b"] {
        let t = source(tenant);
        assert_eq!(t["lastAttempt"]["result"], "Applied", "{t:#}");
        let cm = env.get_in(tenant, "configmap", &format!("{tenant}-settings")).unwrap_or_else(|| panic!("{tenant}'s ConfigMap"));
        assert_eq!(cm["data"]["owner"], tenant);
    }
    assert!(
        out.stderr.contains("as system:serviceaccount:team-a:drover-deployer"),
        "team-a applies as its deployer:\n{}",
        out.stderr
    );

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
    assert_eq!(r["appliedDigest"], platform["appliedDigest"], "{r:#}");
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

    // A typo in the config is refused at start, naming the field (and the entry), with
    // nothing applied.
    std::fs::write(&config_path, site.replace("fieldManager: drover", "maxPruneRatoi: 0.9")).unwrap();
    let run_bad = || drover_tests::run("drover-agent", &["run", "--once", "--config", config_path.to_str().unwrap(), "--state-dir", state.to_str().unwrap()], &[]);
    let bad = run_bad();
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("maxPruneRatoi") && bad.stderr.contains("agent.yaml"), "{}", bad.stderr);
    std::fs::write(&config_path, site.replace("    interval: 1m", "    intervall: 1m")).unwrap();
    let bad = run_bad();
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("intervall") && bad.stderr.contains("agent.yaml") && bad.stderr.contains("sources[2] (team-b)"), "{}", bad.stderr);
}
