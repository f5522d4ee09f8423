//! Report-only drift (`--drift report`), the operator's view with the built binaries and a
//! real registry: a hand edit on the target stays as it is and is listed — object and
//! field — in `/status`, `drover-agent status`, `drover_drifted_objects` and the fleet
//! report; a new digest is still applied (and the list empties).
//!
//! - dir target: a file edited and one deleted by hand;
//! - kube target (the FAKE API server, or a real cluster): `kubectl patch` of a field
//!   drover applied, and a label another manager adds (not drift: not drover's field);
//!   the resync compare reads (one LIST per kind and namespace) and only the drifted
//!   object costs a dry run.

mod agent_support;
mod kube_support;

use agent_support::{cm, http_get, live_status, metric, objs, snapshot, terminate, wait_until, Fx};
use drover_tests::run;
use kube_support::Env;
use serde_json::Value;

/// `(name, drift, fields)` of each drifted object of a status document.
fn drifted(st: &Value) -> Vec<(String, String, Vec<String>)> {
    let list = st["drifted"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|d| {
            let fields = d["fields"].as_array().map(|f| f.iter().map(|x| x.as_str().unwrap().to_string()).collect()).unwrap_or_default();
            (d["object"]["name"].as_str().unwrap().to_string(), d["drift"].as_str().unwrap().to_string(), fields)
        })
        .collect()
}

#[test]
fn report_mode_leaves_hand_edits_and_lists_them() {
    let fx = Fx::new();
    let v1 = fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1"), cm("app", "c", "1")]), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1s", "--resync", "0s", "--drift", "report", "--cluster-name", "weu-1"]);
    wait_until(60, "v1 applied (a new digest is applied in report mode)", || {
        http_get(&listen, "/status").is_some() && live_status(&listen)["appliedDigest"] == v1.as_str()
    });

    // By hand: a value changed in one file, another file deleted.
    let dir = fx.target().join("manifests/app");
    let a = dir.join("ConfigMap.core.a.yaml");
    let edited = String::from_utf8(std::fs::read(&a).unwrap()).unwrap().replace("\"1\"", "\"by hand\"");
    assert!(edited.contains("by hand"), "{edited}");
    std::fs::write(&a, &edited).unwrap();
    std::fs::remove_file(dir.join("ConfigMap.core.b.yaml")).unwrap();
    let by_hand = snapshot(&fx.target());

    wait_until(30, "the drift listed in /status", || drifted(&live_status(&listen)).len() == 2);
    let st = live_status(&listen);
    assert_eq!(
        drifted(&st),
        [("a".to_string(), "changed".to_string(), vec!["data.v".to_string()]), ("b".to_string(), "missing".to_string(), vec![])],
        "{st:#}"
    );
    assert_eq!(st["appliedDigest"], v1.as_str());
    assert_eq!(metric(&listen, "drover_drifted_objects "), 2.0);
    let polls = metric(&listen, "drover_polls_total{result=\"Unchanged\"}");
    wait_until(30, "three more resyncs", || metric(&listen, "drover_polls_total{result=\"Unchanged\"}") >= polls + 3.0);
    assert_eq!(snapshot(&fx.target()), by_hand, "report mode changes nothing: the target is byte-for-byte as edited");
    let since = live_status(&listen)["drifted"][0]["since"].clone();
    assert_eq!(since, st["drifted"][0]["since"], "since: the first resync that saw it");

    let text = run("drover-agent", &["status", "--endpoint", &format!("http://{listen}")], &[]).stdout;
    assert!(text.contains("drifted:       2 object(s)") && text.contains("ConfigMap app/a (v1): changed data.v") && text.contains("ConfigMap app/b (v1): missing"), "{text}");
    wait_until(30, "the fleet report counts the drift", || fx.report("weu-1").is_some_and(|r| r["driftedObjects"] == 2));
    let history = run("drover-agent", &["history", "-o", "json", "--endpoint", &format!("http://{listen}")], &[]).json();
    let checks: Vec<&Value> = history.as_array().unwrap().iter().filter(|a| a["stage"] == "drift" && a["drift"] == 2).collect();
    assert_eq!(checks.len(), 1, "one attempt recorded for the same drift however many resyncs: {history:#}");
    assert!(checks[0]["reason"].as_str().unwrap().contains("not corrected"), "{history:#}");

    // A new digest is applied normally: the edit is replaced, the list empties.
    let v2 = fx.push(&objs(&[cm("app", "a", "2"), cm("app", "b", "2"), cm("app", "c", "2")]), 2, Some("k1"), &[]);
    wait_until(30, "v2 applied", || live_status(&listen)["appliedDigest"] == v2.as_str());
    wait_until(30, "nothing drifted", || live_status(&listen).get("drifted").is_none());
    assert_eq!(metric(&listen, "drover_drifted_objects "), 0.0);
    let files = snapshot(&fx.target());
    assert_eq!(files.len(), 3, "{:?}", files.keys());
    assert!(String::from_utf8_lossy(&files["manifests/app/ConfigMap.core.a.yaml"]).contains("\"2\""));
    wait_until(30, "the fleet report drops the count", || fx.report("weu-1").is_some_and(|r| r["appliedDigest"] == v2.as_str() && r.get("driftedObjects").is_none()));
    assert_eq!(terminate(&mut agent), Some(0));

    // Offline status (no agent running) lists the drift from the state directory.
    std::fs::remove_file(fx.target().join("manifests/app/ConfigMap.core.c.yaml")).unwrap();
    let out = fx.once(&["--drift", "report", "--resync", "0s"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(drifted(&fx.status()), [("c".to_string(), "missing".to_string(), vec![])]);
    // Back to correct mode: the next resync puts it back.
    assert_eq!(fx.once(&["--resync", "0s"]).code, 0);
    assert!(fx.target().join("manifests/app/ConfigMap.core.c.yaml").is_file());
    assert!(fx.status().get("drifted").is_none());
    let out = fx.once(&["--drift", "ignore"]);
    assert!(out.code == 2 && out.stderr.contains("driftMode") && out.stderr.contains("--drift"), "{}", out.stderr);
}

scenarios!(kubectl_edit_stays_in_report_mode);

fn kubectl_edit_stays_in_report_mode(env: &Env) {
    let digest = env.push(&[env.namespace(), env.configmap("settings", "1", &[]), env.configmap("other", "o", &[])], &[]);
    env.agent_ok(&["--drift", "report"]);
    assert_eq!(env.last_attempt()["result"], "Applied", "a new digest is applied in report mode");
    // kubectl changes a field drover applied, and adds a label drover does not manage.
    env.kubectl_ok(&["patch", "configmap", "settings", "-n", &env.ns, "--type", "merge", "-p", r#"{"data":{"value":"tampered"}}"#]);
    env.kubectl_ok(&["label", "configmap", "other", "-n", &env.ns, "team=ops"]);
    let before = env.get("configmap", "settings").unwrap();

    // Same digest, --resync 0s: a resync, which in report mode only looks.
    if let Some(fake) = env.cluster.fake_server() {
        fake.clear_requests();
    }
    env.agent_ok(&["--drift", "report"]);
    if let Some(fake) = env.cluster.fake_server() {
        // The resync compare finds what differs (a LIST per kind and namespace); only the
        // drifted object is asked about with a dry run (its fields); nothing is written
        // but the DriftReported Event (docs/kubernetes.md, "Events").
        let (events, sent): (Vec<String>, Vec<String>) = fake
            .requests()
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}?{}", r.method, r.path, r.query))
            .partition(|r| r.contains("/apis/events.k8s.io/"));
        assert_eq!(sent.len(), 1, "{sent:#?}");
        assert!(sent[0].starts_with("PATCH") && sent[0].contains("/configmaps/settings?") && sent[0].contains("dryRun=All"), "{sent:#?}");
        assert_eq!(events.len(), 1, "one Event: {events:#?}");
        assert!(events[0].starts_with("POST"), "{events:#?}");
    }
    let after = env.get("configmap", "settings").unwrap();
    assert_eq!(after["data"]["value"], "tampered", "the edit stays");
    assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "not written at all");
    let st = env.status();
    assert_eq!(st["appliedDigest"], digest.as_str());
    assert_eq!(drifted(&st), [("settings".to_string(), "changed".to_string(), vec!["data.value".to_string()])], "{st:#}");
    let attempt = env.last_attempt();
    assert_eq!((attempt["resync"].as_bool(), attempt["drift"].as_u64(), attempt["stage"].as_str()), (Some(true), Some(1), Some("drift")), "{attempt:#}");
    assert_eq!(env.get("configmap", "other").unwrap()["metadata"]["labels"]["team"], "ops");

    // Correct mode (the default) puts the value back.
    env.agent_ok(&[]);
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "1");
    assert!(env.status().get("drifted").is_none());
}
