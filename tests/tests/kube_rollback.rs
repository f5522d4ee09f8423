//! `--on-degraded rollback` end to end on the kube target (docs/agent.md, "Rollback"): a
//! bundle whose Deployment never becomes ready is replaced, at the end of the health
//! timeout, by the last bundle Healthy on the cluster (the Deployment's template is the
//! old one again, what the bad bundle added is pruned); status, history, `/metrics`, an
//! Event and the fleet report say `RolledBack` naming both digests; later polls do not
//! apply the bad digest again; a newer fixed bundle is applied; `release --rollback`
//! lifts the refusal. An operator's hold taken during the wait keeps the Degraded bundle;
//! `--drift report` does not stop a rollback (it is not a resync).

mod kube_support;

use std::time::Duration;

use drover_tests::run;
use kube_support::{eventually, http_get, state_name, Env};
use serde_json::Value;

scenarios!(a_degraded_bundle_is_rolled_back, a_hold_during_the_wait_keeps_the_degraded_bundle, drift_report_does_not_stop_a_rollback);

const GOOD_IMAGE: &str = "nginx:1.27";
/// Never pulls, here (the fake's `.invalid` rule) as on a real cluster.
const BAD_IMAGE: &str = "registry.invalid/drover-e2e/never:1";
const BUNDLE: [&str; 4] = ["--cluster-type", "edge", "--env", "prod"];

fn agent_flags<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--on-degraded", "rollback", "--health-timeout", "3s", "--expect-cluster-type", "edge", "--expect-environment", "prod"];
    v.extend_from_slice(more);
    v
}

fn image(env: &Env, name: &str) -> String {
    let d = env.get("deployment", name).expect("the Deployment exists");
    d["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap().to_string()
}

fn history(env: &Env, limit: usize) -> Vec<Value> {
    let state = env.path("state");
    let limit = limit.to_string();
    let out = run("drover-agent", &["history", "--state-dir", state.to_str().unwrap(), "--endpoint", "http://127.0.0.1:1", "-o", "json", "--limit", &limit], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json().as_array().expect("a list").clone()
}

fn a_degraded_bundle_is_rolled_back(env: &Env) {
    let v1_docs = [env.namespace(), env.configmap("settings", "1", &[]), env.deployment("web", GOOD_IMAGE)];
    let v1 = env.push(&v1_docs, &BUNDLE);
    env.agent_ok(&agent_flags(&["--cluster-name", "c1"]));
    assert_eq!(env.last_attempt()["health"], "Healthy", "{:#}", env.last_attempt());

    // v2: the Deployment never becomes ready, and the bundle adds a ConfigMap.
    let v2_docs = [env.namespace(), env.configmap("settings", "2", &[]), env.configmap("added", "x", &[]), env.deployment("web", BAD_IMAGE)];
    let v2 = env.push(&v2_docs, &BUNDLE);
    let started = std::time::Instant::now();
    env.agent_ok(&agent_flags(&["--cluster-name", "c1"]));
    assert!(started.elapsed() >= Duration::from_secs(3), "the rollback comes at the end of the health timeout");

    // The cluster runs v1 again: the old template, v1's data, v2's addition pruned.
    assert_eq!(image(env, "web"), GOOD_IMAGE);
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "1");
    assert!(env.get("configmap", "added").is_none(), "what the bad bundle added is gone");

    // Status and history name both digests.
    let status = env.status();
    assert_eq!(status["appliedDigest"], v1.as_str(), "{status:#}");
    assert_eq!(status["rolledBack"]["from"]["digest"], v2.as_str(), "{status:#}");
    assert_eq!(status["rolledBack"]["to"]["digest"], v1.as_str(), "{status:#}");
    assert_eq!(status["lastAttempt"]["result"], "RolledBack", "{status:#}");
    let h = history(env, 2);
    assert_eq!(h[1]["result"], "Applied", "first the bad bundle was applied: {:#}", h[1]);
    assert_eq!((h[1]["digest"].as_str(), h[1]["health"].as_str()), (Some(v2.as_str()), Some("Degraded")), "{:#}", h[1]);
    let rolled = &h[0];
    assert_eq!(rolled["result"], "RolledBack", "{rolled:#}");
    assert_eq!(rolled["digest"], v2.as_str(), "{rolled:#}");
    assert_eq!(rolled["rolledBack"]["to"]["digest"], v1.as_str(), "{rolled:#}");
    let reason = rolled["reason"].as_str().unwrap();
    assert!(reason.contains(&v1) && reason.contains(&v2) && reason.contains("not ready after 3s"), "{reason}");
    assert!(rolled["objects"].as_array().unwrap().iter().any(|o| o["object"]["name"] == "added" && o["action"] == "deleted"), "{rolled:#}");

    // An Event says so, naming both digests.
    let events = env.kubectl_ok(&["get", "events", "-n", &env.ns, "-o", "json"]).json();
    let rolled_back: Vec<&Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "RolledBack" && e["involvedObject"]["name"] == state_name(&env.reference).as_str())
        .collect();
    assert_eq!(rolled_back.len(), 1, "{events:#}");
    let note = rolled_back[0]["message"].as_str().unwrap();
    assert!(note.contains(&v1) && note.contains(&v2), "{note}");
    assert_eq!(rolled_back[0]["type"], "Warning");

    // The fleet report says RolledBack and runs v1: no gate passes on v2.
    let reports = env.reference.replace("fleet/edge:prod", "fleet/drover-reports");
    let pubkey = env.path("keys/drover.pub");
    // The cluster's report counts once its key is enrolled (the registry roster here).
    let key = env.path("keys/drover.key");
    let out = run("drover", &["fleet", "enroll", "--reports", &reports, "--plain-http", "--key", key.to_str().unwrap(), "--all-pending"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run("drover", &["-o", "json", "fleet", "status", "--reports", &reports, "--plain-http", "--stale", "1h", "--trust-key", pubkey.to_str().unwrap()], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let fleet = out.json();
    let row = &fleet["clusters"][0];
    assert_eq!(row["lastResult"], "RolledBack", "{fleet:#}");
    assert_eq!(row["appliedDigest"], v1.as_str(), "{fleet:#}");
    assert_eq!((row["rolledBack"]["digest"].as_str(), row["rolledBack"]["toDigest"].as_str()), (Some(v2.as_str()), Some(v1.as_str())), "{fleet:#}");
    let out = run("drover", &["fleet", "status", "--reports", &reports, "--plain-http", "--stale", "1h", "--trust-key", pubkey.to_str().unwrap()], &[]);
    assert!(out.stdout.contains(&format!("(rolled back from {} ", row["rolledBack"]["sequence"])), "the table names the refused bundle: {}", out.stdout);

    // The next polls do not apply v2 again (the channel still names it).
    env.agent_ok(&agent_flags(&[]));
    env.agent_ok(&agent_flags(&[]));
    assert_eq!(image(env, "web"), GOOD_IMAGE);
    assert!(env.get("configmap", "added").is_none());
    assert!(history(env, 3).iter().all(|a| a["digest"] != v2.as_str() || a["result"] != "Applied"), "v2 not applied again");
    assert_eq!(env.status()["appliedDigest"], v1.as_str());

    // A running agent shows the refusal in /metrics.
    let port = drover_tests::free_port();
    let mut agent = env.agent_daemon(port, &agent_flags(&["--interval", "1h"]));
    let metrics = eventually(30, || http_get(port, "/metrics").filter(|m| m.contains("drover_rolled_back{")));
    let _ = agent.kill();
    let _ = agent.wait();
    let metrics = metrics.expect("drover_rolled_back in /metrics");
    let line = metrics.lines().find(|l| l.starts_with("drover_rolled_back{")).unwrap();
    assert!(line.contains(&v2) && line.contains(&v1) && line.ends_with(" 1"), "{line}");
    assert!(line.contains("source=\"default\""), "per-source series: {line}");
    assert!(metrics.contains("drover_rollbacks_total"), "the counter is exported");

    // A newer, fixed bundle is applied as usual and ends the refusal.
    let v3_docs = [env.namespace(), env.configmap("settings", "3", &[]), env.deployment("web", GOOD_IMAGE).replace("replicas: 1", "replicas: 2")];
    let v3 = env.push(&v3_docs, &BUNDLE);
    env.agent_ok(&agent_flags(&[]));
    let status = env.status();
    assert_eq!(status["appliedDigest"], v3.as_str(), "{status:#}");
    assert_eq!(status["health"], "Healthy", "{status:#}");
    assert!(status["rolledBack"].is_null(), "{status:#}");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "3");

    // Bad again: rolled back to v3; an operator releases the refusal: v4 is applied again.
    let v4 = env.push(&v2_docs, &BUNDLE);
    env.agent_ok(&agent_flags(&[]));
    assert_eq!(env.status()["rolledBack"]["from"]["digest"], v4.as_str());
    assert_eq!(image(env, "web"), GOOD_IMAGE);
    let state = env.path("state");
    let out = run("drover-agent", &["release", "--rollback", "--state-dir", state.to_str().unwrap(), "--source", "team-x"], &[]);
    assert_eq!(out.code, 2, "an unknown source: {}", out.stderr);
    assert!(out.stderr.contains("default"), "names the agent's sources: {}", out.stderr);
    let out = run("drover-agent", &["release", "--rollback", "--state-dir", state.to_str().unwrap()], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("rollback refusal"), "{}", out.stdout);
    env.agent_ok(&["--health-timeout", "2s", "--expect-cluster-type", "edge", "--expect-environment", "prod"]);
    let status = env.status();
    assert_eq!(status["appliedDigest"], v4.as_str(), "released: applied again: {status:#}");
    assert_eq!(image(env, "web"), BAD_IMAGE);
}

fn a_hold_during_the_wait_keeps_the_degraded_bundle(env: &Env) {
    let v1 = env.push(&[env.namespace(), env.deployment("web", GOOD_IMAGE)], &BUNDLE);
    env.agent_ok(&agent_flags(&[]));
    let v2 = env.push(&[env.namespace(), env.deployment("web", BAD_IMAGE)], &BUNDLE);
    let port = drover_tests::free_port();
    let mut agent = env.agent_daemon(port, &["--on-degraded", "rollback", "--health-timeout", "6s", "--interval", "1h", "--resync", "1h"]);
    // While the agent waits for v2's health, the operator holds it.
    let applied = eventually(30, || (env.get("deployment", "web").is_some() && image(env, "web") == BAD_IMAGE).then_some(()));
    assert!(applied.is_some(), "v2 was applied");
    let state = env.path("state");
    let out = run("drover-agent", &["hold", "--state-dir", state.to_str().unwrap(), "--reason", "investigating the rollout"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let status = eventually(30, || {
        let s: Value = serde_json::from_str(&http_get(port, "/status")?).ok()?;
        (s["lastAttempt"]["result"] == "Held").then_some(s)
    });
    let _ = agent.kill();
    let _ = agent.wait();
    let status = status.expect("the rollback was held");
    let reason = status["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("investigating the rollout") && reason.contains("not rolled back") && reason.contains(&v1), "{reason}");
    assert_eq!(status["appliedDigest"], v2.as_str(), "{status:#}");
    assert!(status["rolledBack"].is_null(), "{status:#}");
    assert_eq!(image(env, "web"), BAD_IMAGE, "nothing changed while held");
}

fn drift_report_does_not_stop_a_rollback(env: &Env) {
    let v1 = env.push(&[env.namespace(), env.deployment("web", GOOD_IMAGE)], &BUNDLE);
    env.agent_ok(&agent_flags(&["--drift", "report"]));
    let v2 = env.push(&[env.namespace(), env.configmap("added", "x", &[]), env.deployment("web", BAD_IMAGE)], &BUNDLE);
    env.agent_ok(&agent_flags(&["--drift", "report"]));
    let status = env.status();
    assert_eq!(status["appliedDigest"], v1.as_str(), "{status:#}");
    assert_eq!(status["rolledBack"]["from"]["digest"], v2.as_str(), "{status:#}");
    assert_eq!(image(env, "web"), GOOD_IMAGE);
    assert!(env.get("configmap", "added").is_none());
    // The resyncs of the bundle put back follow the drift mode: drift is reported, not corrected.
    env.kubectl_ok(&["set", "image", "deployment/web", &format!("main={BAD_IMAGE}"), "-n", &env.ns]);
    env.agent_ok(&agent_flags(&["--drift", "report"]));
    assert_eq!(image(env, "web"), BAD_IMAGE, "report mode: the drift stays");
    let status = env.status();
    assert_eq!(status["appliedDigest"], v1.as_str());
    assert!(status["drifted"].as_array().is_some_and(|d| !d.is_empty()), "{status:#}");
}
