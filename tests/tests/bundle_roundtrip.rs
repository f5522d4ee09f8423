//! `drover build / push / pull / inspect / diff` through the real binary and the real
//! registry: what a user sees, end to end.

use std::path::Path;

use drover_tests::{run, run_ok, Registry};

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A small rendered tree: multi-document file, a List, a CRD + its cluster-scoped CR,
/// a cluster-scoped object carrying a namespace (dropped), an empty document.
fn input(dir: &Path) {
    write(
        dir,
        "base/ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n---\n# only a comment\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n  namespace: ignored\nrules: []\n",
    );
    write(
        dir,
        "apps/web.yml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: api, namespace: web}\n  spec: {replicas: 2}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cfg, namespace: web}\n  data: {enabled: 'on', port: '8080'}\n",
    );
    write(
        dir,
        "crds/widget.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.ex.io}\nspec:\n  group: ex.io\n  scope: Cluster\n  names: {kind: Widget, plural: widgets}\n---\napiVersion: ex.io/v1\nkind: Widget\nmetadata: {name: w1}\n",
    );
    write(dir, "README.md", "not yaml, ignored\n");
}

const META: &[&str] = &[
    "--sequence",
    "42",
    "--cluster-type",
    "edge-small",
    "--environment",
    "dev",
    "--source-repository",
    "https://git.example.com/platform",
    "--revision",
    "abc123",
    "--created",
    "2026-01-02T03:04:05Z",
];

fn args<'a>(head: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
    head.iter().chain(tail).copied().collect()
}

#[test]
fn build_push_pull_inspect_diff() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("in");
    input(&src);
    let src_s = src.to_str().unwrap();

    // build into a layout
    let layout = tmp.path().join("layout");
    let out_ref = format!("oci:{}:v1", layout.display());
    let b = run_ok("drover", &args(&["-o", "json", "build", src_s, "--out", &out_ref], META), &[]).json();
    assert_eq!(b["objects"], 6, "{b}");
    assert_eq!(b["reference"], out_ref.as_str());
    let digest = b["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:"));
    let index = std::fs::read_to_string(layout.join("index.json")).unwrap();
    assert!(index.contains(&digest) && index.contains("\"org.opencontainers.image.ref.name\":\"v1\""), "{index}");

    // push: same digest as build, channel tag + immutable history tag
    let target = reg.reference("fleet/edge-small:dev");
    let p = run_ok("drover", &args(&["-o", "json", "push", src_s, &target, "--plain-http"], META), &[]).json();
    assert_eq!(p["digest"], digest.as_str(), "build and push of the same input and flags give the same digest");
    assert_eq!(p["objects"], 6);
    assert_eq!(p["reference"], format!("{target}@{digest}"));
    assert_eq!(p["tags"], serde_json::json!(["dev", "dev-42"]));

    // human output is a short table
    let t = run_ok("drover", &args(&["push", src_s, &target, "--plain-http"], META), &[]);
    assert!(t.stdout.starts_with("REFERENCE") && t.stdout.contains(&digest) && t.stdout.lines().count() <= 4, "{}", t.stdout);

    // the history tag is immutable: same sequence, different content is refused
    let changed = tmp.path().join("changed");
    input(&changed);
    write(&changed, "apps/extra.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: web}\n");
    let r = run("drover", &args(&["push", changed.to_str().unwrap(), &target, "--plain-http"], META), &[]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("dev-42") && r.stderr.contains("higher sequence (`drover push DIR REF --sequence N`)"), "{}", r.stderr);

    // inspect (table and JSON)
    let i = run_ok("drover", &["inspect", &target, "--plain-http"], &[]);
    for want in [&digest[..], "edge-small", "dev", "42", "abc123", "2026-01-02T03:04:05Z", "Widget", "ClusterRole", "Deployment"] {
        assert!(i.stdout.contains(want), "inspect lacks {want}:\n{}", i.stdout);
    }
    let ij = run_ok("drover", &["-o", "json", "inspect", &target, "--plain-http"], &[]).json();
    assert_eq!(ij["digest"], digest.as_str());
    assert_eq!(ij["clusterType"], "edge-small");
    assert_eq!(ij["environment"], "dev");
    assert_eq!(ij["sequence"], 42);
    assert_eq!(ij["source"]["revision"], "abc123");
    assert_eq!(ij["created"], "2026-01-02T03:04:05Z");
    assert_eq!(ij["config"]["objects"].as_array().unwrap().len(), 6);
    assert_eq!(ij["manifest"]["artifactType"], "application/vnd.drover.bundle.v1");
    // the cluster-scoped ClusterRole lost its namespace, the Widget is cluster-scoped via its CRD
    let paths: Vec<&str> = ij["config"]["objects"].as_array().unwrap().iter().map(|o| o["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"manifests/_cluster/ClusterRole.rbac.authorization.k8s.io.reader.yaml"), "{paths:?}");
    assert!(paths.contains(&"manifests/_cluster/Widget.ex.io.w1.yaml"), "{paths:?}");
    assert!(paths.contains(&"manifests/web/Deployment.apps.api.yaml"), "{paths:?}");
    // the layout answers inspect too
    let il = run_ok("drover", &["-o", "json", "inspect", &out_ref], &[]).json();
    assert_eq!(il["digest"], digest.as_str());

    // pull by history tag: one file per object, exactly the indexed paths
    let pulled = tmp.path().join("pulled");
    let pj = run_ok(
        "drover",
        &["-o", "json", "pull", &reg.reference("fleet/edge-small:dev-42"), "--out", pulled.to_str().unwrap(), "--plain-http"],
        &[],
    )
    .json();
    assert_eq!(pj["digest"], digest.as_str());
    let mut files = Vec::new();
    collect_files(&pulled, &pulled, &mut files);
    files.sort();
    let mut want: Vec<String> = paths.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(files, want);
    let cm = std::fs::read_to_string(pulled.join("manifests/web/ConfigMap.core.cfg.yaml")).unwrap();
    assert!(cm.contains("enabled: \"on\""), "YAML 1.1 look-alikes stay quoted strings:\n{cm}");
    // pull refuses a non-empty directory and leaves it alone
    let r = run("drover", &["pull", &target, "--out", pulled.to_str().unwrap(), "--plain-http"], &[]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("not empty"), "{}", r.stderr);

    // diff: directory vs bundle equal -> exit 0; the pulled tree equals the bundle
    let d = run("drover", &["diff", src_s, &target, "--plain-http"], &[]);
    assert_eq!(d.code, 0, "{}\n{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("0 added, 0 removed, 0 changed, 6 unchanged"), "{}", d.stdout);
    let d = run("drover", &["diff", pulled.to_str().unwrap(), &out_ref], &[]);
    assert_eq!(d.code, 0, "{}\n{}", d.stdout, d.stderr);

    // diff: a changed, an added and a removed object -> exit 1 with a unified diff
    let next = tmp.path().join("next");
    input(&next);
    std::fs::remove_file(next.join("base/ns.yaml")).unwrap();
    write(&next, "base/ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n");
    write(&next, "apps/extra.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: web}\n");
    let web = std::fs::read_to_string(next.join("apps/web.yml")).unwrap().replace("replicas: 2", "replicas: 5");
    write(&next, "apps/web.yml", &web);
    let d = run("drover", &["diff", &target, next.to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(d.code, 1, "{}\n{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("added    ConfigMap web/extra"), "{}", d.stdout);
    assert!(d.stdout.contains("removed  ClusterRole reader"), "{}", d.stdout);
    assert!(d.stdout.contains("changed  Deployment web/api"), "{}", d.stdout);
    assert!(d.stdout.contains("-  replicas: 2\n+  replicas: 5"), "{}", d.stdout);
    assert!(d.stdout.contains("--- a/manifests/web/Deployment.apps.api.yaml"), "{}", d.stdout);
    let dj = run("drover", &["-o", "json", "diff", &target, next.to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(dj.code, 1);
    let dj = dj.json();
    assert_eq!(dj["equal"], false);
    assert_eq!(dj["added"].as_array().unwrap().len(), 1);
    assert_eq!(dj["removed"].as_array().unwrap().len(), 1);
    assert_eq!(dj["changed"][0]["object"]["name"], "api");
    // diff errors are exit 2, not "different"
    let e = run("drover", &["diff", src_s, &reg.reference("fleet/none:dev"), "--plain-http"], &[]);
    assert_eq!(e.code, 2, "{}", e.stderr);
}

#[test]
fn push_with_key_signs_before_moving_the_channel() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("in");
    input(&src);
    let keys = tmp.path().join("keys");
    let env = [("DROVER_KEY_PASSWORD", "pw")];
    run_ok("drover", &["keygen", "--out-dir", keys.to_str().unwrap()], &env);
    let key = keys.join("drover.key");
    let target = reg.reference("fleet/signed:prod");
    let p = run_ok(
        "drover",
        &["-o", "json", "push", src.to_str().unwrap(), &target, "--plain-http", "--sequence", "7", "--key", key.to_str().unwrap()],
        &env,
    )
    .json();
    let digest = p["digest"].as_str().unwrap();
    assert!(
        p["signature"]["signatureReference"].as_str().unwrap().contains(".sig"),
        "{p}"
    );
    let v = run("drover", &["verify", &target, "--trust-key", keys.join("drover.pub").to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(v.code, 0, "verify after push --key:\n{}\n{}", v.stdout, v.stderr);
    assert!(v.stdout.contains(digest) || v.stderr.contains(digest) || v.code == 0);
    // a wrong password writes nothing (key loaded before any push)
    let other = reg.reference("fleet/unsigned:prod");
    let r = run(
        "drover",
        &["push", src.to_str().unwrap(), &other, "--plain-http", "--key", key.to_str().unwrap()],
        &[("DROVER_KEY_PASSWORD", "wrong")],
    );
    assert_ne!(r.code, 0);
    let i = run("drover", &["inspect", &other, "--plain-http"], &[]);
    assert_ne!(i.code, 0, "nothing was pushed:\n{}", i.stdout);
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect_files(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().to_str().unwrap().to_string());
        }
    }
}
