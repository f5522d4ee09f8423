//! Limits that hold against hostile input, end to end: each case is a small file or
//! bundle that, without its limit, makes drover allocate gigabytes. The binaries run
//! under a 512 MiB data-segment cap (`prlimit --data`), so a missing limit shows as an
//! allocation failure (an abort, or the tar crate's "out of memory" error) instead of the
//! limit's clear error — and never takes the machine down. Each test fails without its
//! limit (checked by disabling it: alias budget, extension headers read by drover).
//!
//! - YAML alias expansion ("billion laughs"): in `drover build` input and in bundle
//!   content read by `drover pull`;
//! - GNU long-name and PAX extended headers in a bundle layer (`drover pull`) and in an
//!   OCI archive (`drover import`).
//!
//! The inputs fuzzing found are plain unit tests next to the parsers (see
//! docs/reliability.md, "Fuzzing").

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::process::Command;

use drover_proto::config::{BundleConfig, ObjectEntry, SourceInfo, SCHEMA_VERSION};
use drover_proto::digest::{sha256_digest, sha256_hex};
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::media;
use drover_tests::{Out, Registry};

/// Data-segment cap for the binaries under test: far above what these small inputs
/// need, far below what the hostile ones expand to without a limit.
const DATA_CAP: u64 = 512 << 20;

/// Runs `drover ARGS` under [`DATA_CAP`].
fn drover_capped(args: &[&str]) -> Out {
    drover_tests::run_capped("drover", DATA_CAP, args, &[])
}

/// Asserts a refusal: exit code 1 (not an abort), and every `needle` in stderr.
fn assert_refused(out: &Out, needles: &[&str]) {
    assert_eq!(out.code, 1, "expected a clear refusal (exit 1), got {}:\n{}", out.code, tail(&out.stderr));
    for n in needles {
        assert!(out.stderr.contains(n), "stderr lacks {n:?}:\n{}", tail(&out.stderr));
    }
    assert!(out.stderr.len() < 8192, "the error message is {} bytes long", out.stderr.len());
}

fn tail(s: &str) -> &str {
    let mut start = s.len().saturating_sub(4000);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: demo}\ndata: {a: '1'}\n";

/// A YAML document of about 1 MiB whose aliases expand it to about 2 GiB: one anchored
/// 1 MiB string, referenced 2,000 times. (The textbook nested "lol" form is stopped by
/// serde_yaml_ng's own repetition limit; this linear form is not.)
fn alias_bomb(name: &str) -> String {
    let mut s = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: demo}}\ndata:\n  big: &big \"");
    s.push_str(&"x".repeat(1 << 20));
    s.push_str("\"\n  more: [");
    for i in 0..2000 {
        s.push_str(if i == 0 { "*big" } else { ", *big" });
    }
    s.push_str("]\n");
    s
}

#[test]
fn build_refuses_a_yaml_alias_bomb_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("a.yaml"), CM).unwrap();
    std::fs::write(input.join("bomb.yaml"), alias_bomb("bomb")).unwrap();
    let out_dir = tmp.path().join("layout");
    let out = drover_capped(&["build", input.to_str().unwrap(), "--out", &format!("oci:{}:t", out_dir.display())]);
    assert_refused(&out, &["bomb.yaml (document 1)", "alias"]);
    assert!(!out_dir.exists(), "a refused build wrote {}", out_dir.display());

    // The same document without the aliases builds.
    std::fs::write(input.join("bomb.yaml"), alias_bomb("bomb").replace(", *big", "").replace("*big", "small")).unwrap();
    let out = drover_capped(&["build", input.to_str().unwrap(), "--out", &format!("oci:{}:t", out_dir.display())]);
    assert_eq!(out.code, 0, "{}", tail(&out.stderr));
}

// ---- raw registry writes (an attacker with push rights; nothing goes through drover) ----

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

async fn put_blob(http: &reqwest::Client, reg: &Registry, repo: &str, data: &[u8]) -> String {
    let digest = sha256_digest(data);
    let res = http.post(format!("http://{}/v2/{repo}/blobs/uploads/", reg.addr)).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 202, "start upload");
    let loc = res.headers()["location"].to_str().unwrap().to_string();
    let url = if loc.starts_with("http") { loc } else { format!("http://{}{loc}", reg.addr) };
    let sep = if url.contains('?') { '&' } else { '?' };
    let res = http.put(format!("{url}{sep}digest={digest}")).body(data.to_vec()).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 201, "finish upload");
    digest
}

/// Pushes config + layer + manifest with raw HTTP and tags it `tag`.
fn push_raw_bundle(reg: &Registry, repo: &str, tag: &str, config: &[u8], layer: &[u8]) {
    rt().block_on(async {
        let http = reqwest::Client::new();
        put_blob(&http, reg, repo, config).await;
        put_blob(&http, reg, repo, layer).await;
        let m = Manifest {
            schema_version: 2,
            media_type: Some(media::OCI_MANIFEST.into()),
            artifact_type: Some(media::BUNDLE_ARTIFACT_TYPE.into()),
            config: Descriptor::of(media::BUNDLE_CONFIG, config),
            layers: vec![Descriptor::of(media::BUNDLE_LAYER, layer)],
            annotations: BTreeMap::new(),
        };
        let res = http
            .put(format!("http://{}/v2/{repo}/manifests/{tag}", reg.addr))
            .header("content-type", media::OCI_MANIFEST)
            .body(m.to_bytes())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 201, "put manifest");
    });
}

/// A config index listing one ConfigMap `demo/name` whose file has hash `sha`.
fn config_for(name: &str, sha: &str) -> Vec<u8> {
    let c = BundleConfig {
        schema_version: SCHEMA_VERSION,
        cluster_type: "edge".into(),
        environment: "prod".into(),
        sequence: 1,
        source: SourceInfo::default(),
        allow_mass_prune: false,
        workloads: Vec::new(),
        health_checks: Vec::new(),
        min_agent_version: None,
        ignorable: Vec::new(),
        objects: vec![ObjectEntry {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("demo".into()),
            name: name.into(),
            path: format!("manifests/demo/ConfigMap.core.{name}.yaml"),
            sha256: sha.into(),
        }],
    };
    serde_json::to_vec(&c).unwrap()
}

/// A GNU tar header block (checksummed) of `kind` named `name` with size `size`.
fn header(name: &str, kind: tar::EntryType, size: u64) -> [u8; 512] {
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_cksum();
    *h.as_bytes()
}

/// The tail of a tar: one regular file `name` holding `data`, then the end marker.
fn file_and_end(name: &str, data: &[u8]) -> Vec<u8> {
    let mut v = header(name, tar::EntryType::Regular, data.len() as u64).to_vec();
    v.extend_from_slice(data);
    v.resize(v.len().div_ceil(512) * 512 + 1024, 0);
    v
}

/// Writes gzip(prefix, `zeros` NUL bytes, suffix) with python's zlib (fast for the big
/// zero runs, where an unoptimized test build of flate2 would take minutes).
fn gzip_with_zeros(dir: &Path, prefix: &[u8], zeros: u64, suffix: &[u8]) -> Vec<u8> {
    let (p, s, out) = (dir.join("prefix"), dir.join("suffix"), dir.join("layer.tar.gz"));
    std::fs::write(&p, prefix).unwrap();
    std::fs::write(&s, suffix).unwrap();
    let script = "import gzip,sys\nout,p,n,s=sys.argv[1],sys.argv[2],int(sys.argv[3]),sys.argv[4]\nz=bytes(1<<20)\nwith gzip.GzipFile(out,'wb',1,mtime=0) as g:\n  g.write(open(p,'rb').read())\n  while n>0:\n    k=min(n,len(z)); g.write(z[:k]); n-=k\n  g.write(open(s,'rb').read())\n";
    let st = Command::new("python3")
        .args(["-c", script, out.to_str().unwrap(), p.to_str().unwrap(), &zeros.to_string(), s.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(out).unwrap()
}

/// 1 GiB: what each hostile extension header below declares (and really holds).
const HUGE: u64 = 1 << 30;

fn pull(reg: &Registry, repo_tag: &str, out: &Path) -> Out {
    drover_capped(&["pull", &reg.reference(repo_tag), "--out", out.to_str().unwrap(), "--plain-http"])
}

#[test]
fn pull_refuses_gnu_long_name_and_pax_headers_over_the_limit() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let path = "manifests/demo/ConfigMap.core.ok.yaml";
    let cfg = config_for("ok", &sha256_hex(CM.as_bytes()));
    let cases = [
        ("long-name", tar::EntryType::GNULongName, "GNU long name"),
        ("long-link", tar::EntryType::GNULongLink, "GNU long link"),
        ("pax", tar::EntryType::XHeader, "PAX extended header"),
    ];
    for (tag, kind, what) in cases {
        let layer = gzip_with_zeros(tmp.path(), &header("././@LongLink", kind, HUGE), HUGE, &file_and_end(path, CM.as_bytes()));
        assert!(layer.len() < 16 << 20, "{tag}: the hostile layer is small ({} bytes)", layer.len());
        push_raw_bundle(&reg, "fleet/edge", tag, &cfg, &layer);
        let out_dir = tmp.path().join(format!("out-{tag}"));
        let out = pull(&reg, &format!("fleet/edge:{tag}"), &out_dir);
        assert_refused(&out, &[what, "limit"]);
        assert!(!out_dir.exists(), "{tag}: a refused pull wrote {}", out_dir.display());
    }
    // A well-formed layer with a (short) GNU long name still opens.
    let long = format!("manifests/demo/ConfigMap.core.{}.yaml", "n".repeat(120));
    let name = "n".repeat(120);
    let yaml = CM.replace("name: ok", &format!("name: {name}"));
    let mut tar = header("././@LongLink", tar::EntryType::GNULongName, long.len() as u64 + 1).to_vec();
    tar.extend_from_slice(long.as_bytes());
    tar.resize(tar.len().div_ceil(512) * 512, 0);
    tar.extend(file_and_end(&long[..100], yaml.as_bytes()));
    let layer = gzip_with_zeros(tmp.path(), &tar, 0, b"");
    push_raw_bundle(&reg, "fleet/edge", "fine", &config_for(&name, &sha256_hex(yaml.as_bytes())), &layer);
    let out_dir = tmp.path().join("out-fine");
    let out = pull(&reg, "fleet/edge:fine", &out_dir);
    assert_eq!(out.code, 0, "{}", tail(&out.stderr));
    assert_eq!(std::fs::read_to_string(out_dir.join(&long)).unwrap(), yaml);
}

#[test]
fn pull_refuses_a_yaml_alias_bomb_in_bundle_content() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let yaml = alias_bomb("bomb");
    let path = "manifests/demo/ConfigMap.core.bomb.yaml";
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(yaml.len() as u64);
    h.set_mode(0o644);
    b.append_data(&mut h, path, yaml.as_bytes()).unwrap();
    let tar = b.into_inner().unwrap();
    let layer = gzip_with_zeros(tmp.path(), &tar, 0, b"");
    push_raw_bundle(&reg, "fleet/edge", "bomb", &config_for("bomb", &sha256_hex(yaml.as_bytes())), &layer);
    let out_dir = tmp.path().join("out");
    let out = pull(&reg, "fleet/edge:bomb", &out_dir);
    assert_refused(&out, &[path, "alias"]);
    assert!(!out_dir.exists(), "a refused pull wrote {}", out_dir.display());
}

/// An OCI archive (plain tar) whose first member is an extension header of `kind`
/// declaring and holding [`HUGE`] bytes. The file is sparse: the 1 GiB is a hole.
fn sparse_archive(file: &Path, kind: tar::EntryType) {
    let mut f = std::fs::File::create(file).unwrap();
    f.write_all(&header("././@LongLink", kind, HUGE)).unwrap();
    f.seek(SeekFrom::Current(HUGE as i64)).unwrap();
    f.write_all(&file_and_end("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)).unwrap();
}

#[test]
fn import_refuses_an_oci_archive_with_extension_headers_over_the_limit() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    for (kind, what) in [(tar::EntryType::GNULongName, "GNU long name"), (tar::EntryType::XHeader, "PAX extended header")] {
        let file = tmp.path().join("hostile.tar");
        sparse_archive(&file, kind);
        let out = drover_capped(&["import", file.to_str().unwrap(), "--to", &reg.addr, "--plain-http"]);
        assert_refused(&out, &["hostile.tar", what, "limit"]);
    }
    let res = rt().block_on(async {
        reqwest::get(format!("http://{}/v2/_catalog", reg.addr)).await.unwrap().json::<serde_json::Value>().await.unwrap()
    });
    assert_eq!(res["repositories"], serde_json::json!([]), "a refused import pushed something");
}
