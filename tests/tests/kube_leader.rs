//! Leader election end to end: two real `drover-agent run --leader-election` processes
//! against the FAKE API server (or a real cluster): one leads and applies, the other
//! reports `standby`; when the leader is killed (no release), the standby takes over the
//! Lease after it expires and applies the next bundle; a SIGTERM releases the Lease.

mod kube_support;

use kube_support::{eventually, http_get, Env};
use serde_json::Value;
use std::process::Child;

scenarios!(standby_takes_over_when_the_leader_dies);

fn status(port: u16) -> Option<Value> {
    http_get(port, "/status").and_then(|b| serde_json::from_str(&b).ok())
}

fn stop(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

fn standby_takes_over_when_the_leader_dies(env: &Env) {
    let lease = format!("{}-lease", env.ns);
    let args = ["--leader-election", "--lease-namespace", "default", "--lease-name", &lease, "--lease-duration", "3s", "--interval", "300ms"];
    env.push(&[env.namespace(), env.configmap("settings", "1", &[])], &[]);
    let (pa, pb) = (drover_tests::free_port(), drover_tests::free_port());
    let a = env.agent_daemon_in("state-a", pa, &args);
    let leader = eventually(20, || status(pa).filter(|s| s["role"] == "leader" && s["appliedDigest"].is_string()));
    let b = env.agent_daemon_in("state-b", pb, &args);
    let standby = eventually(20, || status(pb).filter(|s| s["role"] == "standby"));
    let (Some(leader), Some(standby)) = (leader, standby) else {
        stop(a);
        stop(b);
        panic!("expected a leader and a standby: a={:?} b={:?}", status(pa), status(pb));
    };
    assert!(standby["appliedDigest"].is_null(), "the standby applies nothing: {standby:#}");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "1");
    let holder = env.kubectl_ok(&["get", "lease", &lease, "-n", "default", "-o", "jsonpath={.spec.holderIdentity}"]).stdout;
    assert!(!holder.is_empty(), "the Lease names its holder");
    let _ = leader;

    // The leader dies without releasing; a new bundle is published meanwhile.
    stop(a);
    let d2 = env.push(&[env.namespace(), env.configmap("settings", "2", &[])], &[]);
    let took_over = eventually(30, || status(pb).filter(|s| s["role"] == "leader" && s["appliedDigest"] == d2.as_str()));
    let new_holder = env.kubectl_ok(&["get", "lease", &lease, "-n", "default", "-o", "jsonpath={.spec.holderIdentity}"]).stdout;
    if took_over.is_none() {
        stop(b);
        panic!("the standby did not take over: {:?}", status(pb));
    }
    assert_ne!(new_holder, holder, "the Lease changed hands");
    assert_eq!(env.get("configmap", "settings").unwrap()["data"]["value"], "2", "the new leader applied the new bundle");

    // SIGTERM: the leader releases the Lease on the way out.
    let _ = std::process::Command::new("kill").args(["-TERM", &b.id().to_string()]).status();
    let mut b = b;
    let _ = b.wait();
    let released = env.kubectl_ok(&["get", "lease", &lease, "-n", "default", "-o", "jsonpath={.spec.holderIdentity}"]).stdout;
    assert_eq!(released, "", "released on SIGTERM");
    let _ = env.kubectl(&["delete", "lease", &lease, "-n", "default", "--ignore-not-found"], "");
}
