//! Bad input to `drover build` / `drover push`: every case exits non-zero, names the file
//! (and the document), and writes nothing to the output layout or the registry.

use std::io::{Read, Write};
use std::path::Path;

use drover_tests::{run, Registry};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: web}\n";

/// The registry's repository list (`/v2/_catalog`).
fn catalog(reg: &Registry) -> String {
    let mut s = std::net::TcpStream::connect(&reg.addr).unwrap();
    write!(s, "GET /v2/_catalog HTTP/1.0\r\nHost: {}\r\n\r\n", reg.addr).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body.split("\r\n\r\n").nth(1).unwrap_or_default().trim().to_string()
}

/// Runs build and push on `dir`; both must fail naming every `needles`, writing nothing.
fn refused(reg: &Registry, dir: &Path, needles: &[&str]) {
    let layout = dir.parent().unwrap().join(format!("{}-layout", dir.file_name().unwrap().to_str().unwrap()));
    let out = format!("oci:{}:t", layout.display());
    let b = run("drover", &["build", dir.to_str().unwrap(), "--out", &out, "--sequence", "1"], &[]);
    assert_ne!(b.code, 0, "build accepted {}:\n{}", dir.display(), b.stdout);
    for n in needles {
        assert!(b.stderr.contains(n), "build error lacks {n:?}:\n{}", b.stderr);
    }
    assert!(b.stdout.is_empty(), "nothing printed on stdout on error: {}", b.stdout);
    assert!(!layout.exists(), "build wrote {} despite the error", layout.display());
    let p = run("drover", &["push", dir.to_str().unwrap(), &reg.reference("fleet/bad:dev"), "--plain-http", "--environment", "dev"], &[]);
    assert_ne!(p.code, 0, "push accepted {}", dir.display());
    for n in needles {
        assert!(p.stderr.contains(n), "push error lacks {n:?}:\n{}", p.stderr);
    }
    assert_eq!(catalog(reg), r#"{"repositories":[]}"#, "push wrote to the registry despite the error");
}

fn case(root: &Path, name: &str, files: &[(&str, &[u8])]) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("00-good.yaml"), CM.replace("name: ok", &format!("name: ok-{name}"))).unwrap();
    for (rel, data) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    dir
}

#[test]
fn every_bad_input_is_refused_and_writes_nothing() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();

    let broken = format!("{CM}---\napiVersion: v1\nkind: [ConfigMap\nmetadata: {{name: x}}\n");
    refused(&reg, &case(root, "broken", &[("sub/broken.yaml", broken.as_bytes())]), &["sub/broken.yaml", "document 2", "invalid YAML"]);

    refused(&reg, &case(root, "scalar", &[("list.yaml", b"- a\n- b\n")]), &["list.yaml", "document 1", "not an object"]);
    refused(
        &reg,
        &case(root, "listitem", &[("l.yaml", b"apiVersion: v1\nkind: List\nitems:\n- 3\n")]),
        &["l.yaml", "item 1", "not an object"],
    );

    refused(
        &reg,
        &case(root, "noapi", &[("a.yaml", b"kind: ConfigMap\nmetadata: {name: a, namespace: web}\n")]),
        &["a.yaml", "missing apiVersion"],
    );
    refused(
        &reg,
        &case(root, "nokind", &[("k.yaml", b"apiVersion: v1\nmetadata: {name: a, namespace: web}\n")]),
        &["k.yaml", "missing kind"],
    );
    refused(
        &reg,
        &case(root, "noname", &[("n.yml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: web}\n")]),
        &["n.yml", "missing metadata.name"],
    );
    refused(
        &reg,
        &case(root, "nons", &[("d.yaml", b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\n")]),
        &["d.yaml", "Deployment api", "no metadata.namespace", "--cluster-scoped-kind"],
    );

    // the same object under two API versions is still the same object
    let v1 = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: hpa, namespace: web}\n";
    let v2 = v1.replace("autoscaling/v1", "autoscaling/v2");
    refused(
        &reg,
        &case(root, "dup", &[("a/one.yaml", v1.as_bytes()), ("b/two.yaml", v2.as_bytes())]),
        &["defined twice", "a/one.yaml (document 1)", "b/two.yaml (document 1)"],
    );

    refused(
        &reg,
        &case(root, "latin1", &[("bad.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9, namespace: web}\n")]),
        &["bad.yaml", "not UTF-8"],
    );

    let mut big = CM.as_bytes().to_vec();
    big.extend(std::iter::repeat_n(b'#', 33 << 20));
    refused(&reg, &case(root, "big", &[("huge.yaml", &big)]), &["huge.yaml", "over the limit"]);

    let empty = root.join("empty");
    std::fs::create_dir_all(empty.join("sub")).unwrap();
    std::fs::write(empty.join("notes.txt"), "x").unwrap();
    refused(&reg, &empty, &["no *.yaml or *.yml files"]);

    refused(&reg, &root.join("missing-dir"), &["missing-dir"]);
}

#[test]
fn build_refuses_an_out_directory_that_is_not_a_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("cm.yaml"), CM).unwrap();
    let other = tmp.path().join("docs");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "keep me").unwrap();
    let r = run("drover", &["build", input.to_str().unwrap(), "--out", &format!("oci:{}:t", other.display())], &[]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("not an OCI layout"), "{}", r.stderr);
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1, "the directory is untouched");
    // diff of a path that is neither a directory nor a reference is an error (exit 2)
    let d = run("drover", &["diff", input.to_str().unwrap(), "no-such-dir"], &[]);
    assert_eq!(d.code, 2);
    assert!(d.stderr.contains("neither an existing directory nor a bundle reference"), "{}", d.stderr);
}
