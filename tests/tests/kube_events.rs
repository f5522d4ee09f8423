//! Kubernetes Events from the agent, as an operator finds them: `kubectl get events` in
//! the agent's namespace after an apply (Applied, naming the sequence), after a refused
//! bundle (Rejected, naming the reason), and for a failure that repeats on every poll
//! (one Event with a series count, not one per poll). Real binaries, real registry, FAKE
//! API server or a real cluster; the RBAC the shipped install grants is exactly what the
//! agent needs to write them.

mod kube_support;

use std::process::Command;
use std::time::Duration;

use drover_tests::run;
use drover_tests::fakekube::ErrorRule;
use kube_support::{state_name, Cluster, Env};
use serde_json::Value;

scenarios!(
    applied_and_rejected_bundles_show_in_kubectl_get_events,
    a_failure_on_every_poll_is_one_event_with_a_series_count,
    the_shipped_rbac_is_what_the_agent_needs_for_its_events,
    drift_prune_refusal_and_hold_show_too,
    every_event_of_a_fresh_agent_regards_the_state_configmap_by_uid,
);

/// The Events of the agent's namespace (core/v1, as `kubectl get events` reads them),
/// those regarding the state ConfigMap of the scenario's source, oldest first.
fn agent_events(env: &Env) -> Vec<Value> {
    let list = env.kubectl_ok(&["get", "events", "-n", &env.ns, "-o", "json"]).json();
    let mut items: Vec<Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["involvedObject"]["name"] == state_name(&env.reference).as_str())
        .cloned()
        .collect();
    items.sort_by_key(|e| e["eventTime"].as_str().unwrap_or_default().to_string());
    items
}

fn with_reason<'a>(events: &'a [Value], reason: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["reason"] == reason).collect()
}

/// `drover push` without a key: a bundle the agent must refuse (`unsigned`).
fn push_unsigned(env: &Env, docs: &[String]) -> String {
    let input = env.dir.path().join("unsigned");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("all.yaml"), docs.join("---\n")).unwrap();
    let out = run("drover", &["push", input.to_str().unwrap(), &env.reference, "--plain-http", "--sequence", "99999", "-o", "json"], &[]);
    assert_eq!(out.code, 0, "push: {}", out.stderr);
    out.json()["digest"].as_str().unwrap().to_string()
}

fn applied_and_rejected_bundles_show_in_kubectl_get_events(env: &Env) {
    let pushed = env.push_to(&env.reference, &[env.namespace(), env.configmap("a", "1", &[])], &[]);
    let (digest, sequence) = (pushed["digest"].as_str().unwrap(), pushed["sequence"].as_u64().unwrap());
    env.agent_ok(&[]);

    let events = agent_events(env);
    let applied = with_reason(&events, "Applied");
    assert_eq!(applied.len(), 1, "one Applied Event: {events:#?}");
    let e = applied[0];
    let message = e["message"].as_str().unwrap();
    assert!(message.contains(&format!("sequence {sequence}")) && message.contains(digest), "{message}");
    assert_eq!(e["type"], "Normal");
    assert_eq!(e["involvedObject"]["kind"], "ConfigMap");
    assert_eq!(e["involvedObject"]["namespace"], env.ns.as_str());
    assert_eq!(e["reportingComponent"], "drover.dev/agent");
    // The same Event through events.k8s.io/v1 (what the agent wrote).
    let v1 = env.kubectl_ok(&["get", "events.v1.events.k8s.io", e["metadata"]["name"].as_str().unwrap(), "-n", &env.ns, "-o", "json"]).json();
    assert_eq!((v1["note"].as_str(), v1["regarding"]["name"].as_str()), (Some(message), e["involvedObject"]["name"].as_str()));
    assert_eq!(v1["action"], "Apply");
    // As an operator reads them: `kubectl get events` prints the server's event columns
    // (a real server and the fake both answer kubectl's Table request).
    let table = env.kubectl_ok(&["get", "events", "-n", &env.ns]).stdout;
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(header, ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], "{table}");
    let state_object = format!("configmap/{}", state_name(&env.reference));
    assert!(table.lines().any(|l| l.contains("Normal") && l.contains("Applied") && l.contains(&state_object) && l.contains(digest)), "{table}");

    // A resync that changes nothing adds nothing.
    env.agent_ok(&[]);
    assert_eq!(agent_events(env).len(), events.len(), "an unchanged resync records no Event");

    // A bundle nobody signed is refused: a Rejected Warning naming the reason.
    let unsigned = push_unsigned(env, &[env.namespace(), env.configmap("a", "2", &[])]);
    let out = env.agent(&[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let events = agent_events(env);
    let rejected = with_reason(&events, "Rejected");
    assert_eq!(rejected.len(), 1, "{events:#?}");
    let message = rejected[0]["message"].as_str().unwrap();
    assert!(message.contains(&unsigned) && message.contains("unsigned"), "{message}");
    assert_eq!(rejected[0]["type"], "Warning");
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "1", "nothing of the refused bundle applied");
}

/// SIGTERM (the agent writes its last series counts), then its exit code.
fn terminate(child: &mut std::process::Child) -> Option<i32> {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("agent did not exit within 20 s of SIGTERM");
}

fn a_failure_on_every_poll_is_one_event_with_a_series_count(env: &Env) {
    env.kubectl_apply(&env.namespace());
    // An unsigned bundle is fetched and refused on every poll (a signature may still
    // arrive), so every poll fails the same way.
    let digest = push_unsigned(env, &[env.configmap("a", "1", &[])]);
    if let Some(f) = env.cluster.fake_server() {
        f.reset_request_counts();
    }
    let port = drover_tests::free_port();
    let mut agent = env.agent_daemon(port, &["--interval", "200ms"]);
    // Enough polls: the agent's history says how many times it refused.
    let polls = kube_support::eventually(30, || {
        let page = kube_support::http_get(port, "/metrics")?;
        let line = page.lines().find(|l| l.starts_with("drover_polls_total{") && l.contains("Rejected"))?;
        let n: f64 = line.rsplit(' ').next()?.parse().ok()?;
        (n >= 6.0).then_some(n as i64)
    });
    let code = terminate(&mut agent);
    let polls = polls.expect("the agent refused the bundle on several polls");
    assert_eq!(code, Some(0));

    let events = agent_events(env);
    let rejected = with_reason(&events, "Rejected");
    assert_eq!(rejected.len(), 1, "one Event for {polls} refusals, not one per poll: {events:#?}");
    let e = rejected[0];
    assert!(e["message"].as_str().unwrap().contains(&digest), "{e:#}");
    let count = e["series"]["count"].as_i64().unwrap_or(0);
    assert!(count >= 2 && count <= polls, "series.count {count} for {polls} refusals: {e:#}");
    assert!(e["series"]["lastObservedTime"].is_string(), "{e:#}");
    if let Some(f) = env.cluster.fake_server() {
        use drover_tests::fakekube::Verb;
        let counts = f.request_counts();
        assert_eq!(counts.get(Verb::Create, "events.events.k8s.io"), 1, "{counts:?}");
        let patches = counts.get(Verb::Patch, "events.events.k8s.io");
        assert!(patches >= 1 && patches < (polls as u64) / 2, "the series is written on the 2nd refusal and at the end, not on every poll: {patches} PATCH for {polls} polls");
    }
}

/// A copy of the cluster's kubeconfig whose user acts as `who` (kubectl's `as:`): the
/// agent then has exactly that identity's rights.
fn kubeconfig_as(env: &Env, who: &str) -> std::path::PathBuf {
    let mut k: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(env.cluster.kubeconfig()).unwrap()).unwrap();
    let context = k["current-context"].as_str().unwrap().to_string();
    let user = k["contexts"].as_array().unwrap().iter().find(|c| c["name"] == context.as_str()).unwrap()["context"]["user"].clone();
    for u in k["users"].as_array_mut().unwrap() {
        if u["name"] == user {
            u["user"]["as"] = Value::from(who);
        }
    }
    let path = env.dir.path().join("kubeconfig-as-agent");
    std::fs::write(&path, serde_yaml_ng::to_string(&k).unwrap()).unwrap();
    path
}

/// `drover-agent run --target kube` as the scenario's agent with `kubeconfig`
/// (`--once` unless `extra` says `--interval`: then a long-running child).
fn agent_with(env: &Env, kubeconfig: &std::path::Path, extra: &[&str]) -> Command {
    let key = env.dir.path().join("keys/drover.pub");
    let state = env.dir.path().join("state-as-agent");
    let mut cmd = Command::new(drover_tests::bin("drover-agent"));
    cmd.args(["run", "--target", "kube", "--source", &env.reference, "--plain-http", "--trust-key", key.to_str().unwrap()])
        .args(["--state-dir", state.to_str().unwrap(), "--resync", "0s", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAMESPACE", &env.ns)
        .stdin(std::process::Stdio::null());
    cmd
}

fn the_shipped_rbac_is_what_the_agent_needs_for_its_events(env: &Env) {
    // deploy/kubernetes/state-role.yaml and its ServiceAccount, moved into this scenario's
    // namespace, without the wide ClusterRole: the agent may only keep its state there
    // (configmaps: get, create, patch) and record its Events. The bundle is one ConfigMap
    // of that namespace, which those rights also cover.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    let role = std::fs::read_to_string(dir.join("state-role.yaml")).unwrap().replace("drover-system", &env.ns);
    assert!(role.contains("events.k8s.io"), "{role}");
    let other = env.extra_namespace("other");
    for ns in [&env.ns, &other] {
        env.kubectl_apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"));
    }
    env.kubectl_apply(&format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: drover-agent\n  namespace: {}\n", env.ns));
    let who = format!("system:serviceaccount:{}:drover-agent", env.ns);
    let kubeconfig = kubeconfig_as(env, &who);
    env.push(&[env.configmap("a", "1", &[])], &[]);

    // Without the Events rule the apply goes on: Events are best effort.
    let without_events = role.split("  - apiGroups: [\"events.k8s.io\"]").next().unwrap().to_string() + &role[role.find("---").unwrap()..];
    env.kubectl_apply(&without_events);
    let out = agent_with(env, &kubeconfig, &["--once"]).output().expect("drover-agent");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the apply does not depend on Events:\n{stderr}");
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "1");
    assert!(agent_events(env).is_empty());
    assert!(stderr.contains("Events are best effort") && stderr.contains("forbidden"), "the refusal is logged:\n{stderr}");

    // With the shipped Role: the Applied Event (create), and a refusal on every poll as
    // one Event with a series count (patch).
    env.kubectl_apply(&role);
    env.push(&[env.configmap("a", "2", &[])], &[]);
    let out = agent_with(env, &kubeconfig, &["--once"]).output().expect("drover-agent");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(with_reason(&agent_events(env), "Applied").len(), 1, "{:#?}", agent_events(env));
    push_unsigned(env, &[env.configmap("a", "3", &[])]);
    let mut daemon = agent_with(env, &kubeconfig, &["--interval", "200ms"]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("drover-agent");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(terminate(&mut daemon), Some(0));
    let events = agent_events(env);
    let rejected = with_reason(&events, "Rejected");
    assert_eq!(rejected.len(), 1, "{events:#?}");
    assert!(rejected[0]["series"]["count"].as_i64().unwrap_or(0) >= 2, "the series count was patched: {:#}", rejected[0]);

    // Nothing more: not in another namespace, no read, no delete.
    let event = |ns: &str| {
        format!(
            "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: drover-rbac.1\n  namespace: {ns}\neventTime: \"2026-11-25T10:00:00.000000Z\"\nreportingController: drover.dev/agent\nreportingInstance: e2e\naction: Apply\nreason: Applied\ntype: Normal\nnote: rbac check\nregarding:\n  apiVersion: v1\n  kind: ConfigMap\n  namespace: {ns}\n  name: drover-state-0123456789\n"
        )
    };
    let as_agent = |args: &[&str], stdin: &str| {
        let mut a = vec!["--as", who.as_str()];
        a.extend_from_slice(args);
        env.kubectl(&a, stdin)
    };
    let name = rejected[0]["metadata"]["name"].as_str().unwrap();
    for (what, out) in [
        ("create in another namespace", as_agent(&["create", "-f", "-"], &event(&other))),
        ("get", as_agent(&["get", "events.v1.events.k8s.io", name, "-n", &env.ns], "")),
        ("list", as_agent(&["get", "events.v1.events.k8s.io", "-n", &env.ns], "")),
        ("delete", as_agent(&["delete", "events.v1.events.k8s.io", name, "-n", &env.ns], "")),
        ("core/v1 events", as_agent(&["create", "-f", "-"], &event(&env.ns).replace("events.k8s.io/v1", "v1").replace("note:", "message:").replace("reportingController:", "reportingComponent:").replace("regarding:", "involvedObject:"))),
    ] {
        assert_ne!(out.code, 0, "{what} must be forbidden");
        assert!(out.stderr.contains("forbidden"), "{what}: {}", out.stderr);
    }
}

fn drift_prune_refusal_and_hold_show_too(env: &Env) {
    let cms: Vec<String> = ["a", "b", "c", "d"].iter().map(|n| env.configmap(n, "1", &[])).collect();
    env.push(&[vec![env.namespace()], cms].concat(), &[]);
    env.agent_ok(&[]);

    // Someone changes a managed value: the resync puts it back, a DriftCorrected Warning.
    env.kubectl_ok(&["patch", "configmap", "a", "-n", &env.ns, "--type", "merge", "-p", r#"{"data":{"value":"hand-edited"}}"#]);
    env.agent_ok(&[]);
    let events = agent_events(env);
    let drift = with_reason(&events, "DriftCorrected");
    assert_eq!(drift.len(), 1, "{events:#?}");
    assert!(drift[0]["message"].as_str().unwrap().contains(&format!("ConfigMap {}/a", env.ns)), "{:#}", drift[0]);
    assert_eq!(drift[0]["type"], "Warning");

    // A bundle that drops 3 of 5 objects: the safety valve refuses, a PruneRefused Warning.
    env.push(&[env.namespace(), env.configmap("a", "1", &[])], &[]);
    env.agent_ok(&[]);
    let events = agent_events(env);
    let refused = with_reason(&events, "PruneRefused");
    assert_eq!(refused.len(), 1, "{events:#?}");
    assert!(refused[0]["message"].as_str().unwrap().contains("prune refused"), "{:#}", refused[0]);
    assert!(env.get("configmap", "d").is_some(), "nothing deleted");

    // The operator holds the agent: the next bundle waits, a Held Event says so.
    env.kubectl_ok(&["annotate", "configmap", &state_name(&env.reference), "-n", &env.ns, "drover.dev/hold=change freeze"]);
    let waiting = env.push(&[env.namespace(), env.configmap("a", "2", &[])], &[]);
    env.agent_ok(&[]);
    let events = agent_events(env);
    let held = with_reason(&events, "Held");
    assert_eq!(held.len(), 1, "{events:#?}");
    let message = held[0]["message"].as_str().unwrap();
    assert!(message.contains("change freeze") && message.contains(&waiting), "{message}");
    // The state ConfigMap's uid is known by now: `kubectl describe` lists its Events.
    let uid = env.get("configmap", &state_name(&env.reference)).unwrap()["metadata"]["uid"].clone();
    assert_eq!(held[0]["involvedObject"]["uid"], uid, "{:#}", held[0]);
}

fn every_event_of_a_fresh_agent_regards_the_state_configmap_by_uid(env: &Env) {
    // A fresh agent (empty state directory, no state ConfigMap yet) whose first bundle is
    // refused: its Event already names the state ConfigMap by uid (`kubectl describe
    // configmap` finds Events by it), so the ConfigMap exists from the first Event on.
    env.kubectl_apply(&env.namespace());
    let unsigned = push_unsigned(env, &[env.configmap("a", "1", &[])]);
    let out = env.agent(&[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let state = env.get("configmap", &state_name(&env.reference)).expect("the state ConfigMap exists from the first Event on");
    let uid = state["metadata"]["uid"].as_str().expect("uid").to_string();
    assert_eq!(state["data"]["appliedDigest"], "", "it holds no floor: nothing was applied {state:#}");
    let events = agent_events(env);
    assert_eq!(with_reason(&events, "Rejected").len(), 1, "{events:#?}");
    assert!(events[0]["message"].as_str().unwrap().contains(&unsigned));

    // Then the first apply (the ConfigMap written after the apply: the same object).
    env.push(&[env.configmap("a", "2", &[])], &[]);
    env.agent_ok(&[]);
    let events = agent_events(env);
    assert_eq!(with_reason(&events, "Applied").len(), 1, "{events:#?}");
    assert_eq!(env.get("configmap", &state_name(&env.reference)).unwrap()["metadata"]["uid"], uid.as_str());
    for e in &events {
        assert_eq!(e["involvedObject"]["uid"], uid.as_str(), "every Event regards the state ConfigMap by uid: {e:#}");
    }

    // A new agent (another empty state directory) applying on a cluster with no state
    // ConfigMap for its source: its very first Event (Applied) names it too.
    let other = format!("{}-b", env.reference);
    env.push_to(&other, &[env.configmap("b", "1", &[])], &[]);
    let fresh = kube_support::Agent { source: Some(other.clone()), state: Some("state-b".into()), namespace: None };
    let out = env.agent_in(&fresh, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let name = state_name(&other);
    let uid = env.get("configmap", &name).unwrap()["metadata"]["uid"].as_str().unwrap().to_string();
    let list = env.kubectl_ok(&["get", "events", "-n", &env.ns, "-o", "json"]).json();
    let mine: Vec<&Value> = list["items"].as_array().unwrap().iter().filter(|e| e["involvedObject"]["name"] == name.as_str()).collect();
    assert!(!mine.is_empty(), "{list:#}");
    for e in mine {
        assert_eq!(e["involvedObject"]["uid"], uid.as_str(), "{e:#}");
    }
}

/// The Events API stalls (every request about Events gets no answer for a minute) or
/// fails: the apply is not held up and not failed by it (fake only: error injection).
#[test]
fn a_stalled_or_failing_events_api_never_holds_up_an_apply_fake_only() {
    let env = Env::new(Cluster::fake(), "eventsstall");
    let fake = env.cluster.fake_server().unwrap();
    let events = format!("/apis/events.k8s.io/v1/namespaces/{}/events*", env.ns);
    fake.inject(ErrorRule::delay("POST", &events, 60_000).times(1000));
    env.push(&[env.namespace(), env.configmap("a", "1", &[])], &[]);
    let (out, took) = drover_tests::spawn::run_within(
        Duration::from_secs(45),
        "drover-agent",
        &[
            "run", "--once", "--target", "kube", "--source", &env.reference, "--plain-http", "--trust-key",
            env.dir.path().join("keys/drover.pub").to_str().unwrap(), "--state-dir", env.dir.path().join("state").to_str().unwrap(),
        ],
        &[("KUBECONFIG", env.cluster.kubeconfig().to_str().unwrap()), ("POD_NAMESPACE", &env.ns)],
    )
    .expect("the agent finishes although the Events API never answers");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(env.last_attempt()["result"], "Applied");
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "1");
    // The apply itself took seconds; the exit waited at most the 5 s bound for the Event.
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(out.stderr.contains("Events not written within 5s"), "the stalled write is logged:\n{}", out.stderr);

    // A failing Events API (500 on every write): applied all the same, exit 0.
    fake.clear_errors();
    fake.inject(ErrorRule::new("POST", &events, 500, "etcd is on fire").times(1000));
    env.push(&[env.namespace(), env.configmap("a", "2", &[])], &[]);
    let out = env.agent_ok(&[]);
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "2");
    assert!(out.stderr.contains("etcd is on fire"), "{}", out.stderr);
}
