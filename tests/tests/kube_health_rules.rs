//! Health rules in CEL end to end on the kube target (docs/kubernetes.md, "Health rules"):
//! a custom resource whose controller writes `status.phase` is judged by the bundle's rule
//! (`drover push --health FILE`): Progressing without a status, Healthy once Running,
//! Degraded naming the rule when Failed; a rule reading a missing field is not Healthy and
//! names the error; the agent's own `--health-checks` cover kinds the bundle has no rule
//! for, and the bundle's rule wins. A rule that does not compile is refused by `drover
//! push --health` (nothing pushed), by the agent at start (`--health-checks`) and, in a
//! signed bundle made by another tool, before anything is applied.

mod kube_support;

use std::collections::BTreeMap;

use drover_proto::bundle::{assemble, BundleMeta};
use drover_proto::health::HealthRule;
use drover_proto::object::ObjectRef;
use drover_proto::registry::{RegistryClient, RegistryOptions};
use drover_proto::{Reference, Repo};
use drover_tests::run;
use kube_support::Env;

scenarios!(a_custom_resource_follows_its_rule, a_rule_that_does_not_compile_is_refused, an_older_agent_refuses_a_bundle_for_a_newer_one);

/// The Database CRD of this scenario's group: a status subresource, as controllers use.
fn crd(env: &Env) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: databases.{g}\nspec:\n  group: {g}\n  scope: Namespaced\n  names:\n    plural: databases\n    singular: database\n    kind: Database\n    listKind: DatabaseList\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    subresources:\n      status: {{}}\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            x-kubernetes-preserve-unknown-fields: true\n          status:\n            type: object\n            x-kubernetes-preserve-unknown-fields: true\n",
        g = env.group
    )
}

fn database(env: &Env, name: &str) -> String {
    format!("apiVersion: {}/v1\nkind: Database\nmetadata:\n  name: {name}\n  namespace: {}\nspec:\n  engine: postgres\n", env.group, env.ns)
}

/// Writes `rules` (YAML) to a file in the scenario's directory.
fn rules_file(env: &Env, name: &str, rules: &str) -> String {
    let p = env.path(name);
    std::fs::write(&p, rules).unwrap();
    p.display().to_string()
}

/// What a controller does: writes the Database's status through its status subresource.
fn set_phase(env: &Env, name: &str, status: &str) {
    let patch = format!("{{\"status\": {status}}}");
    env.kubectl_ok(&["patch", "database", name, "-n", &env.ns, "--subresource=status", "--type=merge", "-p", &patch]);
}

/// True when neither the scenario's namespace nor its CRD exist.
fn nothing_applied(env: &Env) -> bool {
    env.get_in("default", "customresourcedefinition", &format!("databases.{}", env.group)).is_none() && env.get_in("default", "namespace", &env.ns).is_none()
}

/// The unhealthy entry of the attempt for `kind`/`name`: (health, message).
fn unhealthy(attempt: &serde_json::Value, kind: &str, name: &str) -> (String, String) {
    let u = attempt["unhealthy"]
        .as_array()
        .and_then(|a| a.iter().find(|u| u["object"]["kind"] == kind && u["object"]["name"] == name))
        .unwrap_or_else(|| panic!("{kind} {name} is not unhealthy in {attempt:#}"));
    (u["health"].as_str().unwrap().to_string(), u["message"].as_str().unwrap().to_string())
}

fn a_custom_resource_follows_its_rule(env: &Env) {
    let phase_rule = format!(
        "- apiVersion: {}/v1\n  kind: Database\n  current: status.phase == 'Running'\n  failed: status.phase == 'Failed'\n",
        env.group
    );
    let rules = rules_file(env, "phase.yaml", &phase_rule);
    let docs = [env.namespace(), crd(env), database(env, "main")];
    env.push(&docs, &["--health", &rules]);

    // No status yet: not ready. Sampled once (0s), it is Progressing, saying why.
    env.agent_ok(&["--health-timeout", "0s"]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["health"], "Progressing", "{attempt:#}");
    let (health, message) = unhealthy(&attempt, "Database", "main");
    assert_eq!(health, "Progressing");
    assert!(message.contains("no status yet") && message.contains("Database"), "{message}");

    // The controller says Running: Healthy.
    set_phase(env, "main", r#"{"phase": "Running"}"#);
    env.agent_ok(&["--health-timeout", "10s"]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["health"], "Healthy", "{attempt:#}");
    assert_eq!(env.status()["health"], "Healthy");

    // Failed: Degraded at once (not after the timeout), naming the rule and the expression.
    set_phase(env, "main", r#"{"phase": "Failed"}"#);
    let started = std::time::Instant::now();
    env.agent_ok(&["--health-timeout", "30s"]);
    assert!(started.elapsed().as_secs() < 25, "a failed rule does not wait for the timeout ({:?})", started.elapsed());
    let attempt = env.last_attempt();
    assert_eq!(attempt["health"], "Degraded", "{attempt:#}");
    let (_, message) = unhealthy(&attempt, "Database", "main");
    assert!(message.contains(&format!("health rule Database ({}/v1)", env.group)) && message.contains("failed `status.phase == 'Failed'` is true"), "{message}");
    assert!(attempt["reason"].as_str().unwrap().contains("status.phase == 'Failed'"), "{attempt:#}");

    // A rule reading a field the status does not have: never Healthy, the error named.
    set_phase(env, "main", r#"{"phase": "Running"}"#);
    let missing = rules_file(env, "missing.yaml", &format!("- apiVersion: {}/v1\n  kind: Database\n  current: status.ready == true\n", env.group));
    env.push(&docs, &["--health", &missing]);
    env.agent_ok(&["--health-timeout", "2s"]);
    let attempt = env.last_attempt();
    assert_ne!(attempt["health"], "Healthy", "{attempt:#}");
    let (health, message) = unhealthy(&attempt, "Database", "main");
    assert_eq!(health, "Degraded", "not ready at the end of the timeout");
    assert!(message.contains("current `status.ready == true` cannot be evaluated") && message.contains("No such key: ready"), "{message}");

    // A bundle without rules: the agent's own healthChecks judge the kind (installed
    // outside drover, say); a bundle's rule for the same kind wins over them.
    let own = rules_file(env, "own.yaml", &format!("- apiVersion: {}/v1\n  kind: Database\n  current: status.phase == 'Ready'\n", env.group));
    env.push(&docs, &[]);
    env.agent_ok(&["--health-timeout", "0s", "--health-checks", &own]);
    let attempt = env.last_attempt();
    let (_, message) = unhealthy(&attempt, "Database", "main");
    assert!(message.contains("current `status.phase == 'Ready'` is false"), "the agent's rule judges: {message}");
    env.push(&docs, &["--health", &rules]);
    env.agent_ok(&["--health-timeout", "0s", "--health-checks", &own]);
    assert_eq!(env.last_attempt()["health"], "Healthy", "the bundle's rule wins: {:#}", env.last_attempt());
}

fn a_rule_that_does_not_compile_is_refused(env: &Env) {
    let bad = format!("- apiVersion: {}/v1\n  kind: Database\n  current: status.phase ==\n", env.group);
    let bad = rules_file(env, "bad.yaml", &bad);
    let docs = [env.namespace(), crd(env), database(env, "main")];

    // drover push refuses it, naming the file, the rule and the expression; nothing is pushed.
    let input = env.path("bad-input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("all.yaml"), docs.join("---\n")).unwrap();
    let key = env.path("keys/drover.key");
    let out = run(
        "drover",
        &["push", input.to_str().unwrap(), &env.reference, "--plain-http", "--key", key.to_str().unwrap(), "--health", &bad],
        &[("DROVER_KEY_PASSWORD", "")],
    );
    assert_ne!(out.code, 0, "push must refuse\n{}", out.stdout);
    assert!(
        out.stderr.contains("bad.yaml") && out.stderr.contains(&format!("Database ({}/v1)", env.group)) && out.stderr.contains("does not compile"),
        "{}",
        out.stderr
    );
    let inspect = run("drover", &["inspect", &env.reference, "--plain-http"], &[]);
    assert_ne!(inspect.code, 0, "nothing was pushed: {}", inspect.stdout);

    // The agent refuses its own bad rule at start, before anything is applied.
    env.push(&docs, &[]);
    let out = env.agent(&["--health-checks", &bad]);
    assert_eq!(out.code, 2, "a configuration error\n{}", out.stderr);
    assert!(out.stderr.contains("healthChecks") && out.stderr.contains("does not compile"), "{}", out.stderr);
    assert!(nothing_applied(env), "nothing applied");

    // A signed bundle made by another tool with a rule that does not compile: refused
    // before anything is applied (reason health-rule), the target unchanged.
    let rule = HealthRule {
        api_version: format!("{}/v1", env.group),
        kind: "Database".into(),
        current: "status.phase ==".into(),
        failed: None,
        in_progress: None,
    };
    let mut objects = BTreeMap::new();
    for d in &docs {
        let v = drover_proto::bundle::parse_single_object(d.as_bytes()).unwrap();
        objects.insert(ObjectRef::from_value(&v).unwrap(), d.as_bytes().to_vec());
    }
    let meta = BundleMeta { sequence: 900, health_checks: vec![rule], ..Default::default() };
    let bundle = assemble(&objects, &meta);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let digest = rt.block_on(async {
        let client = RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() }).unwrap();
        let (repo, _) = Repo::open(&Reference::parse(&env.reference).unwrap(), &client, true).unwrap();
        repo.push_bundle(&bundle, &["prod"]).await.expect("push")
    });
    let by_digest = format!("{}@{digest}", env.reference.rsplit_once(':').unwrap().0);
    let pubkey = env.path("keys/drover.pub");
    for args in [
        vec!["sign", &by_digest, "--key", key.to_str().unwrap(), "--plain-http"],
        vec!["promote", &by_digest, "prod", "--key", key.to_str().unwrap(), "--trust-key", pubkey.to_str().unwrap(), "--plain-http"],
    ] {
        let out = run("drover", &args, &[("DROVER_KEY_PASSWORD", "")]);
        assert_eq!(out.code, 0, "drover {args:?}: {}", out.stderr);
    }
    let out = env.agent(&[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Rejected", "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains("health rule Database") && reason.contains("does not compile") && reason.contains("nothing was applied"), "{reason}");
    assert!(nothing_applied(env), "nothing applied");
}

fn an_older_agent_refuses_a_bundle_for_a_newer_one(env: &Env) {
    let docs = [env.namespace(), env.configmap("a", "1", &[])];
    let pushed = env.push_to(&env.reference, &docs, &["--min-agent-version", "99.1.0"]);
    let digest = pushed["digest"].as_str().unwrap();
    let inspect = run("drover", &["inspect", &format!("{}@{digest}", env.reference.rsplit_once(':').unwrap().0), "--plain-http", "-o", "json"], &[]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    assert!(inspect.stdout.contains("\"minAgentVersion\": \"99.1.0\""), "{}", inspect.stdout);
    let out = env.agent(&[]);
    assert_eq!(out.code, 1, "refused\n{}", out.stderr);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Rejected", "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(reason.contains("99.1.0") && reason.contains(&format!("this agent is {version}")) && reason.contains("nothing was applied"), "{reason}");
    assert!(env.get("configmap", "a").is_none() && env.get_in("default", "namespace", &env.ns).is_none(), "nothing applied");
    // The refusal is counted by its reason.
    let status = env.status();
    assert_eq!(status["lastAttempt"]["result"], "Rejected");
    assert!(out.stderr.contains("agent-too-old"), "the log names the reason: {}", out.stderr);
    // A bundle needing no more than this agent is applied.
    env.push(&docs, &["--min-agent-version", version]);
    env.agent_ok(&[]);
    assert!(env.get("configmap", "a").is_some());
}
