//! Air gap: `drover export` writes a deterministic OCI archive with bundles and their
//! signatures; `drover import` checks, verifies (fail closed) and pushes them into
//! another registry with digests and tags unchanged; bad archives push nothing.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use drover_tests::{run, run_ok, Out, Registry};

const PW: (&str, &str) = ("DROVER_KEY_PASSWORD", "pw");

fn catalog(reg: &Registry) -> String {
    let mut s = std::net::TcpStream::connect(&reg.addr).unwrap();
    write!(s, "GET /v2/_catalog HTTP/1.0\r\nHost: {}\r\n\r\n", reg.addr).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body.split("\r\n\r\n").nth(1).unwrap_or_default().trim().to_string()
}

fn input(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("cm.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: web}}\ndata: {{k: v}}\n"),
    )
    .unwrap();
}

fn tar_cmd(args: &[&str]) {
    let o = Command::new("tar").args(args).output().unwrap();
    assert!(o.status.success(), "tar {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

struct Setup {
    src: Registry,
    tmp: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let src = Registry::start();
        let tmp = tempfile::tempdir().unwrap();
        run_ok("drover", &["keygen", "--out-dir", tmp.path().join("k").to_str().unwrap()], &[PW]);
        Setup { src, tmp }
    }
    fn p(&self, rel: &str) -> String {
        self.tmp.path().join(rel).to_str().unwrap().to_string()
    }
    fn push(&self, name: &str, reference: &str, sign: bool) -> String {
        input(&self.tmp.path().join(name), name);
        let r = self.src.reference(reference);
        let key = self.p("k/drover.key");
        let mut args = vec![
            "-o",
            "json",
            "push",
            self.tmp.path().join(name).to_str().unwrap(),
            &r,
            "--plain-http",
            "--sequence",
            "9",
            "--environment",
            "dev",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        if sign {
            args.extend(["--key".to_string(), key]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_ok("drover", &args, &[PW]).json()["digest"].as_str().unwrap().to_string()
    }
    fn import(&self, file: &str, to: &str, key: bool) -> Out {
        let pubkey = self.p("k/drover.pub");
        let mut args = vec!["-o", "json", "import", file, "--to", to, "--plain-http"];
        if key {
            args.extend(["--trust-key", &pubkey]);
        }
        run("drover", &args, &[])
    }
}

#[test]
fn export_import_keeps_digests_tags_and_signatures() {
    let s = Setup::new();
    let edge = s.push("edge", "fleet/edge:dev", true);
    let core = s.push("core", "fleet/core:dev", true);
    let a = s.p("a.tar");
    let refs = [s.src.reference("fleet/edge:dev"), s.src.reference("fleet/edge:dev-9"), s.src.reference("fleet/core:dev")];
    let mut args: Vec<&str> = vec!["-o", "json", "export"];
    args.extend(refs.iter().map(String::as_str));
    args.extend(["--out", &a, "--plain-http"]);
    let e = run_ok("drover", &args, &[]).json();
    assert_eq!(e["bundles"].as_array().unwrap().len(), 3);
    assert!(e["bundles"].as_array().unwrap().iter().all(|b| b["signed"] == true), "{e}");
    // deterministic: a second export is byte-identical
    let b = s.p("b.tar");
    let pos = args.iter().position(|x| *x == a.as_str()).unwrap();
    args[pos] = &b;
    run_ok("drover", &args, &[]);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "exports of the same references are byte-identical");
    // ref names are <repository>:<tag>, signatures <repository>:sha256-<hex>.sig
    let x = s.p("x");
    std::fs::create_dir_all(&x).unwrap();
    tar_cmd(&["-xf", &a, "-C", &x]);
    let index = std::fs::read_to_string(Path::new(&x).join("index.json")).unwrap();
    for name in [
        "fleet/edge:dev",
        "fleet/edge:dev-9",
        "fleet/core:dev",
        &format!("fleet/edge:{}.sig", edge.replace(':', "-")),
        &format!("fleet/core:{}.sig", core.replace(':', "-")),
    ] {
        assert!(index.contains(&format!("\"org.opencontainers.image.ref.name\":\"{name}\"")), "{name} missing:\n{index}");
    }

    // import into another registry, verified against the key
    let dst = Registry::start();
    // --to REGISTRY/PREFIX puts each repository under the prefix, as publish --registry names them.
    let to = dst.reference("sovereign");
    let i = s.import(&a, &to, true);
    assert_eq!(i.code, 0, "{}", i.stderr);
    let j = i.json();
    assert!(j["manifests"].as_array().unwrap().iter().all(|m| m["action"] == "pushed"), "{j}");
    assert!(j["blobsUploaded"].as_u64().unwrap() >= 4);
    for (tag, digest) in [("edge:dev", &edge), ("edge:dev-9", &edge), ("core:dev", &core)] {
        let r = dst.reference(&format!("sovereign/{tag}"));
        let got = run_ok("drover", &["-o", "json", "inspect", &r, "--plain-http"], &[]).json();
        assert_eq!(&got["digest"], digest.as_str(), "{tag} keeps its digest");
        run_ok("drover", &["verify", &r, "--trust-key", &s.p("k/drover.pub"), "--plain-http"], &[]);
    }
    // importing again is a no-op
    let again = s.import(&a, &to, true);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let j = again.json();
    assert_eq!(j["blobsUploaded"], 0, "{j}");
    assert!(j["manifests"].as_array().unwrap().iter().all(|m| m["action"] == "unchanged"), "{j}");

    // Into an empty registry, through a recording proxy: per repository one tag list is
    // all that is read before writing (no HEAD of tags or blobs, no GET of a `.sig`
    // manifest that cannot exist), the manifest is stored by its tags after the
    // signature (no PUT by digest), and the result verifies like the import above.
    let third = Registry::start();
    let proxy = drover_tests::proxy::RecordingProxy::start(&third.addr);
    let i = s.import(&a, &format!("{}/mirror", proxy.addr), true);
    assert_eq!(i.code, 0, "{}", i.stderr);
    let lines = proxy.lines();
    for repo in ["edge", "core"] {
        let seen: Vec<&String> = lines.iter().filter(|l| l.contains(&format!("/v2/mirror/{repo}/"))).collect();
        let reads: Vec<&&String> = seen.iter().filter(|l| l.starts_with("GET ") || l.starts_with("HEAD ")).collect();
        assert!(reads.len() == 1 && reads[0].contains("/tags/list"), "{repo}: only the tag list is read: {seen:#?}");
        assert!(!seen.iter().any(|l| l.starts_with("PUT ") && l.contains("/manifests/sha256:")), "{repo}: no manifest PUT by digest: {seen:#?}");
        let sig = seen.iter().position(|l| l.starts_with("PUT ") && l.contains(".sig ")).unwrap_or_else(|| panic!("{repo}: no signature: {seen:#?}"));
        let first_tag = seen.iter().position(|l| l.starts_with("PUT ") && l.contains("/manifests/dev")).unwrap();
        assert!(sig < first_tag, "{repo}: the signature before any tag: {seen:#?}");
    }
    for tag in ["edge:dev", "edge:dev-9", "core:dev"] {
        run_ok("drover", &["verify", &third.reference(&format!("mirror/{tag}")), "--trust-key", &s.p("k/drover.pub"), "--plain-http"], &[]);
    }
}

#[test]
fn unsigned_bundle_with_key_refuses_the_whole_import() {
    let s = Setup::new();
    s.push("signed", "fleet/signed:dev", true);
    let unsigned = s.push("unsigned", "fleet/unsigned:dev", false);
    let f = s.p("mixed.tar");
    let e = run(
        "drover",
        &["export", &s.src.reference("fleet/signed:dev"), &s.src.reference("fleet/unsigned:dev"), "--out", &f, "--plain-http"],
        &[],
    );
    assert_eq!(e.code, 0, "{}", e.stderr);
    assert!(e.stderr.contains("no signature"), "export warns about the unsigned bundle: {}", e.stderr);
    let dst = Registry::start();
    let i = s.import(&f, &dst.reference("m"), true);
    assert_ne!(i.code, 0);
    assert!(i.stderr.contains("fleet/unsigned:dev") && i.stderr.contains(&unsigned) && i.stderr.contains("not signed"), "{}", i.stderr);
    assert_eq!(catalog(&dst), r#"{"repositories":[]}"#, "nothing pushed");
    // without --key the operator takes responsibility: it imports
    let i = s.import(&f, &dst.reference("m"), false);
    assert_eq!(i.code, 0, "{}", i.stderr);
}

#[test]
fn bad_archives_are_refused_and_push_nothing() {
    let s = Setup::new();
    s.push("edge", "fleet/edge:dev", true);
    let good = s.p("good.tar");
    run_ok("drover", &["export", &s.src.reference("fleet/edge:dev"), "--out", &good, "--plain-http"], &[]);
    let dst = Registry::start();
    let to = dst.reference("m");
    let bytes = std::fs::read(&good).unwrap();

    let check = |file: &str, needles: &[&str]| {
        let i = s.import(file, &to, true);
        assert_ne!(i.code, 0, "{file} was accepted");
        for n in needles {
            assert!(i.stderr.contains(n), "{file}: error lacks {n:?}: {}", i.stderr);
        }
        assert_eq!(catalog(&dst), r#"{"repositories":[]}"#, "{file}: nothing pushed");
    };

    // truncated
    let t = s.p("truncated.tar");
    std::fs::write(&t, &bytes[..bytes.len() / 2]).unwrap();
    check(&t, &["truncated.tar"]);

    // variants built from the extracted layout
    let variant = |name: &str, change: &dyn Fn(&Path)| -> String {
        let dir = s.tmp.path().join(format!("v-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        tar_cmd(&["-xf", &good, "-C", dir.to_str().unwrap()]);
        change(&dir);
        let out = s.p(&format!("{name}.tar"));
        tar_cmd(&["-cf", &out, "-C", dir.to_str().unwrap(), "."]);
        out
    };
    let index = |dir: &Path| -> serde_json::Value { serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap() };
    let layer_of = |dir: &Path| -> String {
        let idx = index(dir);
        let m = idx["manifests"].as_array().unwrap().iter().find(|m| m["artifactType"] == "application/vnd.drover.bundle.v1").unwrap();
        let hex = m["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string();
        let man: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("blobs/sha256").join(hex)).unwrap()).unwrap();
        man["layers"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string()
    };

    let wrong = variant("wrong-digest", &|d| {
        let p = d.join("blobs/sha256").join(layer_of(d));
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 1] ^= 0xff;
        std::fs::write(&p, b).unwrap();
    });
    check(&wrong, &["wrong-digest.tar", "tampered"]);

    let missing = variant("missing-blob", &|d| std::fs::remove_file(d.join("blobs/sha256").join(layer_of(d))).unwrap());
    check(&missing, &["missing-blob.tar", "missing"]);

    let noname = variant("no-ref-names", &|d| {
        let mut idx = index(d);
        for m in idx["manifests"].as_array_mut().unwrap() {
            m.as_object_mut().unwrap().remove("annotations");
        }
        std::fs::write(d.join("index.json"), serde_json::to_vec(&idx).unwrap()).unwrap();
    });
    check(&noname, &["no-ref-names.tar", "org.opencontainers.image.ref.name"]);

    let nosig = variant("no-signature", &|d| {
        let mut idx = index(d);
        idx["manifests"]
            .as_array_mut()
            .unwrap()
            .retain(|m| !m["annotations"]["org.opencontainers.image.ref.name"].as_str().unwrap().ends_with(".sig"));
        std::fs::write(d.join("index.json"), serde_json::to_vec(&idx).unwrap()).unwrap();
    });
    check(&nosig, &["fleet/edge:dev", "not signed"]);
}
