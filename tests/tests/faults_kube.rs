//! The agent (kube target) follows a channel through 15 updates while a seeded
//! fault-injecting proxy (tests/src/faults.rs, API-server profile) sits between it and
//! the FAKE API server: some PATCHes are answered 409 Conflict or 500, others are
//! forwarded and never answered (the agent's `--api-timeout` must end them). After every
//! `run --once` cycle: a cycle that reports the new bundle applied left the cluster equal
//! to it but for the objects it names failed (each object's failure is its own: the rest
//! is applied and what the bundle dropped is pruned), a cycle that applied nothing pruned
//! nothing (the objects of the last fully applied bundle are all there), the applied
//! sequence never moved back,
//! every failed cycle is a Failed attempt whose reason or object messages name the fault,
//! and a 409 on an object always fails the cycle. At the end the cluster equals the last
//! bundle exactly. Seed: DROVER_FAULT_SEED (default 14), printed on failure.
//!
//! No `real_cluster` variant: the proxy speaks plain HTTP, a real API server TLS.

mod kube_support;

use std::collections::BTreeMap;

use drover_tests::fakekube::{kubeconfig_yaml, FakeApiServer};
use drover_tests::faults::{Fault, FaultProxy};
use drover_tests::{run, Out};
use kube_support::{Cluster, Env};
use serde_json::Value;

const UPDATES: u64 = 15;
/// Faults per 1,000 PATCHes.
const RATE: u32 = 120;
/// Cycles allowed per update before the test gives up (the agent must converge).
const MAX_TRIES: u32 = 20;

fn seed() -> u64 {
    std::env::var("DROVER_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(14)
}

/// Bundle `i`'s ConfigMaps: 4 to 6 (objects come and go), name → value `rev-NNN`.
fn bundle(i: u64) -> BTreeMap<String, String> {
    (0..4 + i % 3).map(|j| (format!("c{j}"), format!("rev-{i:03}"))).collect()
}

/// The bundle's ConfigMaps (name → `data.value`) in `ns` on the fake server, without
/// the agent's own state ConfigMap.
fn cluster(fake: &FakeApiServer, ns: &str) -> BTreeMap<String, String> {
    fake.objects()
        .into_iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["namespace"] == ns)
        .filter(|o| !o["metadata"]["name"].as_str().unwrap_or("").starts_with("drover-state-"))
        .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o["data"]["value"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// Everything an attempt says: its reason and every object's message.
fn attempt_text(a: &Value) -> String {
    let mut t = a["reason"].as_str().unwrap_or("").to_string();
    for o in a["objects"].as_array().into_iter().flatten() {
        t.push_str(&format!("\n{} {}: {}", o["object"]["name"], o["action"], o["message"].as_str().unwrap_or("")));
    }
    t
}

struct World {
    env: Env,
    proxy: FaultProxy,
    kubeconfig: std::path::PathBuf,
}

impl World {
    fn fake(&self) -> &FakeApiServer {
        self.env.cluster.fake_server().expect("the fake API server")
    }

    /// `drover-agent run --once --target kube` through the proxy.
    fn once(&self) -> Out {
        let state = self.env.dir.path().join("state");
        let key = self.env.dir.path().join("keys/drover.pub");
        let args = [
            "run", "--once", "--target", "kube", "--source", &self.env.reference, "--plain-http", "--trust-key", key.to_str().unwrap(),
            "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0", "--api-timeout", "1s",
            // One PATCH at a time: the seeded decisions meet the same requests every run.
            "--apply-concurrency", "1",
        ];
        run("drover-agent", &args, &[("KUBECONFIG", self.kubeconfig.to_str().unwrap()), ("POD_NAMESPACE", &self.env.ns)])
    }

    fn push(&self, i: u64) -> String {
        let mut docs = vec![self.env.namespace()];
        docs.extend(bundle(i).iter().map(|(n, v)| self.env.configmap(n, v, &[])));
        self.env.push(&docs, &[])
    }
}

#[test]
fn agent_follows_15_updates_through_a_faulty_api_server() {
    let seed = seed();
    let env = Env::new(Cluster::fake(), "faults_kube");
    // The signing key as plain PKCS#8 (`--key` takes either form): a debug build spends
    // about half a second per push deriving the key of keygen's encrypted envelope.
    let k = drover_proto::keys::PrivateKey::generate().unwrap();
    std::fs::write(env.dir.path().join("keys/drover.key"), k.to_pkcs8_pem().unwrap()).unwrap();
    std::fs::write(env.dir.path().join("keys/drover.pub"), k.public_key().to_pem()).unwrap();
    let upstream = env.cluster.fake_server().unwrap().url().trim_start_matches("http://").to_string();
    let proxy = FaultProxy::start_api(&upstream, seed, RATE);
    let kubeconfig = env.dir.path().join("kubeconfig-proxy");
    std::fs::write(&kubeconfig, kubeconfig_yaml(&format!("http://{}", proxy.addr))).unwrap();
    let w = World { env, proxy, kubeconfig };
    let ns = w.env.ns.clone();
    let ctx = |msg: String| format!("seed {seed} (re-run with DROVER_FAULT_SEED={seed}): {msg}");
    let (mut floor, mut applied_bundle, mut failed_cycles, mut cycles) = (0u64, 0u64, 0u32, 0u32);
    let (mut seen_faults, mut dropping_failures) = (0, 0);
    for i in 1..=UPDATES {
        let digest = w.push(i);
        let drops = i > 1 && bundle(i - 1).len() > bundle(i).len();
        if drops {
            // An update that drops objects always meets a failed object first (a 409 on
            // its last object): the rest is applied and the dropped objects pruned.
            let last = bundle(i).into_keys().last().unwrap();
            w.proxy.script(&format!("PATCH /api/v1/namespaces/{ns}/configmaps/{last}?"), Fault::Conflict);
        }
        let mut tries = 0;
        loop {
            let out = w.once();
            cycles += 1;
            let injected = w.proxy.injected();
            let new_faults = &injected[seen_faults..];
            seen_faults = injected.len();
            if drops && tries == 0 {
                assert_ne!(out.code, 0, "{}", ctx(format!("update {i}: the scripted 409 did not fail the apply")));
                dropping_failures += 1;
            }
            let st = w.env.status();
            let seq = st["appliedSequence"].as_u64().unwrap_or(0);
            assert!(seq >= floor, "{}", ctx(format!("update {i}: applied sequence moved back from {floor} to {seq}")));
            floor = seq;
            let now = cluster(w.fake(), &ns);
            // The history is read when the cycle failed or met a fault (a process start less otherwise).
            let attempt = if out.code != 0 || !new_faults.is_empty() { w.env.last_attempt() } else { st["lastAttempt"].clone() };
            let text = attempt_text(&attempt);
            let failed: Vec<String> = attempt["objects"].as_array().into_iter().flatten().filter(|o| o["action"] == "failed").filter_map(|o| o["object"]["name"].as_str().map(str::to_string)).collect();
            if st["appliedDigest"] == digest.as_str() {
                // Applied, but for the objects that failed (each one's own failure): every
                // other object is as the bundle says, and what the bundle dropped is gone,
                // even beside a failed object.
                let want = bundle(i);
                let wrong: Vec<&String> = want.iter().filter(|(n, v)| !failed.contains(n) && now.get(*n) != Some(v)).map(|(n, _)| n).collect();
                assert!(wrong.is_empty(), "{}", ctx(format!("update {i} reported applied, {wrong:?} differ; failed: {failed:?}")));
                let extra: Vec<&String> = now.keys().filter(|n| !want.contains_key(*n)).collect();
                assert!(extra.is_empty(), "{}", ctx(format!("update {i} reported applied, {extra:?} not pruned; failed: {failed:?}")));
                if failed.is_empty() {
                    applied_bundle = i;
                    assert_eq!(now, want, "{}", ctx(format!("update {i} reported applied, the cluster differs")));
                }
            } else if applied_bundle > 0 {
                // Not applied at all (the apply stopped, or every object failed): every
                // object of the last fully applied bundle is still there.
                let missing: Vec<String> = bundle(applied_bundle).into_keys().filter(|n| !now.contains_key(n)).collect();
                assert!(missing.is_empty(), "{}", ctx(format!("update {i}: failed apply pruned {missing:?} of bundle {applied_bundle}")));
            }
            if out.code != 0 {
                failed_cycles += 1;
                assert_eq!(attempt["result"], "Failed", "{}", ctx(format!("exit {} but the newest attempt is {attempt}\n{}", out.code, out.stderr)));
                assert!(!attempt["reason"].as_str().unwrap_or("").trim().is_empty(), "{}", ctx(format!("no reason: {attempt}")));
                assert!(
                    ["409", "500", "timed out"].iter().any(|f| text.contains(f)),
                    "{}",
                    ctx(format!("a failed cycle that names no injected fault: {text}"))
                );
            }
            // A 409 on an object of the bundle is not retried: that cycle failed, saying so.
            let object_conflict = new_faults.iter().any(|f| f.fault == Fault::Conflict && !f.line.contains("drover-state-"));
            if object_conflict {
                assert_eq!(attempt["result"], "Failed", "{}", ctx(format!("a 409 on an object, yet {attempt}")));
                assert!(text.contains("409"), "{}", ctx(format!("the 409 is not named: {text}")));
            }
            if new_faults.iter().any(|f| f.line.contains("drover-state-")) && out.code == 0 {
                assert!(text.contains("in-cluster state not saved") || new_faults.iter().all(|f| f.fault != Fault::Conflict), "{}", ctx(text.clone()));
            }
            if applied_bundle == i {
                break;
            }
            tries += 1;
            assert!(tries < MAX_TRIES, "{}", ctx(format!("update {i} not applied after {tries} cycles; last: {}", out.stderr)));
        }
    }
    let injected = w.proxy.injected();
    let count = |f: Fault| injected.iter().filter(|x| x.fault == f).count();
    eprintln!(
        "seed {seed}: {} faults injected ({} conflicts, {} 500s, {} hangs), {cycles} cycles, {failed_cycles} failed ({dropping_failures} on updates that drop objects)",
        injected.len(),
        count(Fault::Conflict),
        count(Fault::Status(500)),
        count(Fault::Hang)
    );
    // The end state: exactly the last bundle.
    assert_eq!(cluster(w.fake(), &ns), bundle(UPDATES), "{}", ctx("end state".into()));
    // The run was not trivially clean: every kind of fault, some cycles failed.
    for f in [Fault::Conflict, Fault::Status(500), Fault::Hang] {
        assert!(count(f) > 0, "{}", ctx(format!("no {f:?} injected: {injected:?}")));
    }
    assert!(failed_cycles > 0, "{}", ctx("no cycle failed: the faults were not seen".into()));
}

/// `/status` of an agent listening on `port`.
fn live(port: u16) -> Option<Value> {
    kube_support::http_get(port, "/status").and_then(|b| serde_json::from_str(&b).ok())
}

/// A long-running `drover-agent run --target kube --leader-election` with `kubeconfig`.
fn leader_candidate(env: &Env, kubeconfig: &std::path::Path, state: &str, port: u16, lease: &str) -> std::process::Child {
    let key = env.dir.path().join("keys/drover.pub");
    let state = env.dir.path().join(state);
    std::process::Command::new(drover_tests::bin("drover-agent"))
        .args(["run", "--target", "kube", "--source", &env.reference, "--plain-http", "--trust-key", key.to_str().unwrap()])
        .args(["--state-dir", state.to_str().unwrap(), "--listen", &format!("127.0.0.1:{port}"), "--api-timeout", "2s"])
        .args(["--leader-election", "--lease-namespace", "default", "--lease-name", lease, "--lease-duration", "3s", "--interval", "300ms"])
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAMESPACE", &env.ns)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(env.dir.path().join(format!("agent-{port}.log"))).unwrap())
        .spawn()
        .expect("spawn drover-agent")
}

#[test]
fn a_leader_whose_lease_renewal_gets_no_answer_stands_down_before_the_lease_expires() {
    let env = Env::new(Cluster::fake(), "faults_lease");
    let upstream = env.cluster.fake_server().unwrap().url().trim_start_matches("http://").to_string();
    let proxy = FaultProxy::start_api(&upstream, seed(), 0);
    let kubeconfig = env.dir.path().join("kubeconfig-proxy");
    std::fs::write(&kubeconfig, kubeconfig_yaml(&format!("http://{}", proxy.addr))).unwrap();
    let lease = format!("{}-lease", env.ns);
    env.push(&[env.namespace(), env.configmap("settings", "1", &[])], &[]);
    let (pa, pb) = (drover_tests::free_port(), drover_tests::free_port());
    // A reaches the API server through the proxy, B directly.
    let mut a = leader_candidate(&env, &kubeconfig, "state-a", pa, &lease);
    let led = kube_support::eventually(30, || live(pa).filter(|s| s["role"] == "leader" && s["appliedDigest"].is_string()));
    let mut b = leader_candidate(&env, env.cluster.kubeconfig(), "state-b", pb, &lease);
    let stop = |a: &mut std::process::Child, b: &mut std::process::Child| {
        for c in [a, b] {
            let _ = c.kill();
            let _ = c.wait();
        }
    };
    if led.is_none() || kube_support::eventually(30, || live(pb).filter(|s| s["role"] == "standby")).is_none() {
        stop(&mut a, &mut b);
        panic!("expected A leading and B standing by: a={:?} b={:?}", live(pa), live(pb));
    }
    // From now on every request about the Lease from A reaches the server and gets no answer.
    for _ in 0..200 {
        proxy.script(&format!("/leases/{lease}"), Fault::Hang);
    }
    let took_over = kube_support::eventually(30, || live(pb).filter(|s| s["role"] == "leader"));
    // Both asked right after B took over: A must have stood down already (its last
    // renewal is more than two thirds of the lease duration old by then).
    let a_now = live(pa);
    let hung = proxy.injected().len();
    stop(&mut a, &mut b);
    assert!(took_over.is_some(), "B did not take the expired Lease over");
    assert!(hung > 0, "no Lease request was held");
    let a_role = a_now.as_ref().map(|s| s["role"].clone());
    assert_ne!(
        a_role,
        Some(Value::from("leader")),
        "two leaders: B holds the Lease while A, whose renewals get no answer, still leads: {a_now:?}"
    );
}
