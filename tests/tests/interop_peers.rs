//! Interop through real peers: skopeo reads the manifest drover pushed, skopeo copies a
//! layout written by `drover build` to the registry keeping the digest, and oras (Python)
//! pulls a bundle into `manifests/...`, one file per object.

use std::path::Path;

use drover_proto::digest::sha256_digest;
use drover_tests::{run_ok, tool_ok, Registry};

fn input(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("all.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: web}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: web}\ndata: {a: b}\n",
    )
    .unwrap();
}

#[test]
fn skopeo_reads_pushed_manifest_and_copies_layout_keeping_digest() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("in");
    input(&src);
    let pushed = run_ok(
        "drover",
        &[
            "-o",
            "json",
            "push",
            src.to_str().unwrap(),
            &reg.reference("fleet/edge:dev"),
            "--plain-http",
            "--sequence",
            "3",
            "--environment",
            "dev",
        ],
        &[],
    )
    .json();
    let digest = pushed["digest"].as_str().unwrap();

    // skopeo inspect --raw: the exact manifest bytes, artifactType and annotations intact
    let raw = tool_ok("skopeo", &["inspect", "--raw", "--tls-verify=false", &format!("docker://{}", reg.reference("fleet/edge:dev"))]);
    assert_eq!(sha256_digest(raw.as_bytes()), digest);
    let m: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(m["artifactType"], "application/vnd.drover.bundle.v1");
    assert_eq!(m["config"]["mediaType"], "application/vnd.drover.bundle.config.v1+json");
    assert_eq!(m["layers"][0]["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip");
    assert_eq!(m["annotations"]["dev.drover.sequence"], "3");
    // the history tag is listed
    let tags = tool_ok("skopeo", &["list-tags", "--tls-verify=false", &format!("docker://{}", reg.reference("fleet/edge"))]);
    assert!(tags.contains("\"dev-3\"") && tags.contains("\"dev\""), "{tags}");

    // skopeo copy oci:LAYOUT:TAG -> registry keeps the digest (no conversion of artifacts)
    let layout = tmp.path().join("layout");
    let built = run_ok(
        "drover",
        &[
            "-o",
            "json",
            "build",
            src.to_str().unwrap(),
            "--out",
            &format!("oci:{}:v1", layout.display()),
            "--sequence",
            "3",
            "--environment",
            "dev",
        ],
        &[],
    )
    .json();
    assert_eq!(built["digest"], digest, "build and push agree");
    let dest = format!("docker://{}", reg.reference("copied/edge:v1"));
    tool_ok("skopeo", &["copy", "--quiet", "--dest-tls-verify=false", &format!("oci:{}:v1", layout.display()), &dest]);
    let copied = tool_ok("skopeo", &["inspect", "--raw", "--tls-verify=false", &dest]);
    assert_eq!(sha256_digest(copied.as_bytes()), digest);
    // and drover reads the copy as a bundle
    let i = run_ok("drover", &["-o", "json", "inspect", &reg.reference("copied/edge:v1"), "--plain-http"], &[]).json();
    assert_eq!(i["digest"], digest);
    assert_eq!(i["config"]["objects"].as_array().unwrap().len(), 3);
}

#[test]
fn oras_pulls_one_file_per_object() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("in");
    input(&src);
    run_ok("drover", &["push", src.to_str().unwrap(), &reg.reference("fleet/edge:dev"), "--plain-http", "--sequence", "1"], &[]);
    let out = tmp.path().join("oras");
    let script = format!(
        "import oras.client\noras.client.OrasClient(insecure=True).pull(target='{}', outdir='{}')\n",
        reg.reference("fleet/edge:dev"),
        out.display()
    );
    tool_ok("python3", &["-c", &script]);
    let mut files = Vec::new();
    walk(&out, &out, &mut files);
    files.sort();
    assert_eq!(
        files,
        ["manifests/_cluster/Namespace.core.web.yaml", "manifests/web/ConfigMap.core.cfg.yaml", "manifests/web/Deployment.apps.api.yaml"]
    );
    let cm = std::fs::read_to_string(out.join("manifests/web/ConfigMap.core.cfg.yaml")).unwrap();
    assert_eq!(cm, "apiVersion: v1\ndata:\n  a: b\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: web\n");
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().to_str().unwrap().to_string());
        }
    }
}
