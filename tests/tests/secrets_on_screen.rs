//! Secret values never reach a screen: `drover diff` and `drover-agent plan` of a bundle
//! whose Secret changes name the keys that change (as `kubectl diff` does: `***`,
//! `*** (before)`, `*** (after)`) and print no value, neither as written (base64) nor
//! decoded, in text or JSON output.

mod agent_support;
mod kube_support;

use agent_support::{objs, Fx};
use drover_tests::{run, write_files};
use kube_support::Env;

const OLD: (&str, &str) = ("aHVudGVyMg==", "hunter2");
const NEW: (&str, &str) = ("Y29ycmVjdCBob3JzZQ==", "correct horse");
const TOKENS: (&str, &str) = ("old-plain-token", "new-plain-token");

fn secret(value: (&str, &str), token: &str) -> String {
    secret_in("app", value, token)
}

fn secret_in(namespace: &str, (b64, _): (&str, &str), token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: {namespace}\ntype: Opaque\ndata:\n  password: {b64}\n  user: YWRtaW4=\nstringData:\n  token: {token}\n"
    )
}

/// Asserts that `text` holds none of the values, old or new, and names the changed key.
fn no_values(what: &str, text: &str) {
    for v in [OLD.0, OLD.1, NEW.0, NEW.1, TOKENS.0, TOKENS.1, "YWRtaW4=", "admin"] {
        assert!(!text.contains(v), "{what} shows the Secret value {v:?}:\n{text}");
    }
    assert!(text.contains("password"), "{what} names the changed key:\n{text}");
}

#[test]
fn drover_diff_names_changed_secret_keys_and_shows_no_value() {
    let tmp = tempfile::tempdir().unwrap();
    write_files(&tmp.path().join("a"), &[("db.yaml", &secret(OLD, TOKENS.0))]);
    write_files(&tmp.path().join("b"), &[("db.yaml", &secret(NEW, TOKENS.1))]);
    let (a, b) = (tmp.path().join("a").display().to_string(), tmp.path().join("b").display().to_string());
    let out = run("drover", &["diff", &a, &b], &[]);
    assert_eq!(out.code, 1, "the sides differ: {}", out.stderr);
    no_values("drover diff", &out.stdout);
    assert!(out.stdout.contains("*** (before)") && out.stdout.contains("*** (after)"), "{}", out.stdout);
    let out = run("drover", &["diff", &a, &b, "-o", "json"], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    no_values("drover diff -o json", &out.stdout);
    assert_eq!(out.json()["changed"].as_array().map(Vec::len), Some(1));
}

#[test]
fn agent_plan_on_the_dir_target_shows_no_secret_value() {
    let fx = Fx::new();
    fx.push(&objs(&[("db".into(), secret(OLD, TOKENS.0))]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    fx.push(&objs(&[("db".into(), secret(NEW, TOKENS.1))]), 2, Some("k1"), &[]);
    for format in ["table", "json"] {
        let mut args = fx.agent_args(&fx.tag_ref);
        args[0] = "plan".into();
        args.extend(["-o".to_string(), format.to_string()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run("drover-agent", &refs, &[]);
        assert_eq!(out.code, 3, "the Secret would change:\n{}\n{}", out.stdout, out.stderr);
        no_values(&format!("drover-agent plan -o {format}"), &out.stdout);
        no_values(&format!("drover-agent plan -o {format} (stderr)"), &format!("{}password", out.stderr));
    }
}

/// What is in `tmp` (plan's `TMPDIR`): its private copies of the state database (with
/// the bundle cache: Secrets).
fn copies(tmp: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(tmp).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
}

#[test]
fn plan_leaves_no_copy_of_the_state_database_when_interrupted_or_killed() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let fx = Fx::new();
    fx.push(&objs(&[("db".into(), secret(OLD, TOKENS.0))]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    // A registry that never answers keeps plan busy after it copied the database.
    let silent = drover_tests::misbehave::SilentServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let mut args = fx.agent_args(&format!("{}/fleet/edge:prod", silent.addr));
    args[0] = "plan".into();
    let start = |timeout: &str| {
        Command::new(drover_tests::bin("drover-agent"))
            .args(&args)
            .env("TMPDIR", tmp.path())
            .env("DROVER_REGISTRY_TIMEOUT", timeout)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let copied = || {
        let t = Instant::now();
        while copies(tmp.path()).is_empty() {
            assert!(t.elapsed() < Duration::from_secs(30), "plan never made its copy");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Interrupted (SIGTERM, as a terminal's ^C or a CI timeout): the copy goes with it.
    let mut p = start("60s");
    copied();
    assert!(Command::new("kill").args(["-TERM", &p.id().to_string()]).status().unwrap().success());
    p.wait().unwrap();
    assert_eq!(copies(tmp.path()), Vec::<String>::new(), "SIGTERM left the copy behind");
    // Killed outright: the next plan sweeps the copy away.
    let mut p = start("60s");
    copied();
    p.kill().unwrap();
    p.wait().unwrap();
    assert_eq!(copies(tmp.path()).len(), 1, "a killed plan cannot clean up");
    let mut p = start("1s");
    p.wait().unwrap();
    assert_eq!(copies(tmp.path()), Vec::<String>::new(), "the next plan removes a killed plan's copy");
}

scenarios!(kube_plan_shows_neither_the_bundle_nor_the_live_secret_value);

fn kube_plan_shows_neither_the_bundle_nor_the_live_secret_value(env: &Env) {
    env.push(&[env.namespace(), secret_in(&env.ns, OLD, TOKENS.0)], &[]);
    env.agent_ok(&[]);
    env.push(&[env.namespace(), secret_in(&env.ns, NEW, TOKENS.1)], &[]);
    let key = env.path("keys/drover.pub");
    let state = env.path("state");
    for format in ["table", "json"] {
        let args = [
            "plan", "-o", format, "--target", "kube", "--source", &env.reference, "--plain-http", "--trust-key", key.to_str().unwrap(),
            "--state-dir", state.to_str().unwrap(),
        ];
        let out = run("drover-agent", &args, &[("KUBECONFIG", env.cluster.kubeconfig().to_str().unwrap()), ("POD_NAMESPACE", &env.ns)]);
        assert_eq!(out.code, 3, "the Secret would change:\n{}\n{}", out.stdout, out.stderr);
        no_values(&format!("kube plan -o {format}"), &out.stdout);
    }
}

/// The Secret as `kubectl get -o yaml` exports it after a `kubectl apply`: its values are
/// also in the `kubectl.kubernetes.io/last-applied-configuration` annotation (base64 in
/// `data`, plain in `stringData`).
fn exported_secret((b64, _): (&str, &str), token: &str) -> String {
    let last = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"annotations": {}, "name": "db", "namespace": "app"},
        "data": {"password": b64, "user": "YWRtaW4="}, "stringData": {"token": token},
    });
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: app\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: {}\ntype: Opaque\ndata:\n  password: {b64}\n  user: YWRtaW4=\nstringData:\n  token: {token}\n",
        serde_json::to_string(&last.to_string()).unwrap()
    )
}

#[test]
fn drover_diff_of_an_exported_secret_shows_no_value_from_its_last_applied_annotation() {
    let tmp = tempfile::tempdir().unwrap();
    write_files(&tmp.path().join("a"), &[("db.yaml", &exported_secret(OLD, TOKENS.0))]);
    write_files(&tmp.path().join("b"), &[("db.yaml", &exported_secret(NEW, TOKENS.1))]);
    let (a, b) = (tmp.path().join("a").display().to_string(), tmp.path().join("b").display().to_string());
    for format in ["table", "json"] {
        let out = run("drover", &["-o", format, "diff", &a, &b], &[]);
        assert_eq!(out.code, 1, "the sides differ: {}", out.stderr);
        no_values(&format!("drover diff -o {format}"), &out.stdout);
        assert!(out.stdout.contains("last-applied-configuration"), "the changed annotation is named:\n{}", out.stdout);
    }
}

#[test]
fn agent_plan_of_an_exported_secret_shows_no_value_from_its_last_applied_annotation() {
    let fx = Fx::new();
    fx.push(&objs(&[("db".into(), exported_secret(OLD, TOKENS.0))]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    fx.push(&objs(&[("db".into(), exported_secret(NEW, TOKENS.1))]), 2, Some("k1"), &[]);
    for format in ["table", "json"] {
        let mut args = fx.agent_args(&fx.tag_ref);
        args[0] = "plan".into();
        args.extend(["-o".to_string(), format.to_string()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run("drover-agent", &refs, &[]);
        assert_eq!(out.code, 3, "the Secret would change:\n{}\n{}", out.stdout, out.stderr);
        no_values(&format!("drover-agent plan -o {format}"), &out.stdout);
        no_values(&format!("drover-agent plan -o {format} (log)"), &format!("{}password", out.stderr));
    }
}

#[test]
fn drift_and_history_of_an_exported_secret_show_no_value() {
    let fx = Fx::new();
    fx.push(&objs(&[("db".into(), exported_secret(OLD, TOKENS.0))]), 1, Some("k1"), &[]);
    let first = fx.once(&["--drift", "report"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    // Someone puts the new values into the target by hand (both the values and the
    // annotation, as `kubectl apply` would).
    let file = fx.target().join("manifests/app/Secret.core.db.yaml");
    assert!(file.is_file(), "{:?}", agent_support::snapshot(&fx.target()).keys());
    std::fs::write(&file, exported_secret(NEW, TOKENS.1)).unwrap();
    let resync = fx.once(&["--drift", "report", "--resync", "0s"]);
    assert_eq!(resync.code, 0, "{}", resync.stderr);
    let st = fx.status();
    let drifted = st["drifted"].to_string();
    assert!(drifted.contains("data.password") && drifted.contains("last-applied-configuration"), "the drift names the fields: {st:#}");
    no_values("status -o json (drift)", &st.to_string());
    let text = run_ok_text(&fx, "status");
    no_values("status (drift)", &format!("{text}password"));
    no_values("history -o json", &format!("{}password", serde_json::Value::Array(fx.history())));
    no_values("history", &format!("{}password", run_ok_text(&fx, "history")));
    no_values("the agent's log", &format!("{}{}password", first.stderr, resync.stderr));
}

fn run_ok_text(fx: &Fx, cmd: &str) -> String {
    drover_tests::run_ok("drover-agent", &[cmd, "--endpoint", "http://127.0.0.1:9", "--state-dir", &fx.state()], &[]).stdout
}
