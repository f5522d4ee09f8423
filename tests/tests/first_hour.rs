//! A new user's first hour (issue 17): what the README and the error messages promise
//! works as written — an untagged `build` result is readable by every command, messages
//! suggest references that parse, template errors name the variable and show the line,
//! `build` on `render` output says which directory to build, and release records can be
//! read (`drover releases`, `drover inspect`), verified, and are not trusted when forged.

mod cli_support;

use cli_support::{input, platform, write, World, ENV};
use drover_tests::{run, run_ok};

/// Item 5: `drover build --out oci:DIR` without a tag names the result `oci:DIR@sha256:…`,
/// and inspect, pull, verify, sign, diff, promote, export (after tagging) and the agent
/// all read that reference.
#[test]
fn an_untagged_build_is_readable_by_every_command() {
    let w = World::new();
    let layout = w.s("untagged");
    let b = run_ok(
        "drover",
        &["-o", "json", "build", &w.s("in41"), "--out", &format!("oci:{layout}"), "--cluster-type", "edge", "--env", "prod", "--sequence", "7"],
        ENV,
    )
    .json();
    let digest = b["digest"].as_str().unwrap().to_string();
    let reference = format!("oci:{layout}@{digest}");
    assert_eq!(b["reference"], reference.as_str(), "build names the untagged result so it can be used: {b}");

    let i = run_ok("drover", &["-o", "json", "inspect", &reference], ENV).json();
    assert_eq!(i["digest"], digest.as_str());
    run_ok("drover", &["pull", &reference, "--out", &w.s("untagged-pull")], ENV);
    assert!(w.p("untagged-pull/manifests/demo").is_dir());
    // Signing the digest we built, then verifying it.
    run_ok("drover", &["sign", &reference, "--key", &w.key()], ENV);
    run_ok("drover", &["verify", &reference, "--trust-key", &w.pubkey()], ENV);
    let d = run("drover", &["diff", &reference, &w.s("in41")], ENV);
    assert_eq!(d.code, 0, "the bundle holds exactly the input: {}{}", d.stdout, d.stderr);
    // The agent applies it from the layout.
    let a = w.agent_once(&reference, "untagged-state", &[]);
    assert_eq!(a.code, 0, "agent from {reference}: {}", a.stderr);
    assert!(w.p("untagged-state-target/manifests/demo/ConfigMap.core.settings.yaml").is_file());

    // export needs a name for the archive; the error says how to give one, and that works.
    let e = run("drover", &["export", &reference, "--out", &w.s("untagged.tar")], ENV);
    assert_eq!(e.code, 1, "{}", e.stderr);
    let named = format!("oci:{layout}:fleet/edge:prod");
    assert!(e.stderr.contains("drover promote"), "export says how to tag the verified digest: {}", e.stderr);
    run_ok("drover", &["promote", &reference, &named, "--key", &w.key(), "--trust-key", &w.pubkey()], ENV);
    run_ok("drover", &["export", &named, "--out", &w.s("untagged.tar")], ENV);
    assert!(w.p("untagged.tar").metadata().unwrap().len() > 0);
}

/// Item 5: messages suggest references that parse; `build --out DIR` says `oci:DIR`.
#[test]
fn messages_suggest_references_that_work() {
    let w = World::new();
    // export of a digest reference: the suggestion must be a tag reference, not REF@DIGEST:TAG.
    let digest = w.drover_ok(&["-o", "json", "inspect", &w.r("fleet/edge:prod")]).json()["digest"].as_str().unwrap().to_string();
    let pinned = w.r(&format!("fleet/edge@{digest}"));
    let e = w.drover(&["export", &pinned, "--out", &w.s("x.tar")]);
    assert_eq!(e.code, 1);
    assert!(!e.stderr.contains(&format!("{digest}:prod")) && !e.stderr.contains(&format!("{digest}:TAG")), "export suggests a malformed reference: {}", e.stderr);
    assert!(e.stderr.contains(&w.r("fleet/edge:TAG")), "export suggests HOST/REPO:TAG: {}", e.stderr);
    assert!(!w.p("x.tar").exists());

    // build --out DIR without oci:
    let out_dir = w.s("plain-dir");
    let b = run("drover", &["build", &w.s("in41"), "--out", &out_dir], ENV);
    assert_eq!(b.code, 1, "{}", b.stderr);
    assert!(b.stderr.contains(&format!("oci:{out_dir}")), "build says to write oci:DIR: {}", b.stderr);
    assert!(!b.stderr.contains("expected HOST"), "{}", b.stderr);
    assert!(!w.p("plain-dir").exists(), "nothing written");

    // sign oci-archive: says how to sign it, and that works as written.
    let archive = w.s("export.tar");
    let s = run("drover", &["sign", &format!("oci-archive:{archive}:fleet/edge:prod"), "--key", &w.key(), "--trust-key", &w.pubkey()], ENV);
    assert_eq!(s.code, 1, "{}", s.stderr);
    assert!(s.stderr.contains(&format!("tar -xf {archive} -C DIR")) && s.stderr.contains("oci:DIR:fleet/edge:prod"), "{}", s.stderr);
    let dir = w.s("extracted");
    std::fs::create_dir(&dir).unwrap();
    drover_tests::tool_ok("tar", &["-xf", &archive, "-C", &dir]);
    let layout_ref = format!("oci:{dir}:fleet/edge:prod");
    run_ok("drover", &["sign", &layout_ref, "--key", &w.key(), "--trust-key", &w.pubkey()], ENV);
    run_ok("drover", &["export", &layout_ref, "--out", &w.s("again.tar")], ENV);
    run_ok("drover", &["verify", &format!("oci-archive:{}:fleet/edge:prod", w.s("again.tar")), "--trust-key", &w.pubkey()], ENV);
}

/// Item 9: `build rendered/` on `drover render` output names the per-type directory.
#[test]
fn build_on_render_output_names_the_cluster_type_directory() {
    let tmp = tempfile::tempdir().unwrap();
    platform(&tmp.path().join("platform"));
    let rendered = tmp.path().join("rendered");
    run_ok("drover", &["render", tmp.path().join("platform").to_str().unwrap(), "--env", "dev", "--out", rendered.to_str().unwrap()], ENV);
    let b = run("drover", &["build", rendered.to_str().unwrap(), "--out", &format!("oci:{}", tmp.path().join("l").display())], ENV);
    assert_eq!(b.code, 1, "{}", b.stderr);
    assert!(b.stderr.contains("drover render") && b.stderr.contains(&format!("build {}/cloud", rendered.display())), "names rendered/<type>: {}", b.stderr);
    assert!(!tmp.path().join("l").exists(), "nothing written");
    // ... and that directory builds.
    run_ok("drover", &["build", &format!("{}/cloud", rendered.display()), "--out", &format!("oci:{}", tmp.path().join("l").display())], ENV);
}

/// Item 9: an undefined value in a template names the file, the line, the undefined
/// expression and shows the source line (docs/platform.md says so).
#[test]
fn undefined_template_value_names_the_variable_and_shows_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("platform");
    platform(&root);
    write(
        &root,
        &[(
            "workloads/app/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {{ namespace }}\ndata:\n  level: {{ values.levle | tojson }}\n",
        )],
    );
    let out = run("drover", &["render", root.to_str().unwrap(), "--env", "dev", "--out", tmp.path().join("out").to_str().unwrap()], ENV);
    assert_eq!(out.code, 1);
    let file = root.join("workloads/app/templates/cm.yaml");
    assert!(out.stderr.contains(&format!("{}:7", file.display())), "file and line: {}", out.stderr);
    assert!(out.stderr.contains("values.levle"), "the undefined expression: {}", out.stderr);
    assert!(out.stderr.contains("level: {{ values.levle | tojson }}"), "the source line: {}", out.stderr);
}

/// Item 10: `drover releases` lists what revision each environment is at, verified with
/// `--trust-key`; `drover inspect` shows a release record; a record an attacker wrote
/// (unsigned, straight into the registry) is shown as NOT verified and fails the command.
#[test]
fn releases_lists_verified_environments_and_refuses_a_forged_record() {
    let w = World::new();
    let prefix = w.r("pub");
    w.drover_ok(&["publish", &w.s("platform"), "--env", "staging", "--registry", &prefix, "--key", &w.key(), "--revision", "r1"]);
    let r = w.drover_ok(&["-o", "json", "releases", "--registry", &prefix, "--trust-key", &w.pubkey()]).json();
    let envs = r["environments"].as_array().unwrap_or_else(|| panic!("{r}"));
    let names: Vec<&str> = envs.iter().map(|e| e["environment"].as_str().unwrap()).collect();
    assert_eq!(names, ["dev", "staging"], "{r}");
    for e in envs {
        assert_eq!(e["revision"], "r1");
        assert_eq!(e["verified"], true, "{e}");
        assert!(e["clusterTypes"]["edge"]["digest"].as_str().unwrap().starts_with("sha256:"), "{e}");
    }
    let table = w.drover_ok(&["releases", "--registry", &prefix, "--env", "staging"]);
    assert!(table.stdout.contains("staging") && table.stdout.contains("r1") && !table.stdout.contains("dev "), "{}", table.stdout);

    let i = w.drover_ok(&["-o", "json", "inspect", &w.r("pub/drover-releases:staging")]).json();
    assert_eq!(i["kind"], "releaseRecord", "{i}");
    assert_eq!(i["record"]["environment"], "staging");
    assert_eq!(i["record"]["revision"], "r1");
    let t = w.drover_ok(&["inspect", &w.r("pub/drover-releases:staging")]);
    assert!(t.stdout.contains("release record") && t.stdout.contains("r1"), "{}", t.stdout);

    // An attacker with registry write access puts an unsigned record at `prod`: copy the
    // (signed) dev record's manifest under the tag prod with skopeo — the bytes are ours,
    // but the record claims dev; and push a forged one without a signature.
    forge_record(&w, "prod", "evil");
    let forged = w.drover(&["-o", "json", "releases", "--registry", &prefix, "--trust-key", &w.pubkey()]);
    assert_eq!(forged.code, 1, "a record that does not verify fails the command: {}", forged.stderr);
    let v = forged.json();
    let prod = v["environments"].as_array().unwrap().iter().find(|e| e["environment"] == "prod").cloned().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(prod["verified"], false, "{prod}");
    assert!(forged.stderr.contains("prod"), "the failure names the environment: {}", forged.stderr);
    // Without --trust-key the records are listed, marked as not verified.
    let unverified = w.drover_ok(&["releases", "--registry", &prefix]);
    assert!(unverified.stdout.contains("evil") && unverified.stdout.contains("not verified"), "{}", unverified.stdout);
}

/// Writes an unsigned release record claiming `env` at `revision` straight into the
/// registry (raw HTTP, as an attacker with write access would).
fn forge_record(w: &World, env: &str, revision: &str) {
    use std::io::{Read, Write};
    let record = serde_json::json!({
        "schemaVersion": 1, "environment": env, "revision": revision, "time": "2026-01-01T00:00:00Z",
        "gateSkipped": false, "clusterTypes": {}
    })
    .to_string();
    // (status, Location header)
    let http = |method: &str, path: &str, ct: &str, body: &[u8]| -> (u16, String) {
        let mut s = std::net::TcpStream::connect(&w.reg.addr).unwrap();
        write!(s, "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n", w.reg.addr, body.len()).unwrap();
        s.write_all(body).unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).unwrap();
        let location = buf.lines().find_map(|l| l.strip_prefix("Location: ")).unwrap_or_default().trim().to_string();
        (buf[9..12].parse().unwrap(), location)
    };
    let digest = |b: &[u8]| {
        use sha2::Digest;
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)))
    };
    let repo = "pub/drover-releases";
    for blob in [record.as_bytes(), b"{}"] {
        let (code, location) = http("POST", &format!("/v2/{repo}/blobs/uploads/"), "application/octet-stream", b"");
        assert_eq!(code, 202, "upload start");
        let path = location.split_once(&w.reg.addr).map(|(_, p)| p.to_string()).unwrap_or(location);
        let sep = if path.contains('?') { '&' } else { '?' };
        let (code, _) = http("PUT", &format!("{path}{sep}digest={}", digest(blob)), "application/octet-stream", blob);
        assert_eq!(code, 201, "blob upload");
    }
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.drover.release.v1+json",
        "config": {"mediaType": "application/vnd.drover.release.v1+json", "digest": digest(record.as_bytes()), "size": record.len()},
        "layers": [{"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(b"{}"), "size": 2}]
    })
    .to_string();
    let (code, _) = http("PUT", &format!("/v2/{repo}/manifests/{env}"), "application/vnd.oci.image.manifest.v1+json", manifest.as_bytes());
    assert_eq!(code, 201, "manifest put");
    let _ = input;
}
