//! `drover push`, `drover import` and `drover publish` write a real registry through a
//! seeded fault-injecting proxy (tests/src/faults.rs: 500/502/503, 429, resets after the
//! registry took a write but before its answer arrived, slow and damaged bodies). Each
//! attempt either completes or fails with a clear error (exit 1, the failed request
//! named, no panic); a retry, with faults or without, completes with the same digests;
//! and after every attempt an audit that walks every tag of the registry with raw HTTP
//! (not through drover, not through the proxy) finds no tag naming a manifest whose
//! blobs are missing, and no tag naming a bundle without a signature whose blobs exist.
//! The first attempt of each operation also meets a scripted reset on its first write.
//! Seed: DROVER_FAULT_SEED (default 14), printed on failure.

use std::collections::BTreeMap;
use std::path::Path;

use drover_proto::media;
use drover_tests::faults::{Fault, FaultProxy};
use drover_tests::{rawreg, run, run_ok, Out, Registry};
use serde_json::Value;

/// Faults per 1,000 proxied requests.
const RATE: u32 = 40;
/// Attempts with faults per operation before the fault-free retry.
const TRIES: u32 = 8;
const PW: (&str, &str) = ("DROVER_KEY_PASSWORD", "");

fn seed() -> u64 {
    std::env::var("DROVER_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(14)
}

/// Every tag of every repository → the digest of the manifest it names (raw HTTP).
fn tag_map(addr: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for repo in rawreg::repositories(addr) {
        for tag in rawreg::tags(addr, &repo) {
            if let Some((bytes, _)) = rawreg::manifest(addr, &repo, &tag) {
                out.insert(format!("{repo}:{tag}"), rawreg::digest(&bytes));
            }
        }
    }
    out
}

/// The blobs `m` names that are not embedded (`data`) and not in `repo`.
fn missing_blobs(addr: &str, repo: &str, m: &Value) -> Vec<String> {
    let mut descs = vec![&m["config"]];
    descs.extend(m["layers"].as_array().into_iter().flatten());
    descs
        .into_iter()
        .filter(|d| d["data"].is_null())
        .filter_map(|d| d["digest"].as_str())
        .filter(|d| !rawreg::blob_exists(addr, repo, d))
        .map(str::to_string)
        .collect()
}

/// What is wrong with the registry: a tag whose manifest names a missing blob, a tag
/// naming a bundle with no signature manifest, or a signature without layers.
fn audit(addr: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for repo in rawreg::repositories(addr) {
        for tag in rawreg::tags(addr, &repo) {
            let Some((bytes, _)) = rawreg::manifest(addr, &repo, &tag) else {
                problems.push(format!("{repo}:{tag} is listed but names no manifest"));
                continue;
            };
            let m: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            for b in missing_blobs(addr, &repo, &m) {
                problems.push(format!("{repo}:{tag} names a manifest whose blob {b} is missing"));
            }
            let bundle = m["config"]["mediaType"] == media::BUNDLE_CONFIG || m["artifactType"] == media::BUNDLE_ARTIFACT_TYPE;
            if !bundle {
                continue;
            }
            let sig = format!("{}.sig", rawreg::digest(&bytes).replace(':', "-"));
            match rawreg::manifest(addr, &repo, &sig) {
                None => problems.push(format!("{repo}:{tag} names a bundle without a signature ({sig} missing)")),
                Some((s, _)) => {
                    let s: Value = serde_json::from_slice(&s).unwrap_or(Value::Null);
                    if s["layers"].as_array().is_none_or(|l| l.is_empty()) {
                        problems.push(format!("{repo}:{sig} has no signature layer"));
                    }
                    for b in missing_blobs(addr, &repo, &s) {
                        problems.push(format!("{repo}:{sig} names a missing blob {b}"));
                    }
                }
            }
        }
    }
    problems
}

/// A failed attempt must fail clearly: exit 1, an error line that names the request
/// (registry answer, connection, digest), no panic.
fn assert_clear_failure(out: &Out, ctx: &dyn Fn(String) -> String) {
    assert_eq!(out.code, 1, "{}", ctx(format!("exit {}: {}", out.code, out.stderr)));
    assert!(!out.stderr.contains("panicked"), "{}", ctx(out.stderr.clone()));
    let named = ["registry answered HTTP", "request to", "digest mismatch", "connection", "timed out"];
    assert!(named.iter().any(|n| out.stderr.contains(n)), "{}", ctx(format!("an unclear error: {}", out.stderr)));
}

/// Runs `attempt` through the proxy (faults on) until it completes or [`TRIES`] ran,
/// auditing the registry after each; then once more without faults. Returns (the
/// outputs of the completed attempts, the number of failed attempts).
fn attempts(name: &str, proxy: &FaultProxy, reg: &Registry, attempt: &dyn Fn() -> Out) -> (Vec<Value>, u32) {
    let seed = proxy.seed;
    let ctx = |m: String| format!("{name}, seed {seed} (re-run with DROVER_FAULT_SEED={seed}): {m}");
    let (mut done, mut failed) = (Vec::new(), 0);
    proxy.set_rate(RATE);
    // Whatever the seed, the first attempt meets the nastiest fault: its first write
    // (PUT) reaches the registry and takes effect, and the answer is a reset.
    proxy.script("PUT /v2/", Fault::Reset);
    for _ in 0..TRIES {
        let out = attempt();
        let problems = audit(&reg.addr);
        assert!(problems.is_empty(), "{}", ctx(format!("after an attempt ({}):\n{}\n{}", out.code, problems.join("\n"), out.stderr)));
        if out.code == 0 {
            done.push(out.json());
            break;
        }
        failed += 1;
        assert_clear_failure(&out, &ctx);
        eprintln!("{name}: {}", out.stderr.lines().filter(|l| l.contains("error")).collect::<Vec<_>>().join(" | "));
    }
    proxy.set_rate(0);
    let before = tag_map(&reg.addr);
    let out = attempt();
    assert_eq!(out.code, 0, "{}", ctx(format!("the fault-free retry failed: {}", out.stderr)));
    assert!(audit(&reg.addr).is_empty(), "{}", ctx(audit(&reg.addr).join("\n")));
    if !done.is_empty() {
        assert_eq!(tag_map(&reg.addr), before, "{}", ctx("a retry after a completed attempt moved or added tags".into()));
    }
    done.push(out.json());
    (done, failed)
}

fn write_input(dir: &Path, i: u64) {
    std::fs::create_dir_all(dir).unwrap();
    for j in 0..3 {
        let y = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{j}\n  namespace: app\ndata:\n  v: rev-{i:03}-{j}\n");
        std::fs::write(dir.join(format!("c{j}.yaml")), y).unwrap();
    }
}

#[test]
fn push_through_a_faulty_registry() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("k/drover.key");
    run_ok("drover", &["keygen", "--out-dir", tmp.path().join("k").to_str().unwrap()], &[PW]);
    let proxy = FaultProxy::start(&reg.addr, seed(), RATE);
    let target = format!("{}/fleet/edge:prod", proxy.addr);
    let mut failed = 0;
    for i in 1..=3u64 {
        let dir = tmp.path().join(format!("in-{i}"));
        write_input(&dir, i);
        let seq = i.to_string();
        let push = || {
            let args = [
                "-o", "json", "push", dir.to_str().unwrap(), &target, "--plain-http", "--key", key.to_str().unwrap(), "--sequence", &seq,
                "--cluster-type", "edge", "--environment", "prod",
            ];
            run("drover", &args, &[PW])
        };
        let (done, f) = attempts(&format!("push {i}"), &proxy, &reg, &push);
        failed += f;
        let digests: Vec<&Value> = done.iter().map(|v| &v["digest"]).collect();
        assert!(digests.iter().all(|d| *d == digests[0] && d.is_string()), "push {i}: retries gave other digests: {digests:?}");
        let tags = tag_map(&reg.addr);
        assert_eq!(tags.get("fleet/edge:prod").map(String::as_str), digests[0].as_str(), "push {i}: the channel tag");
    }
    // The audit sees what it looks for: a bundle manifest under a tag, unsigned.
    let (bytes, mt) = rawreg::manifest(&reg.addr, "fleet/edge", "prod").unwrap();
    let mut m: Value = serde_json::from_slice(&bytes).unwrap();
    m["annotations"]["org.example.unsigned"] = "yes".into();
    rawreg::put_manifest(&reg.addr, "fleet/edge", "unsigned", &serde_json::to_vec(&m).unwrap(), &mt);
    let problems = audit(&reg.addr);
    assert!(problems.len() == 1 && problems[0].contains("fleet/edge:unsigned names a bundle without a signature"), "{problems:?}");
    eprintln!("push, seed {}: {} faults injected, {failed} failed attempts", proxy.seed, proxy.injected().len());
    assert!(failed > 0, "seed {}: no attempt failed: the faults were not seen", proxy.seed);
}

#[test]
fn import_through_a_faulty_registry() {
    let src = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("k");
    run_ok("drover", &["keygen", "--out-dir", k.to_str().unwrap()], &[PW]);
    let mut refs = Vec::new();
    for (i, ct) in [(1u64, "edge"), (2, "core")] {
        let dir = tmp.path().join(format!("in-{i}"));
        write_input(&dir, i);
        let r = src.reference(&format!("fleet/{ct}:dev"));
        run_ok("drover", &["push", dir.to_str().unwrap(), &r, "--plain-http", "--key", k.join("drover.key").to_str().unwrap(), "--sequence", "4", "--environment", "dev"], &[PW]);
        refs.push(r);
    }
    let archive = tmp.path().join("a.tar");
    let mut args = vec!["export"];
    args.extend(refs.iter().map(String::as_str));
    args.extend(["--out", archive.to_str().unwrap(), "--plain-http"]);
    run_ok("drover", &args, &[]);

    let dst = Registry::start();
    let proxy = FaultProxy::start(&dst.addr, seed(), RATE);
    let to = format!("{}/sovereign", proxy.addr);
    let pubkey = k.join("drover.pub");
    let import = || run("drover", &["-o", "json", "import", archive.to_str().unwrap(), "--to", &to, "--plain-http", "--trust-key", pubkey.to_str().unwrap()], &[]);
    let (done, failed) = attempts("import", &proxy, &dst, &import);
    let digests = |v: &Value| -> Vec<(String, String)> {
        let mut d: Vec<(String, String)> = v["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["reference"].as_str().or(m["tag"].as_str()).unwrap_or("").to_string(), m["digest"].as_str().unwrap_or("").to_string()))
            .collect();
        d.sort();
        d
    };
    let first = digests(&done[0]);
    assert!(first.iter().all(|(_, d)| d.starts_with("sha256:")), "{}", done[0]);
    for v in &done {
        assert_eq!(digests(v), first, "import: retries gave other digests");
    }
    // Digests unchanged from the source.
    let tags = tag_map(&dst.addr);
    let source = tag_map(&src.addr);
    for ct in ["edge", "core"] {
        assert_eq!(tags.get(&format!("sovereign/{ct}:dev")), source.get(&format!("fleet/{ct}:dev")), "{ct}: {tags:#?}");
    }
    eprintln!("import, seed {}: {} faults injected, {failed} failed attempts", proxy.seed, proxy.injected().len());
    assert!(failed > 0, "seed {}: no attempt failed: the faults were not seen", proxy.seed);
}

/// A platform: environments dev and prod, cluster types edge and cloud, one workload.
fn platform(root: &Path) {
    let files = [
        ("fleet.yaml", "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, prod]\n"),
        ("cluster-types/edge.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: factory}\n"),
        ("cluster-types/cloud.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: cloud}\n"),
        ("environments/dev.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\n"),
        ("environments/prod.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: prod}\n"),
        ("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {}\nvalues:\n  x: one\n"),
        (
            "workloads/app/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values\n  namespace: {{ namespace }}\ndata:\n  x: {{ values.x | tojson }}\n",
        ),
    ];
    drover_tests::write_files(root, &files);
}

#[test]
fn publish_through_a_faulty_registry() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("k");
    run_ok("drover", &["keygen", "--out-dir", k.to_str().unwrap()], &[PW]);
    let root = tmp.path().join("platform");
    platform(&root);
    let proxy = FaultProxy::start(&reg.addr, seed(), RATE);
    let prefix = format!("{}/fleet", proxy.addr);
    let key = k.join("drover.key");
    let mut failed = 0;
    for (env, revision) in [("dev", "r1"), ("prod", "r1")] {
        let publish = || {
            let args = [
                "-o", "json", "publish", root.to_str().unwrap(), "--env", env, "--registry", &prefix, "--key", key.to_str().unwrap(), "--plain-http",
                "--revision", revision,
            ];
            run("drover", &args, &[PW])
        };
        let (done, f) = attempts(&format!("publish {env}"), &proxy, &reg, &publish);
        failed += f;
        let digests = |v: &Value| -> Vec<(String, String)> {
            v["results"].as_array().unwrap().iter().map(|r| (r["clusterType"].to_string(), r["digest"].to_string())).collect()
        };
        let first = digests(&done[0]);
        assert_eq!(first.len(), 2, "{}", done[0]);
        for v in &done {
            assert_eq!(digests(v), first, "publish {env}: retries gave other digests");
        }
        // The release record exists once an attempt completed (the promotion gate of the
        // next environment reads it), even when an earlier attempt failed to write it.
        let record = format!("fleet/drover-releases:{env}-{revision}");
        assert!(tag_map(&reg.addr).contains_key(&record), "publish {env}: no release record {record}");
    }
    eprintln!("publish, seed {}: {} faults injected, {failed} failed attempts", proxy.seed, proxy.injected().len());
    assert!(failed > 0, "seed {}: no attempt failed: the faults were not seen", proxy.seed);
}
