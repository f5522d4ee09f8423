//! What `deploy/` and the docs ship is valid as its consumers read it: every YAML file
//! parses (all documents), the CI examples validate against the real GitHub Actions and
//! Azure Pipelines schemas (`check-jsonschema`, as their editors and linters do) and call
//! `drover` only with subcommands and flags the built binary has, the monitoring files
//! (Grafana dashboard, Prometheus rules) are well-formed and use only metrics (and
//! labels) a running `drover-agent` exports, and no tracked file points outside the
//! repository for its design.

mod agent_support;
mod kube_support;

use agent_support::{cm, http_get, objs, terminate, wait_until, Fx};
use drover_tests::{bin, Out};
use std::collections::{BTreeMap, BTreeSet};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

/// Every file under `dir` (recursively) whose name ends with one of `exts`, sorted.
fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if exts.iter().any(|x| p.to_string_lossy().ends_with(x)) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The documents of a YAML file, or the parser's error (with line and column).
fn yaml_documents(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    serde_yaml_ng::Deserializer::from_str(&text).map(|doc| Value::deserialize(doc).map_err(|e| e.to_string())).collect()
}

fn tool(cmd: &str, args: &[&str]) -> Out {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} must be installed (tests/run.sh installs it: pip install check-jsonschema): {e}"))
        .into()
}

#[test]
fn every_yaml_file_under_deploy_parses() {
    let found = files(&repo().join("deploy"), &[".yaml", ".yml"]);
    assert!(found.len() >= 10, "deploy/ has the Kubernetes manifests and two CI examples: {found:?}");
    let broken: Vec<String> =
        found.iter().filter_map(|p| yaml_documents(p).err().map(|e| format!("{}: {e}", p.strip_prefix(repo()).unwrap().display()))).collect();
    assert!(broken.is_empty(), "YAML that does not parse:\n{}", broken.join("\n"));
}

#[test]
fn ci_examples_validate_against_their_schemas() {
    let ci = repo().join("deploy/ci");
    for (file, args) in [
        ("github-actions.yml", vec!["--builtin-schema", "vendor.github-workflows"]),
        ("azure-pipelines.yml", vec!["--builtin-schema", "vendor.azure-pipelines", "--regex-variant", "python"]),
    ] {
        let path = ci.join(file);
        let mut all = args.clone();
        all.push(path.to_str().unwrap());
        let out = tool("check-jsonschema", &all);
        assert_eq!(out.code, 0, "deploy/ci/{file} does not validate:\n{}\n{}", out.stdout, out.stderr);
    }
}

/// Every shell line of the CI examples (`run:` in GitHub Actions, `script:` in Azure).
fn ci_shell_lines(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                match (k.as_str(), v.as_str()) {
                    (Some("run" | "script"), Some(script)) => out.extend(script.lines().map(str::to_string)),
                    _ => ci_shell_lines(v, out),
                }
            }
        }
        Value::Sequence(s) => s.iter().for_each(|v| ci_shell_lines(v, out)),
        _ => {}
    }
}

/// (words after `drover`, flags) of every `drover ...` call in a shell line.
fn drover_calls(line: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut calls = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if *w != "drover" || i + 1 >= words.len() {
            continue;
        }
        let rest: Vec<&str> = words[i + 1..]
            .iter()
            .copied()
            .take_while(|w| !matches!(*w, "|" | ";" | "&&" | "||" | ">" | "2>&1"))
            .collect();
        let flags = rest.iter().filter(|w| w.starts_with('-')).map(|w| w.split('=').next().unwrap().to_string()).collect();
        calls.push((rest.iter().map(|w| w.to_string()).collect(), flags));
    }
    calls
}

/// The (sub)command path a call names and its `--help`: `fleet wait` when `drover fleet
/// --help` lists `wait` as a command, else the first word alone.
fn command_help(words: &[String]) -> (String, Out) {
    let help = |path: &[String]| -> Out { Command::new(bin("drover")).args(path).arg("--help").output().expect("drover --help").into() };
    let mut path = vec![words[0].clone()];
    let mut out = help(&path);
    for next in &words[1..] {
        let listed = out.stdout.split("Commands:").nth(1).is_some_and(|cmds| {
            cmds.lines().any(|l| l.split_whitespace().next() == Some(next.as_str()))
        });
        if !listed {
            break;
        }
        path.push(next.clone());
        out = help(&path);
    }
    (path.join(" "), out)
}

#[test]
fn ci_examples_call_drover_with_flags_it_has() {
    let mut checked = 0;
    for path in files(&repo().join("deploy/ci"), &[".yml", ".yaml"]) {
        let mut lines = Vec::new();
        for doc in yaml_documents(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
            ci_shell_lines(&doc, &mut lines);
        }
        for line in &lines {
            for (words, flags) in drover_calls(line) {
                let (sub, help) = command_help(&words);
                assert_eq!(help.code, 0, "{}: `drover {sub}` is not a drover command:\n{line}\n{}", path.display(), help.stderr);
                for flag in flags {
                    let known = help.stdout.lines().any(|l| l.trim_start().split([',', ' ']).any(|w| w == flag));
                    assert!(known, "{}: `drover {sub}` has no flag {flag}:\n  {}\n`drover {sub} --help`:\n{}", path.display(), line.trim(), help.stdout);
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "the CI examples publish, promote and export: {checked} drover calls found");
}

#[test]
fn no_tracked_file_points_outside_the_repository() {
    // Built from pieces so that this file does not match itself.
    let needles = [["..", "/shared"].concat(), ["DESIGN", " §"].concat(), ["DESIGN", ".md"].concat()];
    let listed = Command::new("git").arg("-C").arg(repo()).args(["ls-files", "-z"]).output().expect("git ls-files");
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    let mut hits = Vec::new();
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let Ok(text) = std::fs::read(repo().join(&name)) else { continue };
        let text = String::from_utf8_lossy(&text);
        for (i, line) in text.lines().enumerate() {
            for n in &needles {
                if line.contains(n.as_str()) {
                    hits.push(format!("{name}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "the design the code cites is docs/design.md (cite it as \"docs/design.md §N\"); these lines point elsewhere:\n{}",
        hits.join("\n")
    );
    let design = std::fs::read_to_string(repo().join("docs/design.md")).expect("docs/design.md exists");
    for n in 1..=9 {
        assert!(design.contains(&format!("\n## {n}. ")), "docs/design.md keeps section §{n}");
    }
}

// ---------------------------------------------------------------------------------------
// deploy/monitoring: the Grafana dashboard and the Prometheus alert rules.

fn monitoring() -> PathBuf {
    repo().join("deploy/monitoring")
}

fn dashboard() -> serde_json::Value {
    let path = monitoring().join("grafana-dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn rules() -> serde_json::Value {
    let path = monitoring().join("prometheus-rules.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

/// Every string under a key named `expr`, `query` or `definition` (PromQL in dashboards).
fn promql(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v.as_str()) {
                    ("expr" | "query" | "definition", Some(q)) => out.push(q.to_string()),
                    _ => promql(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| promql(v, out)),
        _ => {}
    }
}

/// The `drover_*` metric names of a PromQL expression, each with the label names its
/// selector matches on.
fn selectors(expr: &str) -> Vec<(String, Vec<String>)> {
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !ident(b[i]) || (i > 0 && ident(b[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && ident(b[i]) {
            i += 1;
        }
        let name = &expr[start..i];
        if !name.starts_with("drover_") {
            continue;
        }
        let mut labels = Vec::new();
        let mut j = i;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if j < b.len() && b[j] == b'{' {
            let end = expr[j..].find('}').map(|e| j + e).unwrap_or_else(|| panic!("unclosed selector in {expr}"));
            for matcher in split_matchers(&expr[j + 1..end]) {
                let label: String = matcher.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !label.is_empty() {
                    labels.push(label);
                }
            }
            i = end + 1;
        }
        out.push((name.to_string(), labels));
    }
    out
}

/// `a="x", b=~"y,z"` → the matchers (commas inside quotes kept).
fn split_matchers(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Sample names of a Prometheus/OpenMetrics text page, each with its label names.
fn exported(page: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in page.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..name_end].to_string()).or_default();
        if line[name_end..].starts_with('{') {
            let body = &line[name_end + 1..line.rfind('}').expect("closing brace")];
            for m in split_matchers(body) {
                if let Some((k, _)) = m.split_once('=') {
                    labels.insert(k.trim().to_string());
                }
            }
        }
    }
    out
}

#[test]
fn dashboard_is_importable_and_rules_are_well_formed() {
    let d = dashboard();
    let inputs = d["__inputs"].as_array().expect("__inputs (Grafana import asks for the data source)");
    assert!(
        inputs.iter().any(|i| i["name"] == "DS_PROMETHEUS" && i["type"] == "datasource" && i["pluginId"] == "prometheus"),
        "{inputs:?}"
    );
    assert!(d["title"].is_string() && d["uid"].is_string() && d["schemaVersion"].is_u64(), "title, uid, schemaVersion");
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6, "{} panels", panels.len());
    let mut ids = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().unwrap_or("?");
        assert!(ids.insert(p["id"].as_u64().expect("panel id")), "duplicate panel id in {title}");
        assert!(p["type"].is_string() && p["gridPos"]["w"].is_u64() && p["gridPos"]["h"].is_u64(), "panel {title}: type, gridPos");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "panel {title} uses the imported data source");
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("panel {title} has no targets"));
        assert!(!targets.is_empty(), "panel {title} has no targets");
        for t in targets {
            assert!(t["expr"].as_str().is_some_and(|e| !e.trim().is_empty()), "panel {title}: a target without expr");
            assert_eq!(t["datasource"]["uid"], "${DS_PROMETHEUS}", "panel {title}: target data source");
        }
    }

    // The shape promtool checks: groups of rules with known keys, valid durations.
    let r = rules();
    let top: Vec<&str> = r.as_object().expect("a mapping").keys().map(String::as_str).collect();
    assert_eq!(top, ["groups"], "a plain rules file (not a PrometheusRule object)");
    let duration = |s: &str| {
        let digits = s.trim_end_matches(['s', 'm', 'h', 'd', 'w', 'y']);
        !digits.is_empty() && digits.len() < s.len() && digits.chars().all(|c| c.is_ascii_digit())
    };
    let mut alerts = BTreeSet::new();
    for g in r["groups"].as_array().expect("groups") {
        let gname = g["name"].as_str().expect("group name");
        for k in g.as_object().unwrap().keys() {
            assert!(["name", "interval", "rules", "limit", "query_offset"].contains(&k.as_str()), "group {gname}: unknown key {k}");
        }
        for rule in g["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("every rule is an alert");
            assert!(alerts.insert(name.to_string()), "duplicate alert {name}");
            for k in rule.as_object().unwrap().keys() {
                assert!(["alert", "expr", "for", "keep_firing_for", "labels", "annotations"].contains(&k.as_str()), "alert {name}: unknown key {k}");
            }
            let expr = rule["expr"].as_str().unwrap_or_else(|| panic!("alert {name}: expr"));
            let depth = expr.chars().try_fold(0i32, |d, c| {
                let d = d + i32::from(c == '(') - i32::from(c == ')');
                (d >= 0).then_some(d)
            });
            assert_eq!(depth, Some(0), "alert {name}: unbalanced parentheses in {expr}");
            if let Some(f) = rule["for"].as_str() {
                assert!(duration(f), "alert {name}: for: {f}");
            }
            assert!(["info", "warning", "critical"].contains(&rule["labels"]["severity"].as_str().unwrap_or("")), "alert {name}: severity");
            for a in ["summary", "description"] {
                assert!(rule["annotations"][a].is_string(), "alert {name}: annotations.{a}");
            }
        }
    }
    for want in ["DroverNoSuccessfulApply", "DroverBundleRejected", "DroverPruneRefused", "DroverDegraded", "DroverStateUnwritable", "DroverNoLeader"] {
        assert!(alerts.contains(want), "alert {want} missing: {alerts:?}");
    }
}

/// Labels Prometheus adds to every scraped series (target labels, `external_labels`).
const SCRAPE_LABELS: &[&str] = &["instance", "job", "cluster", "namespace", "pod"];

#[test]
fn monitoring_uses_only_metrics_the_agent_exports() {
    // A real agent: a signed bundle applied, then an untrusted one rejected, so every
    // labelled family has samples.
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref.clone(), &listen, &["--interval", "200ms"]);
    let metrics = || http_get(&listen, "/metrics").map(|(_, body)| body).unwrap_or_default();
    wait_until(30, "the first apply", || metrics().contains("drover_bundle_info{"));
    fx.push(&objs(&[cm("app", "a", "2")]), 2, Some("k2"), &[]);
    wait_until(30, "the untrusted bundle refused", || metrics().contains("drover_verification_failures_total{"));
    let page = metrics();
    assert_eq!(terminate(&mut agent), Some(0));
    let have = exported(&page);

    let mut exprs = Vec::new();
    promql(&dashboard(), &mut exprs);
    for g in rules()["groups"].as_array().unwrap() {
        for rule in g["rules"].as_array().unwrap() {
            exprs.push(rule["expr"].as_str().unwrap().to_string());
        }
    }
    let mut used = BTreeSet::new();
    for expr in &exprs {
        for (name, labels) in selectors(expr) {
            let Some(known) = have.get(&name) else {
                panic!("{name} (in `{expr}`) is not exported by drover-agent; /metrics has:\n{}", have.keys().cloned().collect::<Vec<_>>().join("\n"))
            };
            for l in labels.iter().filter(|l| !SCRAPE_LABELS.contains(&l.as_str())) {
                assert!(known.contains(l), "{name} has no label {l:?} (in `{expr}`); it has {known:?}");
            }
            used.insert(name);
        }
    }
    // Each family the README lists is on the dashboard or in an alert.
    for family in [
        "drover_polls_total",
        "drover_applies_total",
        "drover_last_successful_apply_timestamp_seconds",
        "drover_bundle_info",
        "drover_objects_total",
        "drover_health",
        "drover_prunes_total",
        "drover_prunes_refused_total",
        "drover_drift_corrections_total",
        "drover_verification_failures_total",
        "drover_leader",
    ] {
        assert!(used.contains(family), "{family} is neither on the dashboard nor in the rules: {used:?}");
    }
}

// The DroverNoLeader alert: `drover_leader` is 0 while the agent stands by, on the FAKE
// API server or a real cluster. A holder that keeps renewing the Lease but applies
// nothing (a stuck pod of another version, say) keeps every agent in standby.

scenarios!(leader_gauge_is_zero_while_another_holder_keeps_the_lease);

/// A Lease `renewTime` (RFC 3339 with microseconds) for now.
fn micro_now() -> String {
    let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_micros();
    drover_tests::fakekube::util::now_rfc3339().replace('Z', &format!(".{micros:06}Z"))
}

fn leader_gauge(port: u16) -> Option<String> {
    let page = kube_support::http_get(port, "/metrics")?;
    page.lines().find(|l| l.starts_with("drover_leader ")).map(str::to_string)
}

fn leader_gauge_is_zero_while_another_holder_keeps_the_lease(env: &kube_support::Env) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let lease = format!("{}-lease", env.ns);
    env.push(&[env.namespace(), env.configmap("settings", "1", &[])], &[]);
    let holder = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {lease}\n  namespace: default\nspec:\n  holderIdentity: stuck-pod\n  leaseDurationSeconds: 3\n  renewTime: \"{}\"\n",
        micro_now()
    );
    let out = env.kubectl(&["apply", "-f", "-"], &holder);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The other holder renews every 500 ms until told to stop.
    let renewing = Arc::new(AtomicBool::new(true));
    let renewer = {
        let (renewing, kubeconfig, lease) = (renewing.clone(), env.cluster.kubeconfig().to_path_buf(), lease.clone());
        std::thread::spawn(move || {
            while renewing.load(Ordering::SeqCst) {
                let patch = format!(r#"{{"spec":{{"renewTime":"{}"}}}}"#, micro_now());
                let _ = drover_tests::fakekube::kubectl(&kubeconfig, &["patch", "lease", &lease, "-n", "default", "--type", "merge", "-p", &patch], "");
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        })
    };
    let port = drover_tests::free_port();
    let args = ["--leader-election", "--lease-namespace", "default", "--lease-name", &lease, "--lease-duration", "3s", "--interval", "300ms"];
    let mut agent = env.agent_daemon_in("state", port, &args);
    let standby = kube_support::eventually(20, || leader_gauge(port).filter(|l| l == "drover_leader 0"));
    // Two lease durations later it still stands by: the holder is alive.
    std::thread::sleep(std::time::Duration::from_secs(6));
    let still = leader_gauge(port);
    renewing.store(false, Ordering::SeqCst);
    renewer.join().unwrap();
    let leading = kube_support::eventually(30, || leader_gauge(port).filter(|l| l == "drover_leader 1"));
    let status = kube_support::http_get(port, "/status");
    let code = terminate(&mut agent);
    let _ = env.kubectl(&["delete", "lease", &lease, "-n", "default", "--ignore-not-found"], "");
    assert!(standby.is_some(), "standby while another holder renews: drover_leader 0 (status {status:?})");
    assert_eq!(still.as_deref(), Some("drover_leader 0"), "still standby while the holder renews");
    assert!(leading.is_some(), "once the holder stops renewing the agent leads: drover_leader 1 (status {status:?})");
    assert_eq!(code, Some(0));
}

/// Each sample of a metrics page: its name and its `label="value"` pairs.
fn samples(page: &str) -> Vec<(String, Vec<String>)> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let pairs = if line[name_end..].starts_with('{') {
                split_matchers(&line[name_end + 1..line.rfind('}').expect("closing brace")]).iter().map(|m| m.trim().to_string()).collect()
            } else {
                Vec::new()
            };
            (line[..name_end].to_string(), pairs)
        })
        .collect()
}

#[test]
fn a_freshly_started_agent_exports_every_series_the_alerts_use() {
    // An agent that has done nothing yet (its channel is empty): an alert on
    // `increase(x{label="value"}[..]) > 0` sees the first failure only when the series
    // already exists at 0.
    let fx = Fx::new();
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref.clone(), &listen, &["--interval", "1h"]);
    wait_until(30, "/metrics answers", || http_get(&listen, "/metrics").is_some());
    let page = http_get(&listen, "/metrics").map(|(_, body)| body).unwrap_or_default();
    assert_eq!(terminate(&mut agent), Some(0));
    let have = samples(&page);
    for g in rules()["groups"].as_array().unwrap() {
        for rule in g["rules"].as_array().unwrap() {
            let expr = rule["expr"].as_str().unwrap();
            for (name, _) in selectors(expr) {
                // The exact matchers of the selector (`result="Failed"`), label values included.
                let wanted: Vec<String> = expr
                    .split(name.as_str())
                    .skip(1)
                    .filter_map(|rest| rest.trim_start().strip_prefix('{').and_then(|r| r.split_once('}')).map(|(m, _)| m.to_string()))
                    .flat_map(|m| split_matchers(&m))
                    .map(|m| m.replace(' ', ""))
                    .collect();
                let found = have.iter().any(|(n, pairs)| n == &name && wanted.iter().all(|w| pairs.contains(w)));
                assert!(found, "alert {}: no series {name}{{{}}} on a fresh agent's /metrics:\n{page}", rule["alert"], wanted.join(","));
            }
        }
    }
}
