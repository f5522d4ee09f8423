//! One agent, three sources (docs/agent.md "Several sources"): a platform team and two
//! tenants, each with its own channel and its own signing key, in one `drover-agent` with
//! a `sources:` list. Real binaries, a real registry, keys from `drover keygen`, bundles
//! from `drover push`, against the FAKE API server (or a real cluster, `kube_support`).
//!
//! - every source is applied with its own key; an object team-a's bundle puts in team-b's
//!   namespace is refused and named while the rest of team-a's bundle is applied;
//! - team-b (a custom resource) `dependsOn: [platform]` (its CRD): it is `Waiting`, naming
//!   the platform and why, while the platform's channel is empty and while its bundle is
//!   refused (signed with team-a's key), and is applied once the platform is in;
//! - a bundle for team-b signed with team-a's key is refused: nothing of it is applied;
//! - `status` lists every source, `--source NAME` one; `history --source NAME` its own;
//! - a registry that accepts the connection and never answers (a stall) holds up only its
//!   own source: the others' first applies and a new bundle's apply are timed while the
//!   stalled request hangs; `/status` and `status -o json` list every source, `/metrics`
//!   has each series per source, and `hold`/`release --source` act on one source.

mod kube_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use drover_tests::misbehave::SilentServer;
use drover_tests::{run, Out};
use kube_support::{eventually, http_get, Env};
use serde_json::Value;

scenarios!(platform_and_two_tenants_in_one_agent, a_stalled_registry_never_delays_the_other_sources);

/// Runs the agent once with the config file `cfg` (state in `state/`, the agent's
/// namespace the scenario's).
fn agent(env: &Env, cfg: &Path) -> Out {
    let state = env.path("state");
    let args = ["run", "--once", "--target", "kube", "--config", cfg.to_str().unwrap(), "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0"];
    run("drover-agent", &args, &[("KUBECONFIG", env.cluster.kubeconfig().to_str().unwrap()), ("POD_NAMESPACE", &env.ns)])
}

/// `drover-agent status|history --state-dir state -o json` plus `extra`, read from the
/// state directory.
fn query(env: &Env, what: &str, extra: &[&str]) -> Value {
    let state = env.path("state");
    let mut args = vec![what, "--state-dir", state.to_str().unwrap(), "--endpoint", "http://127.0.0.1:1", "-o", "json"];
    args.extend_from_slice(extra);
    let out = run("drover-agent", &args, &[]);
    assert_eq!(out.code, 0, "{what} {extra:?}: {}", out.stderr);
    out.json()
}

/// The status of source `name` (from `status -o json`'s `sources`).
fn source(status: &Value, name: &str) -> Value {
    status["sources"].as_array().expect("sources").iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no source {name} in {status:#}")).clone()
}

fn configmap_in(ns: &str, name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  value: {value:?}\n")
}

fn namespace(ns: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")
}

fn widget_in(env: &Env, ns: &str, size: u32) -> String {
    format!("apiVersion: {}/v1\nkind: Widget\nmetadata:\n  name: gizmo\n  namespace: {ns}\nspec:\n  size: {size}\n", env.group)
}

fn platform_and_two_tenants_in_one_agent(env: &Env) {
    let (ns_a, ns_b) = (env.extra_namespace("team-a"), env.extra_namespace("team-b"));
    env.kubectl_apply(&namespace(&env.ns));
    let keys: Vec<_> = ["platform", "team-a", "team-b"].iter().map(|k| env.keygen(k)).collect();
    let (platform_key, team_a_key, team_b_key) = (&keys[0].0, &keys[1].0, &keys[2].0);
    let refs: Vec<String> = ["platform", "team-a", "team-b"].iter().map(|r| env.reg.reference(&format!("fleet/{r}:prod"))).collect();
    let cfg = env.path("agent.yaml");
    let yaml = format!(
        "plainHttp: true\nresync: 0s\nhealthTimeout: 20s\nsources:\n\
- name: platform\n  source: {p}\n  trustKeys: [{pk}]\n\
- name: team-a\n  source: {a}\n  trustKeys: [{ak}]\n  allowedNamespaces: [{ns_a}]\n\
- name: team-b\n  source: {b}\n  trustKeys: [{bk}]\n  allowedNamespaces: [{ns_b}]\n  dependsOn: [platform]\n",
        p = refs[0],
        a = refs[1],
        b = refs[2],
        pk = keys[0].1.display(),
        ak = keys[1].1.display(),
        bk = keys[2].1.display(),
    );
    std::fs::write(&cfg, yaml).unwrap();

    // 1. The platform's channel is empty. team-a is applied but for its stray object in
    //    team-b's namespace; team-b waits for the platform, naming it and why.
    env.push_signed(&refs[1], &[namespace(&ns_a), configmap_in(&ns_a, "settings", "1"), configmap_in(&ns_b, "intruder", "1")], team_a_key, &[]);
    env.push_signed(&refs[2], &[namespace(&ns_b), widget_in(env, &ns_b, 1)], team_b_key, &[]);
    let out = agent(env, &cfg);
    assert_eq!(out.code, 1, "the platform is unreachable and team-b waits:\n{}", out.stderr);
    let st = query(env, "status", &[]);
    assert_eq!(st["sources"].as_array().map(Vec::len), Some(3), "status lists every source: {st:#}");
    let a = source(&st, "team-a");
    assert_eq!(a["lastAttempt"]["result"], "Applied", "{a:#}");
    let reason = a["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("ConfigMap {ns_b}/intruder")) && reason.contains("not allowed"), "the stray object is named: {reason}");
    assert_eq!(env.get_in(&ns_a, "configmap", "settings").expect("team-a's ConfigMap")["data"]["value"], "1");
    assert!(env.get_in(&ns_b, "configmap", "intruder").is_none(), "the stray object never reaches team-b's namespace");
    let history = query(env, "history", &["--source", "team-a", "--limit", "1"]);
    let (action, message) = Env::action(&history[0], "ConfigMap", "intruder");
    assert_eq!(action, "refused", "{message}");
    assert!(message.contains(&ns_b), "{message}");
    let b = source(&st, "team-b");
    assert_eq!(b["lastAttempt"]["result"], "Waiting", "{b:#}");
    let reason = b["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("waiting for platform: its source is unreachable") && reason.contains("not found"), "names the dependency and why: {reason}");
    assert_eq!(b["waiting"]["on"][0], "platform", "{b:#}");
    assert!(b["appliedDigest"].is_null(), "{b:#}");
    assert!(env.kubectl(&["get", "customresourcedefinition", &format!("widgets.{}", env.group)], "").code != 0, "no CRD, no Widget");
    assert_eq!(source(&st, "platform")["lastAttempt"]["result"], "Failed");

    // 2. The platform's bundle signed with team-a's key: refused (the platform trusts only
    //    its own key); team-b still waits, now because the platform's bundle was refused.
    let forged = env.push_signed(&refs[0], &[env.crd()], team_a_key, &[]);
    let out = agent(env, &cfg);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let st = query(env, "status", &[]);
    let p = source(&st, "platform");
    assert_eq!(p["lastAttempt"]["result"], "Rejected", "{p:#}");
    let b = source(&st, "team-b");
    assert_eq!(b["lastAttempt"]["result"], "Waiting", "{b:#}");
    let reason = b["lastAttempt"]["reason"].as_str().unwrap();
    let digest = forged["digest"].as_str().unwrap();
    assert!(reason.contains("platform: its bundle") && reason.contains(digest) && reason.contains("was refused"), "{reason}");
    assert!(env.kubectl(&["get", "customresourcedefinition", &format!("widgets.{}", env.group)], "").code != 0, "the forged platform bundle is not applied");

    // 3. The platform's own bundle: applied (the CRD is Established: Healthy), then
    //    team-b in the same run.
    env.push_signed(&refs[0], &[env.crd()], platform_key, &[]);
    let out = agent(env, &cfg);
    let st = query(env, "status", &[]);
    assert_eq!(out.code, 0, "{}\n{st:#}", out.stderr);
    for name in ["platform", "team-a", "team-b"] {
        let s = source(&st, name);
        assert_eq!(s["lastAttempt"]["result"], "Applied", "{s:#}");
        assert_eq!(s["health"], "Healthy", "{s:#}");
    }
    let widget = env.get_in(&ns_b, &format!("widgets.{}", env.group), "gizmo").expect("team-b's Widget once the platform's CRD is in");
    assert_eq!(widget["spec"]["size"], 1);
    assert_eq!(widget["metadata"]["annotations"]["drover.dev/source"], refs[2].as_str(), "owned by team-b's source");

    // 4. A bundle for team-b signed with team-a's key: refused, nothing of it applied; the
    //    other sources go on.
    let forged = env.push_signed(&refs[2], &[namespace(&ns_b), widget_in(env, &ns_b, 2), configmap_in(&ns_b, "planted", "1")], team_a_key, &[]);
    let out = agent(env, &cfg);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let b = query(env, "status", &["--source", "team-b"]);
    assert_eq!(b["sources"].as_array().map(Vec::len), Some(1), "{b:#}");
    assert_eq!(b["name"], "team-b", "one source: its fields at the top level: {b:#}");
    assert_eq!(b["lastAttempt"]["result"], "Rejected", "{b:#}");
    assert_eq!(b["lastAttempt"]["digest"], forged["digest"], "{b:#}");
    assert_eq!(env.get_in(&ns_b, &format!("widgets.{}", env.group), "gizmo").unwrap()["spec"]["size"], 1, "nothing of the forged bundle is applied");
    assert!(env.get_in(&ns_b, "configmap", "planted").is_none());
    let st = query(env, "status", &[]);
    assert_eq!(source(&st, "platform")["lastAttempt"]["result"], "Applied");
    assert_eq!(source(&st, "team-a")["lastAttempt"]["result"], "Applied");

    // Each source's history is its own; the agent's Events name their source.
    let h = query(env, "history", &["--source", "team-b"]);
    assert!(h.as_array().unwrap().iter().all(|a| a["source"] == refs[2].as_str() && a["name"] == "team-b"), "{h:#}");
    let events = env.kubectl_ok(&["get", "events.events.k8s.io", "-n", &env.ns, "-o", "json"]).json();
    let notes: Vec<&str> = events["items"].as_array().unwrap().iter().filter_map(|e| e["note"].as_str()).collect();
    assert!(notes.iter().any(|n| n.starts_with("[team-b] Refused")), "{notes:#?}");
    assert!(notes.iter().any(|n| n.starts_with("[team-b] waiting for platform")), "{notes:#?}");
    assert!(notes.iter().any(|n| n.starts_with("[platform] Applied")), "{notes:#?}");
}

/// The sample of `name` whose labels include every one of `labels`, from a `/metrics` page.
fn sample(page: &str, name: &str, labels: &[&str]) -> Option<f64> {
    page.lines().filter(|l| l.starts_with(&format!("{name}{{"))).find(|l| labels.iter().all(|x| l.contains(x))).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The status of source `name` from the running agent's `/status`.
fn live(port: u16, name: &str) -> Option<Value> {
    let st: Value = serde_json::from_str(&http_get(port, "/status")?).ok()?;
    Some(source(&st, name))
}

fn a_stalled_registry_never_delays_the_other_sources(env: &Env) {
    env.kubectl_apply(&namespace(&env.ns));
    let silent = SilentServer::start();
    let (one, two) = (env.reg.reference("fleet/one:prod"), env.reg.reference("fleet/two:prod"));
    let stalled = format!("{}/fleet/stalled:prod", silent.addr);
    let public = env.path("keys/drover.pub");
    let cfg = env.path("agent.yaml");
    std::fs::write(
        &cfg,
        format!(
            "plainHttp: true\ntrustKeys: [{}]\ninterval: 1s\nhealthTimeout: 20s\nsources:\n- name: stalled\n  source: {stalled}\n- name: one\n  source: {one}\n- name: two\n  source: {two}\n",
            public.display()
        ),
    )
    .unwrap();
    env.push_to(&one, &[env.configmap("one", "1", &[])], &[]);
    env.push_to(&two, &[env.configmap("two", "1", &[])], &[]);
    let port = drover_tests::free_port();
    let state = env.path("state");
    let started = Instant::now();
    let mut agent = Running(Command::new(drover_tests::bin("drover-agent"))
        .args(["run", "--target", "kube", "--config", cfg.to_str().unwrap(), "--state-dir", state.to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", env.cluster.kubeconfig())
        .env("POD_NAMESPACE", &env.ns)
        // A stalled request hangs this long before it fails: far longer than the bounds below.
        .env("DROVER_REGISTRY_TIMEOUT", "120s")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drover-agent"));
    let applied = |name: &str, digest: Option<&str>| {
        eventually(60, || live(port, name).filter(|s| s["lastAttempt"]["result"] == "Applied" && digest.is_none_or(|d| s["appliedDigest"] == d)))
    };
    // The other sources' first applies do not wait for the stalled one's poll.
    let first = applied("one", None).and(applied("two", None));
    let took = started.elapsed();
    assert!(first.is_some(), "one and two applied next to a stalled source");
    assert!(silent.accepted() >= 1, "the stalled source's request is in flight");
    let st = live(port, "stalled").expect("/status lists the stalled source");
    assert!(st["lastAttempt"].is_null(), "its first poll still hangs: {st:#}");
    assert!(took < Duration::from_secs(40), "first applies took {took:?} (a stalled request hangs 120 s)");
    // A new bundle on `one` is applied within a few polls while the stall goes on.
    let pushed = Instant::now();
    let d2 = env.push_to(&one, &[env.configmap("one", "2", &[])], &[])["digest"].as_str().unwrap().to_string();
    assert!(applied("one", Some(&d2)).is_some(), "the new bundle of one is applied");
    let took = pushed.elapsed();
    assert!(took < Duration::from_secs(30), "the new bundle took {took:?} next to a stalled source");
    assert!(live(port, "stalled").unwrap()["lastAttempt"].is_null(), "the stall goes on meanwhile");
    assert_eq!(env.get("configmap", "one").unwrap()["data"]["value"], "2");

    // /status and `status -o json` list every source; /metrics has each series per source.
    let out = run("drover-agent", &["status", "--state-dir", state.to_str().unwrap(), "-o", "json"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let names: Vec<String> = out.json()["sources"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["stalled", "one", "two"]);
    let page = http_get(port, "/metrics").expect("/metrics");
    for name in ["stalled", "one", "two"] {
        let src = format!("source=\"{name}\"");
        for (series, label) in [
            ("drover_polls_total", "result=\"Applied\""),
            ("drover_applies_total", "result=\"Failed\""),
            ("drover_objects_total", "outcome=\"created\""),
            ("drover_verification_failures_total", "reason=\"signature\""),
            ("drover_health", "state=\"Healthy\""),
            ("drover_held", ""),
            ("drover_waiting", ""),
            ("drover_prunes_total", ""),
            ("drover_api_writes_total", "verb=\"patch\""),
        ] {
            assert!(sample(&page, series, &[&src, label]).is_some(), "{series} of source {name} missing:\n{page}");
        }
    }
    assert_eq!(sample(&page, "drover_polls_total", &["source=\"one\"", "result=\"Applied\""]).map(|v| v >= 2.0), Some(true), "{page}");
    assert_eq!(sample(&page, "drover_polls_total", &["source=\"stalled\"", "result=\"Applied\""]), Some(0.0), "{page}");
    assert!(sample(&page, "drover_bundle_info", &["source=\"two\"", &format!("reference=\"{two}\"")]).is_some(), "{page}");

    // A hold of one source holds that source only.
    let hold = ["hold", "--state-dir", state.to_str().unwrap(), "--source", "two", "--reason", "change freeze for two"];
    let out = run("drover-agent", &hold, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let unknown = run("drover-agent", &["hold", "--state-dir", state.to_str().unwrap(), "--source", "three", "--reason", "x"], &[]);
    assert_eq!(unknown.code, 2, "an unknown source is a usage error: {}", unknown.stderr);
    assert!(unknown.stderr.contains("\"three\"") && unknown.stderr.contains("stalled, one, two"), "{}", unknown.stderr);
    let d3 = env.push_to(&two, &[env.configmap("two", "3", &[])], &[])["digest"].as_str().unwrap().to_string();
    let d4 = env.push_to(&one, &[env.configmap("one", "4", &[])], &[])["digest"].as_str().unwrap().to_string();
    assert!(applied("one", Some(&d4)).is_some(), "one is not held");
    let held = eventually(30, || live(port, "two").filter(|s| s["held"]["waitingDigest"] == d3.as_str()));
    assert!(held.is_some(), "two holds its new bundle: {:#}", live(port, "two").unwrap_or_default());
    assert_eq!(env.get("configmap", "two").unwrap()["data"]["value"], "1");
    let out = run("drover-agent", &["release", "--state-dir", state.to_str().unwrap(), "--source", "two"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(applied("two", Some(&d3)).is_some(), "released: two applies its new bundle");

    assert_eq!(agent.terminate(), Some(0), "SIGTERM abandons the stalled poll and exits 0");
}

/// A running agent, killed when the test ends early (a failed assertion).
struct Running(std::process::Child);

impl Running {
    /// SIGTERM, then the exit code (bounded: killed after 15 s).
    fn terminate(&mut self) -> Option<i32> {
        let _ = Command::new("kill").arg("-TERM").arg(self.0.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(st) = self.0.try_wait().unwrap() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("agent did not exit within 15 s of SIGTERM");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
