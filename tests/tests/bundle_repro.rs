//! Reproducibility: the same input and flags give the same digest whatever the files'
//! mtimes, the order the directory was created in, and formatting/key order; and
//! `SOURCE_DATE_EPOCH` / `--created` / `--sequence` behave as documented.

use std::path::Path;
use std::time::{Duration, SystemTime};

use drover_tests::{run_ok, Registry};

const FILES: &[(&str, &str)] = &[
    ("a/deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: web}\nspec: {replicas: 3}\n"),
    ("a/svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: web}\nspec:\n  ports:\n  - port: 80\n"),
    ("b/ns.yml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n"),
    (
        "c/d/e/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: web}\ndata:\n  script: |\n    #!/bin/sh\n    echo hi\n",
    ),
    ("z.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z, namespace: web}\n"),
];

fn make(dir: &Path, order: &[usize], mtime: SystemTime) {
    for &i in order {
        let (rel, text) = FILES[i];
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        std::fs::File::options().write(true).open(&p).unwrap().set_modified(mtime).unwrap();
    }
}

fn build(dir: &Path, layout: &Path, extra: &[&str], env: &[(&str, &str)]) -> String {
    let out = format!("oci:{}:t", layout.display());
    let mut args = vec!["-o", "json", "build", dir.to_str().unwrap(), "--out", &out, "--sequence", "5", "--cluster-type", "edge"];
    args.extend_from_slice(extra);
    run_ok("drover", &args, env).json()["digest"].as_str().unwrap().to_string()
}

#[test]
fn same_digest_whatever_mtimes_and_creation_order() {
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    let two = tmp.path().join("two");
    make(&one, &[0, 1, 2, 3, 4], SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    make(&two, &[4, 3, 2, 1, 0], SystemTime::now());
    let d1 = build(&one, &tmp.path().join("l1"), &[], &[]);
    let d2 = build(&two, &tmp.path().join("l2"), &[], &[]);
    assert_eq!(d1, d2);
    // the layouts hold byte-identical blobs
    let blobs = |l: &str| {
        let mut v: Vec<_> = std::fs::read_dir(tmp.path().join(l).join("blobs/sha256")).unwrap().map(|e| e.unwrap().file_name()).collect();
        v.sort();
        v
    };
    assert_eq!(blobs("l1"), blobs("l2"));

    // reformatting (flow vs block style, key order, comments) does not change the digest
    let three = tmp.path().join("three");
    make(&three, &[1, 2, 3, 4], SystemTime::now());
    std::fs::write(
        three.join("a/deploy.yaml"),
        "# comment\nspec:\n  replicas: 3\nmetadata:\n  namespace: web\n  name: api\nkind: Deployment\napiVersion: apps/v1\n",
    )
    .unwrap();
    assert_eq!(build(&three, &tmp.path().join("l3"), &[], &[]), d1);

    // a content change does
    std::fs::write(three.join("a/deploy.yaml"), FILES[0].1.replace("replicas: 3", "replicas: 4")).unwrap();
    assert_ne!(build(&three, &tmp.path().join("l4"), &[], &[]), d1);
}

#[test]
fn created_sequence_and_registry_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    make(&dir, &[0, 1, 2, 3, 4], SystemTime::now());
    // SOURCE_DATE_EPOCH and the equivalent --created give the same digest
    let a = build(&dir, &tmp.path().join("la"), &[], &[("SOURCE_DATE_EPOCH", "1700000000")]);
    let b = build(&dir, &tmp.path().join("lb"), &["--created", "2023-11-14T23:13:20+01:00"], &[]);
    let c = build(&dir, &tmp.path().join("lc"), &["--created", "1700000000"], &[]);
    assert_eq!(a, b);
    assert_eq!(a, c);
    let none = build(&dir, &tmp.path().join("ld"), &[], &[]);
    assert_ne!(a, none, "created is part of the manifest when given");
    let manifest = std::fs::read_to_string(tmp.path().join("la/blobs/sha256").join(a.trim_start_matches("sha256:"))).unwrap();
    assert!(manifest.contains("\"org.opencontainers.image.created\":\"2023-11-14T22:13:20Z\""), "{manifest}");
    let plain = std::fs::read_to_string(tmp.path().join("ld/blobs/sha256").join(none.trim_start_matches("sha256:"))).unwrap();
    assert!(!plain.contains("created"), "no created annotation unless asked: {plain}");

    // the registry stores exactly the bytes build wrote: push gives the same digest
    let reg = Registry::start();
    let p = run_ok(
        "drover",
        &[
            "-o",
            "json",
            "push",
            dir.to_str().unwrap(),
            &reg.reference("r/edge:x"),
            "--plain-http",
            "--sequence",
            "5",
            "--cluster-type",
            "edge",
        ],
        &[],
    )
    .json();
    assert_eq!(p["digest"], none.as_str());

    // without --sequence the sequence is the current time in seconds
    let before = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let out = format!("oci:{}:t", tmp.path().join("le").display());
    let j = run_ok("drover", &["-o", "json", "build", dir.to_str().unwrap(), "--out", &out], &[]).json();
    let seq = j["sequence"].as_u64().unwrap();
    assert!(seq >= before && seq <= before + 60, "{seq} vs {before}");
}

#[test]
fn cluster_scoped_kind_and_allow_mass_prune_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("g.yaml"), "apiVersion: ex.io/v1\nkind: Gadget\nmetadata: {name: g}\n").unwrap();
    let out = format!("oci:{}:t", tmp.path().join("l").display());
    let refused = drover_tests::run("drover", &["build", dir.to_str().unwrap(), "--out", &out], &[]);
    assert_ne!(refused.code, 0, "Gadget is namespaced unless declared");
    assert!(refused.stderr.contains("--cluster-scoped-kind Gadget"), "{}", refused.stderr);
    run_ok(
        "drover",
        &["build", dir.to_str().unwrap(), "--out", &out, "--cluster-scoped-kind", "Gadget", "--allow-mass-prune", "--sequence", "1"],
        &[],
    );
    let i = run_ok("drover", &["-o", "json", "inspect", &out], &[]).json();
    assert_eq!(i["config"]["allowMassPrune"], true);
    assert_eq!(i["allowMassPrune"], true);
    assert_eq!(i["config"]["objects"][0]["path"], "manifests/_cluster/Gadget.ex.io.g.yaml");
}

/// Writes FILES plus `count` ~300 KiB ConfigMaps `<name>-<i>` whose data is a chain of
/// sha256 hex digests of `<seed><i>-<j>`.
fn fixed_input(dir: &Path, count: usize, seed: &str, name: &str) {
    use sha2::Digest;
    make(dir, &[0, 1, 2, 3, 4], SystemTime::UNIX_EPOCH + Duration::from_secs(1));
    for i in 0..count {
        let payload: String = (0..4700).map(|j| hex::encode(sha2::Sha256::digest(format!("{seed}{i}-{j}").as_bytes()))).collect();
        let text = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}-{i}, namespace: data}}\ndata:\n  payload: {payload}\n");
        std::fs::write(dir.join(format!("{name}-{i}.yaml")), text).unwrap();
    }
}

/// FILES plus eight ConfigMaps (2.4 MiB in all: hashed on the second thread, files parsed
/// on every core, below the size where the layer is compressed in segments).
fn pinned_input(dir: &Path) {
    fixed_input(dir, 8, "", "big");
}

/// The digests of a fixed input, as built by drover before the build was parallelised
/// (input files parsed on every core, the tar hashed while it is compressed): the same
/// input must keep giving the same bundle, byte for byte, from one drover version to the
/// next (the gzip backend and level are part of the format; docs/bundle.md).
#[test]
fn digests_of_a_fixed_input_are_pinned() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    pinned_input(&input);
    let out = format!("oci:{}:t", tmp.path().join("l").display());
    let v = run_ok("drover", &["-o", "json", "build", input.to_str().unwrap(), "--out", &out, "--sequence", "5", "--cluster-type", "edge"], &[]).json();
    let layout = tmp.path().join("l");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(layout.join("blobs/sha256").join(&v["digest"].as_str().unwrap()[7..])).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["layers"][0]["digest"], PINNED_LAYER, "the content layer (tar.gz) of the fixed input changed");
    assert_eq!(v["digest"], PINNED_MANIFEST, "the bundle digest of the fixed input changed");
}

/// Built by drover at commit b2de3af (before issue 13's changes) from [`pinned_input`].
const PINNED_MANIFEST: &str = "sha256:c94af35e6d71e2cee4c92602159f2718b6ef6fe497af9efa3cae4ff4142e4ad0";
const PINNED_LAYER: &str = "sha256:942b57db65d52f21884d189a41a300208dca8a990b66438e6c0999b7f8fd15d9";

/// FILES plus twenty ~300 KiB ConfigMaps (6 MiB of YAML): above the size where the content
/// layer is compressed in segments (layer encoding 2, docs/bundle.md).
fn pinned_large_input(dir: &Path) {
    fixed_input(dir, 20, "L", "large");
}

/// A layer over 4 MiB of tar is compressed in 1 MiB segments on every core: its digest is
/// pinned like the small one's (it must not change from one drover version to the next),
/// and an independent reader (GNU gzip and tar) unpacks it to every file of the bundle.
#[test]
fn digests_of_a_large_input_are_pinned_and_gzip_reads_the_segmented_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    pinned_large_input(&input);
    let layout = tmp.path().join("l");
    let out = format!("oci:{}:t", layout.display());
    let v = run_ok("drover", &["-o", "json", "build", input.to_str().unwrap(), "--out", &out, "--sequence", "5", "--cluster-type", "edge"], &[]).json();
    let blob = |d: &str| layout.join("blobs/sha256").join(&d[7..]);
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(blob(v["digest"].as_str().unwrap())).unwrap()).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap().to_string();
    let listing = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("gzip -dc < '{}' | tar -tf -", blob(&layer).display()))
        .output()
        .unwrap();
    assert!(listing.status.success(), "gzip/tar could not read the layer: {}", String::from_utf8_lossy(&listing.stderr));
    let names = String::from_utf8(listing.stdout).unwrap();
    assert_eq!(names.lines().filter(|l| l.ends_with(".yaml")).count(), 25, "{names}");
    // Segmented: every 1 MiB segment but the last ends with a sync flush, an empty stored
    // block whose bytes are 00 00 FF FF (by chance ~once in 4 GiB of deflate output).
    let gz = std::fs::read(blob(&layer)).unwrap();
    let tar_size = std::process::Command::new("sh").arg("-c").arg(format!("gzip -dc < '{}' | wc -c", blob(&layer).display())).output().unwrap();
    let tar_size: usize = String::from_utf8(tar_size.stdout).unwrap().trim().parse().unwrap();
    assert!(tar_size > 4 << 20, "the input must be over 4 MiB of tar: {tar_size}");
    let markers = gz.windows(4).filter(|w| w == &[0, 0, 0xff, 0xff]).count();
    assert!(markers >= tar_size / (1 << 20), "{markers} sync flushes in a layer of {tar_size} bytes of tar: not compressed in 1 MiB segments");
    assert_eq!(layer, PINNED_LARGE_LAYER, "the content layer (tar.gz) of the large fixed input changed");
    assert_eq!(v["digest"], PINNED_LARGE_MANIFEST, "the bundle digest of the large fixed input changed");
}

/// Built by drover when layer encoding 2 (segmented gzip above 4 MiB of tar) was introduced.
const PINNED_LARGE_MANIFEST: &str = "sha256:f6e519d8b3ded4df1433535c1dbcd07d792d341e746fb3b3aeb1fa37b90a10d8";
const PINNED_LARGE_LAYER: &str = "sha256:15fbd2e6bf3b2cd4e104c2de2bd91beb2261e67f65baedec79cc42f06a49132d";
