//! One object cannot stop the agent (issue 36). A tenant with write access to one
//! namespace — no registry, no keys — writes drover's objects there the way any client
//! may: a PUT that sets `metadata.managedFields` (a real API server checks only an
//! entry's operation, fieldsType, manager and subresource, and decodes `fieldsV1` up to
//! 10,000 levels), or marks a ConfigMap `immutable`. Every other object and every later
//! stage must go on: another namespace's drift corrected, a new bundle applied, a dropped
//! object pruned, in the same run; what failed is named, and status is never Healthy
//! beside it. Real binaries against the FAKE API server (or a real cluster).

mod kube_support;

use kube_support::Env;
use serde_json::{json, Value};

scenarios!(
    a_managed_fields_entry_200_deep_stops_nothing,
    a_managed_fields_entry_9990_deep_stops_nothing,
    report_mode_names_a_tenants_drift,
    report_mode_names_an_object_it_cannot_compare,
    a_secret_the_agent_reads_is_never_logged,
    an_unlabelled_object_with_a_deep_entry_is_adopted
);

/// A managedFields entry of the tenant's own, its `fieldsV1` nested `depth` deep, as JSON
/// text (never a value here: dropping or copying one 10,000 deep recurses that deep).
fn deep_entry(depth: usize) -> String {
    let mut fields = String::with_capacity(depth * 12);
    for i in 0..depth {
        fields.push_str(&format!("{{\"f:x{i}\":"));
    }
    fields.push_str("{}");
    fields.push_str(&"}".repeat(depth));
    format!(r#"{{"manager":"tenant-tool","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{fields}}}"#)
}

/// Stands for [`deep_entry`] in the edited object until it is written out.
const DEEP: &str = "__deep_entry__";

/// The tenant's write: GET the object (with its managed fields), let `edit` change it
/// (a [`DEEP`] string in it is replaced by `deep`), PUT it back as is with `kubectl
/// replace --raw` (a plain client's update).
fn tenant_put(env: &Env, ns: &str, plural: &str, name: &str, deep: Option<String>, edit: impl FnOnce(&mut Value)) {
    let out = env.kubectl(&["get", plural, name, "-n", ns, "-o", "json", "--show-managed-fields"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut obj: Value = serde_json::from_str(&out.stdout).unwrap();
    edit(&mut obj);
    let mut text = serde_json::to_string(&obj).unwrap();
    if let Some(d) = deep {
        text = text.replace(&format!("{DEEP:?}"), &d);
    }
    let file = env.path(&format!("put-{plural}-{name}.json"));
    std::fs::write(&file, text).unwrap();
    let path = format!("/api/v1/namespaces/{ns}/{plural}/{name}");
    let out = env.kubectl(&["replace", "--raw", &path, "-f", file.to_str().unwrap()], "");
    assert_eq!(out.code, 0, "the API server takes the tenant's write: {}", out.stderr);
}

/// Adds [`DEEP`] to an object's managedFields.
fn with_deep(o: &mut Value) {
    o["metadata"]["managedFields"].as_array_mut().unwrap().push(json!(DEEP));
}

fn configmap_in(ns: &str, name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  value: {value:?}\n")
}

fn namespace(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
}

fn value_of(env: &Env, ns: &str, name: &str) -> Option<String> {
    env.get_in(ns, "configmap", name).map(|c| c["data"]["value"].as_str().unwrap_or_default().to_string())
}

fn deep_entry_stops_nothing(env: &Env, depth: usize) {
    let (tenant, other) = (env.ns.clone(), env.extra_namespace("other"));
    let v1 = [
        namespace(&tenant),
        namespace(&other),
        configmap_in(&tenant, "tenant-deep", "good"),
        configmap_in(&tenant, "tenant-frozen", "good"),
        configmap_in(&other, "admin", "1"),
        configmap_in(&other, "dropped", "1"),
    ];
    env.push(&v1, &[]);
    env.agent_ok(&[]);

    // An admin's drift in the other namespace, and the tenant's two edits.
    env.kubectl_ok(&["patch", "configmap", "admin", "-n", &other, "--type", "merge", "-p", r#"{"data":{"value":"drifted"}}"#]);
    tenant_put(env, &tenant, "configmaps", "tenant-deep", Some(deep_entry(depth)), |o| {
        o["data"]["value"] = json!("evil");
        with_deep(o);
    });
    let stored = env.kubectl(&["get", "configmap", "tenant-deep", "-n", &tenant, "-o", "json", "--show-managed-fields"], "");
    assert!(stored.stdout.contains("tenant-tool"), "the API server kept the tenant's entry");
    tenant_put(env, &tenant, "configmaps", "tenant-frozen", None, |o| {
        o["data"]["value"] = json!("evil");
        o["immutable"] = json!(true);
    });

    // A new bundle: one object more, one dropped.
    let mut v2: Vec<String> = v1.iter().filter(|d| !d.contains("name: dropped")).cloned().collect();
    v2.push(configmap_in(&other, "fresh", "1"));
    let digest = env.push(&v2, &[]);
    let out = env.agent(&[]);
    let attempt = env.last_attempt();
    assert_eq!(out.code, 1, "an object failed: the run says so\n{}\n{attempt:#}", out.stderr);
    assert!(!out.stderr.contains("recursion limit"), "{}", out.stderr);

    // Everything else went on, in this one run.
    assert_eq!(attempt["digest"], digest.as_str(), "{attempt:#}");
    assert_eq!(value_of(env, &other, "admin").as_deref(), Some("1"), "another namespace's drift is corrected");
    assert_eq!(value_of(env, &other, "fresh").as_deref(), Some("1"), "the new bundle is applied");
    assert_eq!(value_of(env, &other, "dropped"), None, "the dropped object is pruned");
    assert_eq!(Env::action(&attempt, "ConfigMap", "dropped").0, "deleted", "{attempt:#}");
    assert_eq!(attempt["pruned"], 1, "{attempt:#}");
    // The deep entry is read (the server stores it, so drover reads it) and the tenant's
    // edit of a drover field is corrected like any other.
    assert_eq!(Env::action(&attempt, "ConfigMap", "tenant-deep").0, "configured", "{attempt:#}");
    assert_eq!(value_of(env, &tenant, "tenant-deep").as_deref(), Some("good"));
    // The object the server refuses to change is that object's failure, named.
    let (action, message) = Env::action(&attempt, "ConfigMap", "tenant-frozen");
    assert_eq!(action, "failed", "{attempt:#}");
    assert!(message.contains("field is immutable when `immutable` is set"), "{message}");
    let reason = attempt["result"].as_str().unwrap().to_string() + " " + attempt["reason"].as_str().unwrap();
    assert!(reason.starts_with("Failed") && reason.contains("1 object(s) failed") && reason.contains(&format!("ConfigMap {tenant}/tenant-frozen")), "{reason}");

    // Status: never Healthy beside a failed object; the applied bundle is the new one.
    let st = env.status();
    assert_eq!(st["appliedDigest"], digest.as_str(), "{st:#}");
    assert_eq!(st["health"], "Degraded", "{st:#}");
    assert_eq!(attempt["unhealthy"][0]["object"]["name"], "tenant-frozen", "{attempt:#}");

    // The next run: the rest is unchanged, the frozen object still named.
    let out = env.agent(&[]);
    assert_eq!(out.code, 1);
    let again = env.last_attempt();
    assert_eq!(Env::action(&again, "ConfigMap", "tenant-deep").0, "unchanged", "the deep entry costs no write: {again:#}");
    assert_eq!(Env::action(&again, "ConfigMap", "tenant-frozen").0, "failed");
}

fn a_managed_fields_entry_200_deep_stops_nothing(env: &Env) {
    deep_entry_stops_nothing(env, 200);
}

fn a_managed_fields_entry_9990_deep_stops_nothing(env: &Env) {
    deep_entry_stops_nothing(env, 9_990);
}

/// `--drift report`: the tenant's edit behind a deep entry is reported drifted, with the
/// field; nothing is changed.
fn report_mode_names_a_tenants_drift(env: &Env) {
    let tenant = env.ns.clone();
    env.push(&[namespace(&tenant), configmap_in(&tenant, "tenant-deep", "good"), configmap_in(&tenant, "plain", "1")], &[]);
    env.agent_ok(&["--drift", "report"]);
    tenant_put(env, &tenant, "configmaps", "tenant-deep", Some(deep_entry(9_990)), |o| {
        o["data"]["value"] = json!("evil");
        with_deep(o);
    });
    let out = env.agent_ok(&["--drift", "report"]);
    let st = env.status();
    let drifted = st["drifted"].as_array().cloned().unwrap_or_default();
    assert_eq!(drifted.len(), 1, "{st:#}\n{}", out.stderr);
    assert_eq!(drifted[0]["object"]["name"], "tenant-deep");
    assert_eq!(drifted[0]["drift"], "changed", "{st:#}");
    assert_eq!(drifted[0]["fields"], json!(["data.value"]), "{st:#}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("ConfigMap {tenant}/tenant-deep (v1): changed data.value")), "{reason}");
    assert_eq!(value_of(env, &tenant, "tenant-deep").as_deref(), Some("evil"), "report mode changes nothing");
}

/// A managedFields entry of the tenant's own naming 100,000 fields under `data` (about
/// 1.3 MB of JSON, under etcd's limit): more than the compare holds in memory.
fn wide_entry() -> String {
    let fields: Vec<String> = (0..100_000).map(|i| format!("\"f:{i:x}\":{{}}")).collect();
    format!(r#"{{"manager":"tenant-wide","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{{}}}}}}}"#, fields.join(","))
}

/// `--drift report`: an object too large to compare, edited by the tenant, is reported
/// `unknown` with the reason (before: dropped from the report, "last attempt: Unchanged"
/// and a WARN line only); nothing is changed, the other object is still judged.
fn report_mode_names_an_object_it_cannot_compare(env: &Env) {
    let tenant = env.ns.clone();
    env.push(&[namespace(&tenant), configmap_in(&tenant, "tenant-wide", "good"), configmap_in(&tenant, "plain", "1")], &[]);
    env.agent_ok(&["--drift", "report"]);
    tenant_put(env, &tenant, "configmaps", "tenant-wide", Some(wide_entry()), |o| {
        o["data"]["value"] = json!("evil");
        with_deep(o);
    });
    env.kubectl_ok(&["patch", "configmap", "plain", "-n", &tenant, "--type", "merge", "-p", r#"{"data":{"value":"2"}}"#]);
    let out = env.agent_ok(&["--drift", "report"]);
    let st = env.status();
    let drifted = st["drifted"].as_array().cloned().unwrap_or_default();
    assert_eq!(drifted.len(), 2, "{st:#}\n{}", out.stderr);
    let wide = drifted.iter().find(|d| d["object"]["name"] == "tenant-wide").unwrap_or_else(|| panic!("the wide object is reported: {st:#}"));
    assert_eq!(wide["drift"], "unknown", "{st:#}");
    let why = wide["reason"].as_str().unwrap_or_default();
    assert!(why.contains("more than 8 MiB in memory"), "the reason says why: {why}");
    let plain = drifted.iter().find(|d| d["object"]["name"] == "plain").unwrap_or_else(|| panic!("{st:#}"));
    assert_eq!(plain["fields"], json!(["data.value"]), "{st:#}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("ConfigMap {tenant}/tenant-wide (v1): unknown (")), "{reason}");
    assert_eq!(value_of(env, &tenant, "tenant-wide").as_deref(), Some("evil"), "report mode changes nothing");
    assert_eq!(value_of(env, &tenant, "plain").as_deref(), Some("2"), "report mode changes nothing");
}

/// A Secret drover manages, made hostile by the tenant (a deep entry: the kube client's
/// decoder gives up on it and used to log the whole response at WARN): its data is read
/// and compared, and appears in no log line, whatever the log level.
fn a_secret_the_agent_reads_is_never_logged(env: &Env) {
    let tenant = env.ns.clone();
    let secret = format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: {tenant}\nstringData:\n  password: hunter2-in-the-bundle\n");
    env.push(&[namespace(&tenant), secret], &[]);
    env.agent_ok(&[]);
    // The tenant's own value, and an entry the kube client cannot decode.
    let theirs = "dGVuYW50LXNlY3JldC12YWx1ZQ=="; // base64 of "tenant-secret-value"
    tenant_put(env, &tenant, "secrets", "creds", Some(deep_entry(300)), |o| {
        o["data"]["password"] = json!(theirs);
        with_deep(o);
    });
    for level in ["info", "debug"] {
        let out = drover_tests::run(
            "drover-agent",
            &[
                "run", "--once", "--target", "kube", "--source", &env.reference, "--plain-http", "--trust-key", env.path("keys/drover.pub").to_str().unwrap(),
                "--state-dir", env.path("state").to_str().unwrap(), "--listen", "127.0.0.1:0", "--resync", "0s",
            ],
            &[("KUBECONFIG", env.cluster.kubeconfig().to_str().unwrap()), ("POD_NAMESPACE", &tenant), ("DROVER_LOG", level)],
        );
        for secret in [theirs, "tenant-secret-value", "hunter2-in-the-bundle", "aHVudGVyMi1pbi10aGUtYnVuZGxl"] {
            let line = out.stderr.lines().find(|l| l.contains(secret));
            assert!(line.is_none(), "DROVER_LOG={level}: a log line holds the Secret's data: {}", line.unwrap_or_default());
        }
        assert_eq!(out.code, 0, "DROVER_LOG={level}: {}", out.stderr);
    }
    let s = env.get("secret", "creds").unwrap();
    assert_eq!(s["data"]["password"], "aHVudGVyMi1pbi10aGUtYnVuZGxl", "the bundle's value is back");
}

/// An object someone made without drover's label (kubectl's client-side apply, a field
/// the bundle does not set) that a tenant then gave a managedFields entry 200 deep,
/// named in a new bundle: the LIST does not find it, so the first apply is sent without
/// a GET and its `200` answer is what drover reads (issues 32 and 36 together). It is
/// read within bounds, kubectl's fields are folded into drover's entry and the apply
/// repeated: `adopted`, kubectl's extra field gone, then unchanged.
fn an_unlabelled_object_with_a_deep_entry_is_adopted(env: &Env) {
    let ns = env.ns.clone();
    env.push(&[namespace(&ns)], &[]);
    env.agent_ok(&[]);
    let by_hand = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: squatter\n  namespace: {ns}\ndata:\n  value: evil\n  extra: kubectls\n");
    let out = env.kubectl(&["apply", "-f", "-"], &by_hand);
    assert_eq!(out.code, 0, "{}", out.stderr);
    tenant_put(env, &ns, "configmaps", "squatter", Some(deep_entry(200)), with_deep);

    env.push(&[namespace(&ns), configmap_in(&ns, "squatter", "good")], &[]);
    let out = env.agent(&[]);
    let attempt = env.last_attempt();
    assert_eq!(out.code, 0, "{}\n{attempt:#}", out.stderr);
    assert_eq!(Env::action(&attempt, "ConfigMap", "squatter").0, "adopted", "{attempt:#}");
    let cm = env.get_in(&ns, "configmap", "squatter").unwrap();
    assert_eq!(cm["data"], json!({"value": "good"}), "kubectl's field the bundle does not set is removed");

    env.agent_ok(&[]);
    assert_eq!(Env::action(&env.last_attempt(), "ConfigMap", "squatter").0, "unchanged");
}
