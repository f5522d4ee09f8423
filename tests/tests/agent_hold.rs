//! Local control at the edge: an operator holds the agent (`drover-agent hold`, or the
//! `drover.dev/hold` annotation on the kube target's state ConfigMap with kubectl) during
//! a shift. The unlucky operator's view, with the built binaries, a real registry and
//! the FAKE API server (or a real cluster):
//!
//! - a held agent (dir target) neither applies the newer bundle pushed meanwhile nor
//!   corrects a file edited in the target; it verifies the bundle and shows it waiting
//!   in `/status`, `drover-agent status`, `drover_held` and its fleet report; `release`
//!   makes the next poll apply it (and correct the drift);
//! - a hold file that is not a hold holds too (fail-closed), saying why;
//! - `kubectl annotate configmap drover-state-... drover.dev/hold=...` holds a kube-target
//!   agent; removing the annotation releases it.

mod agent_support;
mod kube_support;

use agent_support::{cm, http_get, live_status, metric, objs, snapshot, terminate, wait_until, Fx};
use drover_tests::{run, run_ok};
use kube_support::{state_name, Env};
use serde_json::Value;

#[test]
fn held_agent_applies_nothing_and_shows_the_waiting_bundle_until_released() {
    let fx = Fx::new();
    let v1_objects = vec![cm("app", "a", "1"), cm("app", "b", "1")];
    let v1 = fx.push(&objs(&v1_objects), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1s", "--resync", "0s", "--cluster-name", "weu-1"]);
    wait_until(60, "v1 applied", || http_get(&listen, "/status").is_some() && live_status(&listen)["appliedDigest"] == v1.as_str());

    let held = run_ok("drover-agent", &["hold", "--state-dir", &fx.state(), "--reason", "night shift: no changes", "-o", "json"], &[]).json();
    assert_eq!(held["reason"], "night shift: no changes");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(fx.p("state/hold.json")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the hold file is private");
    }
    wait_until(30, "/status shows the hold", || live_status(&listen)["held"]["reason"] == "night shift: no changes");
    assert_eq!(live_status(&listen)["held"]["since"], held["since"], "since when: the hold file's time");
    assert_eq!(metric(&listen, "drover_held "), 1.0);

    // Drift while held: a file of the target is edited; resync (0s) is due on every poll.
    let a_file = fx.target().join("manifests/app/ConfigMap.core.a.yaml");
    assert!(a_file.is_file(), "{} not found; target: {:?}", a_file.display(), snapshot(&fx.target()).keys());
    std::fs::write(&a_file, "edited by hand\n").unwrap();
    let drifted = snapshot(&fx.target());
    let polls = metric(&listen, "drover_polls_total{result=\"Unchanged\"}");
    wait_until(30, "three held polls", || metric(&listen, "drover_polls_total{result=\"Unchanged\"}") >= polls + 3.0);
    assert_eq!(snapshot(&fx.target()), drifted, "a held agent does not correct drift");

    // A newer bundle while held: verified, shown waiting, not applied.
    let v2 = fx.push(&objs(&[cm("app", "a", "2"), cm("app", "c", "2")]), 2, Some("k1"), &[]);
    wait_until(30, "v2 waiting", || live_status(&listen)["held"]["waitingDigest"] == v2.as_str());
    let held_polls = metric(&listen, "drover_polls_total{result=\"Held\"}");
    wait_until(30, "three more held polls", || metric(&listen, "drover_polls_total{result=\"Held\"}") >= held_polls + 3.0);
    let st = live_status(&listen);
    assert_eq!(st["appliedDigest"], v1.as_str(), "{st:#}");
    assert_eq!(st["held"]["waitingSequence"], 2, "{st:#}");
    assert_eq!(st["held"]["by"], "file", "{st:#}");
    assert_eq!(st["lastAttempt"]["result"], "Held", "{st:#}");
    assert_eq!(snapshot(&fx.target()), drifted, "a held agent applies nothing: target byte-for-byte as it was");
    let text = run_ok("drover-agent", &["status", "--endpoint", &format!("http://{listen}")], &[]).stdout;
    assert!(text.contains("held:") && text.contains("night shift: no changes") && text.contains(&v2) && text.contains(&v1), "{text}");
    wait_until(30, "the fleet report says held", || {
        fx.report("weu-1").is_some_and(|r| r["held"]["waitingDigest"] == v2.as_str() && r["held"]["reason"] == "night shift: no changes")
    });
    let r = fx.report("weu-1").unwrap();
    assert_eq!(r["appliedDigest"], v1.as_str(), "{r:#}");
    let history = run_ok("drover-agent", &["history", "-o", "json", "--endpoint", &format!("http://{listen}")], &[]).json();
    let held_attempts: Vec<&Value> = history.as_array().unwrap().iter().filter(|a| a["result"] == "Held" && a["digest"] == v2.as_str()).collect();
    assert_eq!(held_attempts.len(), 1, "one Held attempt for v2 however many polls: {history:#}");

    // Release: the next poll applies v2 (the edited file is rewritten, b pruned).
    let out = run_ok("drover-agent", &["release", "--state-dir", &fx.state()], &[]);
    assert!(out.stdout.contains("released"), "{}", out.stdout);
    wait_until(30, "v2 applied after release", || live_status(&listen)["appliedDigest"] == v2.as_str());
    let st = live_status(&listen);
    assert!(st.get("held").is_none(), "{st:#}");
    assert_eq!(metric(&listen, "drover_held "), 0.0);
    let files = snapshot(&fx.target());
    let names: Vec<&String> = files.keys().collect();
    assert_eq!(names, ["manifests/app/ConfigMap.core.a.yaml", "manifests/app/ConfigMap.core.c.yaml"], "{files:?}");
    assert!(String::from_utf8_lossy(&files["manifests/app/ConfigMap.core.a.yaml"]).contains("\"2\""));
    assert_eq!(terminate(&mut agent), Some(0));
}

#[test]
fn a_hold_file_that_is_not_a_hold_holds() {
    let fx = Fx::new();
    let v1 = fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    std::fs::create_dir_all(fx.p("state")).unwrap();
    std::fs::write(fx.p("state/hold.json"), "hold please").unwrap();
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "held is not a failure: {}", out.stderr);
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Held", "{st:#}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("hold.json is not a hold file") && reason.contains(&v1), "{reason}");
    assert!(snapshot(&fx.target()).is_empty(), "nothing applied");
    run_ok("drover-agent", &["release", "--state-dir", &fx.state()], &[]);
    assert_eq!(fx.once(&[]).code, 0);
    assert_eq!(fx.status()["appliedDigest"], v1.as_str());
    // Offline status (no agent running) shows a hold file's hold and the waiting bundle.
    run_ok("drover-agent", &["hold", "--state-dir", &fx.state(), "--reason", "audit"], &[]);
    let v2 = fx.push(&objs(&[cm("app", "a", "2")]), 2, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let st = fx.status();
    assert_eq!((st["held"]["reason"].as_str(), st["held"]["waitingDigest"].as_str()), (Some("audit"), Some(v2.as_str())), "{st:#}");
    assert_eq!(st["appliedDigest"], v1.as_str());
    // Usage errors: no reason, a state directory that does not exist.
    let out = run("drover-agent", &["hold", "--state-dir", &fx.state(), "--reason", " "], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--reason"), "{}", out.stderr);
    let out = run("drover-agent", &["hold", "--state-dir", &fx.s("nope"), "--reason", "x"], &[]);
    assert!(out.code == 2 && out.stderr.contains("--state-dir"), "{}", out.stderr);
}

#[test]
fn hold_one_level_too_high_is_refused_and_the_agent_is_not_told_it_is_held() {
    let fx = Fx::new();
    let v1 = fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    // The operator points at the directory above the state directory.
    let above = fx.s("");
    let out = run("drover-agent", &["hold", "--state-dir", &above, "--reason", "freeze"], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("holds no agent state") && out.stderr.contains(&fx.state()), "names the state directory below: {}", out.stderr);
    assert!(!fx.p("hold.json").exists(), "no hold file written where no agent reads it");
    let out = run("drover-agent", &["release", "--state-dir", &above], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    // The agent is not held: the next bundle is applied.
    let v2 = fx.push(&objs(&[cm("app", "a", "2")]), 2, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    assert_ne!(fx.status()["appliedDigest"], v1.as_str());
    assert_eq!(fx.status()["appliedDigest"], v2.as_str());
}

scenarios!(kubectl_annotation_holds_a_kube_agent);

fn kubectl_annotation_holds_a_kube_agent(env: &Env) {
    env.push(&[env.namespace(), env.configmap("a", "1", &[])], &[]);
    env.agent_ok(&[]);
    let state = state_name(&env.reference);
    env.kubectl_ok(&["annotate", "configmap", &state, "-n", &env.ns, "drover.dev/hold=cluster maintenance (ops)"]);
    let v2 = env.push(&[env.namespace(), env.configmap("a", "2", &[]), env.configmap("b", "2", &[])], &[]);
    let before = env.get("configmap", "a").unwrap();

    let out = env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Held", "{attempt:#}\n{}", out.stderr);
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains("annotation drover.dev/hold") && reason.contains("cluster maintenance (ops)") && reason.contains(&v2), "{reason}");
    let after = env.get("configmap", "a").unwrap();
    assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "not touched while held");
    assert!(env.get("configmap", "b").is_none(), "v2 not applied while held");

    // The running agent shows the hold and the waiting bundle.
    let port = drover_tests::free_port();
    let mut daemon = env.agent_daemon(port, &["--interval", "1s"]);
    let listen = format!("127.0.0.1:{port}");
    wait_until(60, "/status shows the annotation's hold", || {
        kube_support::http_get(port, "/status")
            .and_then(|b| serde_json::from_str::<Value>(&b).ok())
            .is_some_and(|s| s["held"]["by"] == "annotation" && s["held"]["waitingDigest"] == v2.as_str())
    });
    let st = live_status(&listen);
    assert_eq!(st["held"]["reason"], "cluster maintenance (ops)", "{st:#}");
    assert!(st["held"]["since"].as_str().is_some_and(|s| s.ends_with('Z')), "{st:#}");
    assert_eq!(metric(&listen, "drover_held "), 1.0);
    assert_eq!(terminate(&mut daemon), Some(0));

    // Release with kubectl: the next run applies v2.
    env.kubectl_ok(&["annotate", "configmap", &state, "-n", &env.ns, "drover.dev/hold-"]);
    env.agent_ok(&[]);
    assert_eq!(env.last_attempt()["result"], "Applied");
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "2");
    assert!(env.get("configmap", "b").is_some());
}
