//! `drover-agent plan`: before a pending bundle is applied, the operator sees exactly what
//! applying it would do — per object `create`, `update` with the changed fields,
//! `unchanged`, `prune`, `prune refused` — and nothing changes: the dir target and the
//! state directory stay byte-for-byte the same, the kube target keeps every
//! resourceVersion and receives no write (only `dryRun=All` requests). Exit 3 when
//! something would change, 0 when nothing would, 1 when the bundle would be refused.
//! Built binaries, a real registry, the FAKE API server (or a real cluster).

mod agent_support;
mod kube_support;

use agent_support::{cm, objs, snapshot, terminate, wait_until, Fx};
use drover_tests::fakekube::Verb;
use drover_tests::{run, Out};
use kube_support::Env;
use serde_json::Value;

/// `drover-agent plan -o json` with the agent's `run` flags.
fn plan(fx: &Fx) -> Out {
    let mut args = fx.agent_args(&fx.tag_ref);
    args[0] = "plan".into();
    args.extend(["-o".to_string(), "json".to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run("drover-agent", &refs, &[])
}

/// `(action, name)` of every object of a plan, sorted by name.
fn actions(p: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        p["objects"].as_array().unwrap().iter().map(|o| (o["action"].as_str().unwrap().to_string(), o["object"]["name"].as_str().unwrap().to_string())).collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

fn entry<'a>(p: &'a Value, name: &str) -> &'a Value {
    p["objects"].as_array().unwrap().iter().find(|o| o["object"]["name"] == name).unwrap_or_else(|| panic!("{name} not in {p:#}"))
}

fn pair(a: &str, n: &str) -> (String, String) {
    (a.to_string(), n.to_string())
}

#[test]
fn plan_lists_exact_changes_and_changes_nothing() {
    let fx = Fx::new();
    let keep = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: k\n  namespace: app\n  annotations:\n    drover.dev/prune: disabled\ndata:\n  v: \"1\"\n".to_string();
    let mut v1 = vec![cm("app", "a", "1"), cm("app", "b", "1"), cm("app", "e", "1"), cm("app", "f", "1")];
    v1.push(("k".into(), keep));
    let d1 = fx.push(&objs(&v1), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let d2 = fx.push(&objs(&[cm("app", "a", "2"), cm("app", "c", "1"), cm("app", "e", "1"), cm("app", "f", "1")]), 2, Some("k1"), &[]);

    let (target_before, state_before) = (snapshot(&fx.target()), snapshot(&fx.p("state")));
    let out = plan(&fx);
    assert_eq!(out.code, 3, "something would change:\n{}\n{}", out.stdout, out.stderr);
    let p = out.json();
    assert_eq!((p["digest"].as_str(), p["appliedDigest"].as_str()), (Some(d2.as_str()), Some(d1.as_str())), "{p:#}");
    assert_eq!(
        actions(&p),
        [pair("update", "a"), pair("prune", "b"), pair("create", "c"), pair("unchanged", "e"), pair("unchanged", "f"), pair("pruneRefused", "k")],
        "{p:#}"
    );
    let diff = &entry(&p, "a")["diff"];
    assert_eq!(diff, &serde_json::json!([{"path": "data.v", "before": "1", "after": "2"}]), "{p:#}");
    assert!(entry(&p, "k")["message"].as_str().unwrap().contains("drover.dev/prune: disabled"), "{p:#}");
    assert_eq!(snapshot(&fx.target()), target_before, "plan does not touch the target");
    assert_eq!(snapshot(&fx.p("state")), state_before, "plan writes no state");

    // The text form names the same.
    let mut args = fx.agent_args(&fx.tag_ref);
    args[0] = "plan".into();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = run("drover-agent", &refs, &[]);
    assert_eq!(text.code, 3);
    assert!(text.stdout.contains("data.v: \"1\" -> \"2\"") && text.stdout.contains("pruneRefused"), "{}", text.stdout);

    // Applied: nothing would change.
    assert_eq!(fx.once(&[]).code, 0);
    let out = plan(&fx);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let p = out.json();
    assert_eq!(p["changes"], false);
    assert_eq!(
        actions(&p),
        [pair("unchanged", "a"), pair("unchanged", "c"), pair("unchanged", "e"), pair("unchanged", "f"), pair("pruneRefused", "k")],
        "k stays kept by its annotation, which changes nothing: {p:#}"
    );

    // While an agent runs on the state directory (its database locked), plan still works.
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1h"]);
    wait_until(30, "agent ready", || agent_support::http_get(&listen, "/readyz").is_some_and(|r| r.0 == 200));
    fx.push(&objs(&[cm("app", "a", "3")]), 3, Some("k1"), &[]);
    let out = plan(&fx);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(entry(&out.json(), "a")["diff"][0]["after"], "3");
    assert_eq!(terminate(&mut agent), Some(0));

    // An unsigned bundle: refused, exit 1, nothing planned.
    fx.push(&objs(&[cm("app", "a", "4")]), 4, None, &[]);
    let out = plan(&fx);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("verify"), "{}", out.stderr);
}

scenarios!(kube_plan_is_a_dry_run);

fn kube_plan(env: &Env) -> Out {
    let key = env.dir.path().join("keys/drover.pub");
    let state = env.dir.path().join("state");
    let args = [
        "plan", "-o", "json", "--target", "kube", "--source", &env.reference, "--plain-http", "--trust-key", key.to_str().unwrap(),
        "--state-dir", state.to_str().unwrap(),
    ];
    run("drover-agent", &args, &[("KUBECONFIG", env.cluster.kubeconfig().to_str().unwrap()), ("POD_NAMESPACE", &env.ns)])
}

fn kube_plan_is_a_dry_run(env: &Env) {
    env.push(&[env.namespace(), env.configmap("a", "1", &[]), env.configmap("b", "1", &[]), env.configmap("e", "1", &[]), env.configmap("f", "1", &[])], &[]);
    env.agent_ok(&[]);
    let d2 = env.push(&[env.namespace(), env.configmap("a", "2", &[]), env.configmap("c", "1", &[]), env.configmap("e", "1", &[]), env.configmap("f", "1", &[])], &[]);
    let versions = |names: &[&str]| -> Vec<Option<Value>> { names.iter().map(|n| env.get("configmap", n).map(|o| o["metadata"]["resourceVersion"].clone())).collect() };
    let before = versions(&["a", "b", "c", "e"]);
    if let Some(f) = env.cluster.fake_server() {
        f.reset_request_counts();
        f.clear_requests();
    }

    let out = kube_plan(env);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let p = out.json();
    assert_eq!(p["digest"], d2.as_str());
    let ns = env.ns.clone();
    assert_eq!(
        actions(&p),
        {
            // e, f and the namespace did not change: the new bundle digest alone writes nothing
            // (objects do not carry it).
            let mut want = vec![pair("update", "a"), pair("prune", "b"), pair("create", "c"), pair("unchanged", "e"), pair("unchanged", "f"), pair("unchanged", &ns)];
            want.sort_by(|a, b| a.1.cmp(&b.1));
            want
        },
        "{p:#}"
    );
    let paths = |name: &str| -> Vec<String> { entry(&p, name)["diff"].as_array().unwrap().iter().map(|c| c["path"].as_str().unwrap().to_string()).collect() };
    assert_eq!(paths("a"), ["data.value"], "{p:#}");
    let a = &entry(&p, "a")["diff"][0];
    assert_eq!((a["before"].as_str(), a["after"].as_str()), (Some("1"), Some("2")), "{p:#}");

    assert_eq!(versions(&["a", "b", "c", "e"]), before, "no resourceVersion moved, nothing created or deleted");
    if let Some(f) = env.cluster.fake_server() {
        let counts = f.request_counts();
        assert_eq!((counts.verb(Verb::Create), counts.verb(Verb::Update), counts.verb(Verb::Delete)), (0, 0, 0), "{:?}", counts.rows());
        let writes: Vec<String> = f
            .requests()
            .into_iter()
            .filter(|r| r.method != "GET" && !r.query.contains("dryRun=All"))
            .map(|r| format!("{} {}?{}", r.method, r.path, r.query))
            .collect();
        assert!(writes.is_empty(), "plan wrote: {writes:?}");
        assert!(counts.verb(Verb::Patch) >= 2, "the applies were asked as dry runs: {:?}", counts.rows());
    }

    // Applied: the same dry run now finds nothing to change.
    env.agent_ok(&[]);
    let out = kube_plan(env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(actions(&out.json()).iter().all(|(a, _)| a == "unchanged"), "{}", out.stdout);
}

/// `plan` reads the state database by the rule the agent starts by (`agent/src/statedir.rs`,
/// issue 31): a file in it that another user owns (a database she planted) is
/// refused, naming the file and her uid, and nothing is read or changed; a `db` that is a
/// link is refused too.
#[test]
fn plan_refuses_a_state_database_holding_another_users_file() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    fx.push(&objs(&[cm("app", "a", "2")]), 2, Some("k1"), &[]);
    let db = std::path::Path::new(&fx.state()).join("db");
    let conf = db.join("conf");
    drover_tests::neighbour::chown(&conf);
    let out = plan(&fx);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("conf") && out.stderr.contains(&format!("uid {}", drover_tests::neighbour::UID)), "{}", out.stderr);
    std::os::unix::fs::lchown(&conf, Some(0), Some(0)).unwrap();

    let aside = fx.p("db-aside");
    std::fs::rename(&db, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &db).unwrap();
    let out = plan(&fx);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("not a directory") || out.stderr.contains("link"), "{}", out.stderr);
}
