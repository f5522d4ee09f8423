//! Shared helpers for the platform tests: writing small platform definitions, rendering,
//! reading rendered objects and talking plain HTTP to the test registry.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use drover_tests::{run, Out};

/// Writes `files` (relative path, content) under `root`, creating directories.
pub use drover_tests::write_files as write;

/// A small platform: environments dev, staging, prod; cluster types `edge` (site=factory,
/// gpu=true), `cloud` (site=cloud) and `lab` (site=cloud, legacy=yes); one workload `app`
/// (namespace `app`, selector `{}`) whose template dumps its composed values into a ConfigMap.
pub fn base(root: &Path) {
    write(
        root,
        &[
            ("fleet.yaml", "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, staging, prod]\n"),
            (
                "cluster-types/edge.yaml",
                "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  name: edge\n  labels: {site: factory, gpu: \"true\"}\n",
            ),
            ("cluster-types/cloud.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: cloud}\n"),
            ("cluster-types/lab.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: cloud, legacy: \"yes\"}\n"),
            ("environments/dev.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\n"),
            ("environments/staging.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: staging}\n"),
            ("environments/prod.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: prod}\n"),
            ("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {}\nvalues:\n  x: defaults\n"),
            ("workloads/app/templates/values.yaml", VALUES_TEMPLATE),
        ],
    );
}

/// A template that stores the composed values (as JSON) in ConfigMap `values`.
pub const VALUES_TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values\n  namespace: {{ namespace }}\ndata:\n  values: {{ values | tojson | tojson }}\n";

/// `drover render ROOT --env ENV --out OUT` plus extra args.
pub fn render(root: &Path, env: &str, out: &Path, extra: &[&str]) -> Out {
    let mut args = vec!["render", root.to_str().unwrap(), "--env", env, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    run("drover", &args, &[])
}

/// Like [`render`] but asserts success.
pub fn render_ok(root: &Path, env: &str, out: &Path) -> Out {
    let o = render(root, env, out, &["--force"]);
    assert_eq!(o.code, 0, "render failed:\n{}\n{}", o.stdout, o.stderr);
    o
}

/// Parses a rendered object file.
pub fn object(out: &Path, cluster_type: &str, rel: &str) -> serde_json::Value {
    let p = out.join(cluster_type).join("manifests").join(rel);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_yaml_ng::from_str(&text).unwrap()
}

/// The composed values of workload `ns` on `cluster_type` (from the values ConfigMap).
pub fn values(out: &Path, cluster_type: &str, ns: &str) -> serde_json::Value {
    let cm = object(out, cluster_type, &format!("{ns}/ConfigMap.core.values.yaml"));
    serde_json::from_str(cm["data"]["values"].as_str().unwrap()).unwrap()
}

/// Relative paths of every file under `dir`, sorted.
pub fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out)
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned())
            }
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

/// A plain HTTP GET against the registry; returns (status, body).
pub fn http_get(addr: &str, path: &str, accept: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n").unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let status = buf[9..12].parse().unwrap();
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// Tags of a repository (sorted; empty when it does not exist).
pub fn tags(addr: &str, repo: &str) -> Vec<String> {
    let (status, body) = http_get(addr, &format!("/v2/{repo}/tags/list"), "application/json");
    if status == 404 {
        return Vec::new();
    }
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut t: Vec<String> = v["tags"].as_array().map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect()).unwrap_or_default();
    t.sort();
    t
}

/// The release record (config JSON) at `PREFIX/drover-releases:TAG`.
pub fn record(addr: &str, prefix_repo: &str, tag: &str) -> Option<serde_json::Value> {
    let (status, body) = http_get(addr, &format!("/v2/{prefix_repo}/drover-releases/manifests/{tag}"), "application/vnd.oci.image.manifest.v1+json");
    if status != 200 {
        return None;
    }
    let m: serde_json::Value = serde_json::from_str(&body).unwrap();
    let digest = m["config"]["digest"].as_str().unwrap();
    let (_, cfg) = http_get(addr, &format!("/v2/{prefix_repo}/drover-releases/blobs/{digest}"), "*/*");
    Some(serde_json::from_str(&cfg).unwrap())
}

/// Generates a key pair (empty password) in `dir`; returns (private, public).
pub fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let o = run("drover", &["keygen", "--out-dir", dir.to_str().unwrap()], &[("DROVER_KEY_PASSWORD", "")]);
    assert_eq!(o.code, 0, "keygen: {}", o.stderr);
    (dir.join("drover.key"), dir.join("drover.pub"))
}

/// Makes `p` executable.
pub fn chmod_x(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The fenced code blocks (language, text) of the section of docs/platform.md whose
/// heading starts with `heading`: the recipes are run as the documentation gives them.
pub fn recipe(heading: &str) -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/platform.md")).unwrap();
    let start = doc.find(heading).unwrap_or_else(|| panic!("docs/platform.md has no {heading:?}"));
    let section = &doc[start + heading.len()..];
    let end = ["\n### ", "\n#### ", "\n## "].iter().filter_map(|h| section.find(h)).min().unwrap_or(section.len());
    let section = &section[..end];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let (lang, body) = after.split_once('\n').unwrap();
        let close = body.find("```").unwrap();
        blocks.push((lang.trim().to_string(), body[..close].to_string()));
        rest = &body[close + 3..];
    }
    blocks
}

/// A workload of the documented recipe: `workload.yaml` (the recipe's YAML block with its
/// header) and the recipe's script at `script`.
pub fn recipe_workload(root: &Path, name: &str, heading: &str, script: &str) {
    let blocks = recipe(heading);
    let yaml = &blocks.iter().find(|(l, t)| l == "yaml" && t.starts_with("spec:")).expect("a workload.yaml block").1;
    let code = &blocks.iter().find(|(l, _)| l == "sh" || l == "python").expect("a script block").1;
    write(root, &[(&format!("workloads/{name}/workload.yaml"), &format!("apiVersion: drover.dev/v1\nkind: Workload\n{yaml}")), (&format!("workloads/{name}/{script}"), code)]);
    chmod_x(&root.join(format!("workloads/{name}/{script}")));
}

/// A stand-in for `kustomize build DIR` (not installable here): the base's one
/// Deployment (JSON), the generated patch merged into it, the kustomization's namespace.
pub const FAKE_KUSTOMIZE: &str = r#"#!/usr/bin/env python3
import json, pathlib, re, sys
if sys.argv[1] == "version":
    print("v5.4.3-standin")
    sys.exit(0)
d = pathlib.Path(sys.argv[2])
ns = re.search(r"^namespace: (\S+)$", (d / "kustomization.yaml").read_text(), re.M).group(1)
def merge(a, b):
    for k, v in b.items():
        a[k] = merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
    return a
out = merge(json.loads((d / "base" / "deployment.yaml").read_text()), json.loads((d / "values-patch.json").read_text()))
out["metadata"]["namespace"] = ns
print(json.dumps(out))
"#;
