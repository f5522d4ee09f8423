//! Bring your own renderer: a workload rendered by a command (`spec.render` in
//! `workload.yaml`) instead of templates, through the real `drover render`, `publish` and
//! `inspect`. The tool is a small shell script (helm and kustomize are not installable
//! here); the script records what it was given (stdin, the `DROVER_*` variables, what of
//! drover's environment leaked) in the ConfigMap it prints.

mod platform_support;

use std::path::Path;
use std::time::{Duration, Instant};

use drover_tests::{run, Out, Registry};
use platform_support::*;
use serde_json::{json, Value};

/// The renderer: prints one ConfigMap in `$DROVER_NAMESPACE` holding its stdin (the
/// composed values), the four variables, and what it sees of secrets and HOME.
const RENDER_SH: &str = r#"#!/bin/sh
values=$(cat)
echo "rendering $DROVER_WORKLOAD for $DROVER_CLUSTER_TYPE" >&2
cat <<EOF
# a comment, then the object
apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered
  namespace: $DROVER_NAMESPACE
data:
  values: '$values'
  environment: "$DROVER_ENVIRONMENT"
  clusterType: "$DROVER_CLUSTER_TYPE"
  workload: "$DROVER_WORKLOAD"
  namespace: "$DROVER_NAMESPACE"
  secret: "${AWS_SECRET_ACCESS_KEY-unset}"
  home: "$(case $HOME in */drover-render-home-*) echo fresh;; *) echo inherited;; esac), $(ls -A "$HOME" | wc -l | tr -d ' ') entries"
EOF
# Where HOME was, to see it is gone afterwards (not in the output: it differs per run).
echo "$HOME" > "last-home-$DROVER_CLUSTER_TYPE"
"#;

/// `workload.yaml` of workload `tool` (namespace `tools`) on `site: cloud` cluster types
/// (cloud and lab in [`base`]), rendered by `command`.
fn tool_workload(command: &str, extra: &str) -> String {
    format!(
        "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: tools\n  selector:\n    matchLabels: {{site: cloud}}\n  render:\n    command: {command}\n{extra}values:\n  x: defaults\n  keep: [1, 2]\n"
    )
}

/// [`base`] plus workload `tool` rendered by `script` (written executable as
/// `workloads/tool/render.sh`).
fn platform(root: &Path, script: &str, extra: &str) {
    base(root);
    write(
        root,
        &[
            ("workloads/tool/workload.yaml", &tool_workload("[./render.sh]", extra)),
            ("workloads/tool/render.sh", script),
            // A cluster-type override for the tool reaches its stdin.
            (
                "cluster-types/cloud.yaml",
                "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: cloud}\nworkloads:\n  tool: {x: from-cloud}\n",
            ),
        ],
    );
    chmod_x(&root.join("workloads/tool/render.sh"));
}


/// `drover render` with a secret in drover's own environment (it must not reach the tool).
fn render_with_secret(root: &Path, out: &Path) -> Out {
    run(
        "drover",
        &["render", root.to_str().unwrap(), "--env", "dev", "--out", out.to_str().unwrap(), "--force"],
        &[("AWS_SECRET_ACCESS_KEY", "hunter2")],
    )
}

#[test]
fn command_rendered_workload_follows_selectors_values_and_variables() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("p");
    platform(&root, RENDER_SH, "");
    let out = t.path().join("out");
    let o = render_with_secret(&root, &out);
    assert_eq!(o.code, 0, "render:\n{}\n{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("rendering tool"), "a successful renderer's stderr is not shown: {}", o.stderr);

    // Only where the selector picks it (site: cloud): cloud and lab, not edge.
    let has = |ct: &str| out.join(ct).join("manifests/tools/ConfigMap.core.rendered.yaml").is_file();
    assert_eq!([has("edge"), has("cloud"), has("lab")], [false, true, true]);
    for (ct, x) in [("cloud", "from-cloud"), ("lab", "defaults")] {
        let cm = object(&out, ct, "tools/ConfigMap.core.rendered.yaml");
        let d = &cm["data"];
        // The composed values as JSON on stdin: the cluster type's override reached it.
        let values: Value = serde_json::from_str(d["values"].as_str().unwrap()).unwrap();
        assert_eq!(values, json!({"x": x, "keep": [1, 2]}), "{ct}");
        assert_eq!((d["environment"].as_str(), d["clusterType"].as_str()), (Some("dev"), Some(ct)));
        assert_eq!((d["workload"].as_str(), d["namespace"].as_str()), (Some("tool"), Some("tools")));
        assert_eq!(d["secret"], "unset", "drover's environment does not reach the tool");
        assert_eq!(d["home"], "fresh, 0 entries", "an empty HOME of its own");
        let home = std::fs::read_to_string(root.join(format!("workloads/tool/last-home-{ct}"))).unwrap();
        assert!(!Path::new(home.trim()).exists(), "HOME is removed afterwards: {home}");
        // The same canonicalisation as template output: keys sorted, comment gone.
        let text = std::fs::read_to_string(out.join(ct).join("manifests/tools/ConfigMap.core.rendered.yaml")).unwrap();
        assert!(text.starts_with("apiVersion: v1\ndata:\n"), "{text}");
    }
    // Template workloads render next to it as before.
    assert!(out.join("edge/manifests/app/ConfigMap.core.values.yaml").is_file());
}

#[test]
fn publish_records_the_renderer_and_inspect_names_it() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let (key, _) = keygen(t.path());
    let root = t.path().join("p");
    platform(&root, RENDER_SH, "    versionCommand: [sh, -c, 'echo render.sh 1.4.2']\n");
    let publish = |prefix: &str| {
        let args = ["publish", root.to_str().unwrap(), "--env", "dev", "--registry", prefix, "--key", key.to_str().unwrap(), "--plain-http", "--revision", "r1", "-o", "json"];
        let o = run("drover", &args, &[("DROVER_KEY_PASSWORD", "")]);
        assert_eq!(o.code, 0, "publish:\n{}\n{}", o.stdout, o.stderr);
        o.json()
    };
    let inspect = |reference: &str, json: bool| {
        let mut args = vec!["inspect", reference, "--plain-http"];
        if json {
            args.extend(["-o", "json"]);
        }
        let o = run("drover", &args, &[]);
        assert_eq!(o.code, 0, "inspect {reference}: {}", o.stderr);
        o
    };
    publish(&reg.reference("fleet"));

    let cloud = inspect(&reg.reference("fleet/cloud:dev"), true).json();
    let want = json!([
        {"name": "app", "renderer": "templates"},
        {"name": "tool", "renderer": "command", "command": ["./render.sh"], "versionCommand": ["sh", "-c", "echo render.sh 1.4.2"], "version": "render.sh 1.4.2"},
    ]);
    assert_eq!(cloud["config"]["workloads"], want, "{cloud:#}");
    let text = inspect(&reg.reference("fleet/cloud:dev"), false).stdout;
    assert!(text.contains(r#"command: ["./render.sh"]"#) && text.contains("render.sh 1.4.2"), "{text}");
    assert!(text.contains("1 by a command, 1 by templates"), "{text}");
    // A cluster type only templates render: nothing recorded, the config as before.
    let edge = inspect(&reg.reference("fleet/edge:dev"), true).json();
    assert!(edge["config"].get("workloads").is_none(), "{edge:#}");
    assert!(inspect(&reg.reference("fleet/edge:dev"), false).stdout.contains("not recorded"));

    // Same inputs, same tool: the same content and the same config (but the sequence),
    // in a second repository; and a republish leaves the channel alone.
    let again = publish(&reg.reference("other"));
    let twin = inspect(&reg.reference("other/cloud:dev"), true).json();
    assert_eq!(twin["layer"]["digest"], cloud["layer"]["digest"]);
    let without_sequence = |v: &Value| {
        let mut c = v["config"].clone();
        c.as_object_mut().unwrap().remove("sequence");
        c
    };
    assert_eq!(without_sequence(&twin), without_sequence(&cloud));
    assert!(again["results"].as_array().unwrap().iter().all(|r| r["changed"] == true));
    let republished = publish(&reg.reference("fleet"));
    assert!(republished["results"].as_array().unwrap().iter().all(|r| r["changed"] == false), "{republished:#}");
}

/// Renders and expects failure: exit 1, nothing written; returns stderr.
fn render_fails(root: &Path, out: &Path) -> String {
    let o = render_with_secret(root, out);
    assert_eq!(o.code, 1, "render must fail:\n{}\n{}", o.stdout, o.stderr);
    assert!(!out.exists(), "nothing written on error");
    o.stderr
}

#[test]
fn failing_renderer_names_the_workload_and_shows_its_stderr() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("p");
    let script = "#!/bin/sh\nfor i in $(seq 1 40); do echo \"progress $i\" >&2; done\nprintf '\\033[31mError: chart requires kubeVersion >= 1.30\\033[0m\\n' >&2\nexit 3\n";
    platform(&root, script, "");
    let err = render_fails(&root, &t.path().join("out"));
    for want in ["cluster type cloud in environment dev", "workload tool", r#"["./render.sh"]"#, "exited with status 3", "Error: chart requires kubeVersion >= 1.30", "progress 40"] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert!(!err.contains("progress 10\n") && !err.contains('\u{1b}'), "the last lines only, control characters removed:\n{err}");

    // publish fails the same way and pushes nothing.
    let reg = Registry::start();
    let (key, _) = keygen(t.path());
    let args = ["publish", root.to_str().unwrap(), "--env", "dev", "--registry", &reg.reference("fleet"), "--key", key.to_str().unwrap(), "--plain-http", "--revision", "r1"];
    let o = run("drover", &args, &[("DROVER_KEY_PASSWORD", "")]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("workload tool") && o.stderr.contains("kubeVersion >= 1.30"), "{}", o.stderr);
    for repo in ["edge", "cloud", "lab", "drover-releases"] {
        assert!(tags(&reg.addr, &format!("fleet/{repo}")).is_empty(), "nothing pushed to {repo}");
    }
}

#[test]
fn hanging_renderer_is_stopped_at_its_timeout_with_everything_it_started() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("p");
    let pids = t.path().join("pids");
    // The tool starts a helper in the background, then hangs.
    let script = format!("#!/bin/sh\necho 'fetching dependencies' >&2\nsleep 300 &\necho $$ $! > {}\nsleep 300\n", pids.display());
    platform(&root, &script, "    timeout: 1s\n");
    let start = Instant::now();
    let err = render_fails(&root, &t.path().join("out"));
    let took = start.elapsed();
    assert!(took < Duration::from_secs(30), "stopped at its timeout, not after 300 s: {took:?}");
    assert!(err.contains("workload tool") && err.contains("did not finish within 1s") && err.contains("fetching dependencies"), "{err}");
    // The tool and its background helper are gone (the process group was killed).
    let text = std::fs::read_to_string(&pids).unwrap();
    for pid in text.split_whitespace() {
        let alive = Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ");
        assert!(!alive, "process {pid} of the renderer still runs");
    }
}

#[test]
fn renderer_output_follows_the_template_rules() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("p");
    let out = t.path().join("out");
    // Invalid YAML: named with the rendered line and the tool's stderr.
    platform(&root, "#!/bin/sh\necho 'warning: deprecated value' >&2\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: a, namespace: tools\\n'\n", "");
    let err = render_fails(&root, &out);
    for want in ["cluster type cloud in environment dev", "workloads/tool [output of spec.render.command] (document 1)", "invalid YAML", "warning: deprecated value"] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    // An object outside the workload's namespace: the namespace rule of templates.
    write(&root, &[("workloads/tool/render.sh", "#!/bin/sh\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: a, namespace: kube-system}\\n'\n")]);
    let err = render_fails(&root, &out);
    assert!(err.contains("is in namespace kube-system, but workload tool deploys into namespace tools"), "{err}");
    // Not executable / missing: named.
    write(&root, &[("workloads/tool/workload.yaml", &tool_workload("[./missing.sh]", ""))]);
    let err = render_fails(&root, &out);
    assert!(err.contains("workload tool") && err.contains("./missing.sh"), "{err}");
    // Both templates/ and spec.render: refused at load, naming the file.
    write(&root, &[("workloads/tool/workload.yaml", &tool_workload("[./render.sh]", "")), ("workloads/tool/templates/x.yaml", VALUES_TEMPLATE)]);
    let err = render_fails(&root, &out);
    assert!(err.contains("workloads/tool/workload.yaml") && err.contains("spec.render and") && err.contains("remove one"), "{err}");
    // A typo in spec.render: the field named.
    std::fs::remove_dir_all(root.join("workloads/tool/templates")).unwrap();
    write(&root, &[("workloads/tool/workload.yaml", &tool_workload("[./render.sh]", "    timeuot: 5s\n"))]);
    let err = render_fails(&root, &out);
    assert!(err.contains("timeuot") && err.contains("workload.yaml"), "{err}");
}

#[test]
fn plain_script_recipe_renders_as_documented() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("p");
    base(&root);
    recipe_workload(&root, "reports", "#### Recipe: a plain script", "render.py");
    write(&root, &[("cluster-types/edge.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: factory}\nworkloads:\n  reports: {shards: 3}\n")]);
    let out = t.path().join("out");
    render_ok(&root, "dev", &out);
    let shards = |ct: &str| files(&out.join(ct).join("manifests/reports"));
    assert_eq!(shards("cloud"), ["ConfigMap.core.shard-0.yaml", "ConfigMap.core.shard-1.yaml"]);
    assert_eq!(shards("edge").len(), 3, "the cluster type's value reached the script");
    assert_eq!(object(&out, "edge", "reports/ConfigMap.core.shard-2.yaml")["data"]["clusterType"], "edge");
}


#[test]
fn kustomize_recipe_writes_the_values_as_a_patch() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("p");
    base(&root);
    recipe_workload(&root, "web", "#### Recipe: Kustomize", "render.sh");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "web", "image": "web:1"}]}}}});
    write(
        &root,
        &[
            ("workloads/web/base/kustomization.yaml", "resources: [deployment.yaml]\n"),
            ("workloads/web/base/deployment.yaml", &deployment.to_string()),
            ("cluster-types/lab.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: cloud, legacy: \"yes\"}\nworkloads:\n  web: {spec: {replicas: 5}}\n"),
            ("bin/kustomize", FAKE_KUSTOMIZE),
        ],
    );
    chmod_x(&root.join("bin/kustomize"));
    let path = format!("{}:{}", root.join("bin").display(), std::env::var("PATH").unwrap());
    let out = t.path().join("out");
    let o = run("drover", &["render", root.to_str().unwrap(), "--env", "dev", "--out", out.to_str().unwrap()], &[("PATH", &path)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let replicas = |ct: &str| object(&out, ct, "web/Deployment.apps.web.yaml")["spec"]["replicas"].clone();
    assert_eq!((replicas("cloud"), replicas("lab")), (json!(2), json!(5)));
    assert!(!out.join("edge/manifests/web").exists(), "the selector picks site: cloud only");
}
