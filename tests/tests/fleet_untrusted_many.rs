//! Untrusted reports cost little (issue 31, item 5): a writer without a key floods a
//! reports repository with 10,000 unsigned reports — each within the format's limits, full
//! of text a terminal would obey, all claiming a real channel. The readers keep whole rows
//! for reports that count only; the others are counted and the first 100 named: `fleet
//! view` (membership from the roster: every report judged) runs under a 1 GiB data cap,
//! stays under 256 MiB and writes a page under 2 MiB; so does `fleet status --fleet`.
//! Before: `fleet view` aborted at the 1 GiB cap, `fleet status` took 370 MB.
//!
//! The 10,000 are written as an edited OCI layout (what a carrier of an archive hands
//! over, read with `--reports oci:DIR`): written with raw HTTP they take this shared
//! machine minutes (three requests each on docker-registry 2.8, which has no monolithic
//! upload). The same flood in the registry, 150 reports by raw HTTP, is read the same way
//! (counted, the first 100 named); the reader's path after the fetch is the same code.

mod fleet_support;

use std::time::Duration;

use drover_tests::rawreg;
use drover_tests::spawn::run_measured;
use fleet_support::{workload, Fleet, Target};
use serde_json::json;

const FLOOD: usize = 10_000;
const CAP: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// One unsigned report within the format's limits: failing objects with 300-character
/// messages of escape sequences (a few KiB; what the old page drew in full, 26 KB a report).
fn forged(i: usize) -> Vec<u8> {
    let message: String = "\u{1b}[32mHealthy\u{1b}[0m\u{7}".chars().cycle().take(300).collect();
    let failing: Vec<_> = (0..5)
        .map(|n| json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": format!("web-{n}"), "state": "Degraded", "message": message}))
        .collect();
    serde_json::to_vec(&json!({
        "schemaVersion": 1, "clusterName": format!("flood-{i:05}"), "clusterType": "edge", "environment": "prod", "channel": "prod-ring0",
        "health": "Healthy", "healthSince": "2026-01-01T00:00:00Z", "failing": failing, "agentVersion": "9".repeat(60),
        "reportedAt": drover_proto::time::now_rfc3339(),
    }))
    .unwrap()
}

fn report_manifest(body: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": "application/vnd.drover.report.v1",
        "config": {"mediaType": "application/vnd.drover.report.v1+json", "digest": rawreg::digest(body), "size": body.len(),
                   "data": base64::engine::general_purpose::STANDARD.encode(body)},
        "layers": []
    }))
    .unwrap()
}

/// Writes reports `from..to` under their own tags with raw HTTP: the blob upload (`POST`,
/// then `PUT` with the digest) and the manifest `PUT`.
fn write_reports(reg: &str, from: usize, to: usize) {
    for i in from..to {
        let body = forged(i);
        let started = rawreg::request(reg, "POST", "/v2/fleet/drover-reports/blobs/uploads/", &[], b"").unwrap();
        let location = started.header("location").expect("an upload location").to_string();
        let path = location.split_once(reg).map_or(location.as_str(), |(_, p)| p);
        let sep = if path.contains('?') { '&' } else { '?' };
        let put = rawreg::request(reg, "PUT", &format!("{path}{sep}digest={}", rawreg::digest(&body)), &[("Content-Type", "application/octet-stream")], &body).unwrap();
        assert_eq!(put.status, 201, "blob upload: {}", String::from_utf8_lossy(&put.body));
        rawreg::put_manifest(reg, "fleet/drover-reports", &format!("edge.flood-{i:05}"), &report_manifest(&body), "application/vnd.oci.image.manifest.v1+json");
    }
}

/// Writes reports `0..n` into a new OCI layout `dir` (one repository, ref names = tags),
/// the same documents as [`forged`]; with Python's hashlib, so that writing 20,000 files
/// costs the test seconds, not minutes of an unoptimized build.
fn write_layout(dir: &std::path::Path, n: usize) {
    const SCRIPT: &str = r#"
import json, hashlib, base64, os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d + "/blobs/sha256")
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
msg = ("\x1b[32mHealthy\x1b[0m\x07" * 30)[:300]
now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
index = []
def put(b):
    h = hashlib.sha256(b).hexdigest()
    open(d + "/blobs/sha256/" + h, "wb").write(b)
    return "sha256:" + h
for i in range(n):
    body = json.dumps({"schemaVersion": 1, "clusterName": "flood-%05d" % i, "clusterType": "edge", "environment": "prod", "channel": "prod-ring0",
        "health": "Healthy", "healthSince": "2026-01-01T00:00:00Z", "agentVersion": "9" * 60, "reportedAt": now,
        "failing": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "web-%d" % k, "state": "Degraded", "message": msg} for k in range(5)]}).encode()
    m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": "application/vnd.drover.report.v1",
        "config": {"mediaType": "application/vnd.drover.report.v1+json", "digest": put(body), "size": len(body), "data": base64.b64encode(body).decode()},
        "layers": []}).encode()
    index.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": put(m), "size": len(m), "artifactType": "application/vnd.drover.report.v1",
        "annotations": {"org.opencontainers.image.ref.name": "edge.flood-%05d" % i}})
json.dump({"schemaVersion": 2, "manifests": index}, open(d + "/index.json", "w"))
"#;
    let out = std::process::Command::new("python3").args(["-c", SCRIPT, dir.to_str().unwrap(), &n.to_string()]).output().unwrap();
    assert!(out.status.success(), "writing the layout: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn ten_thousand_untrusted_reports_cost_little() {
    let reg = drover_tests::Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    f.push("edge", "prod", "prod-ring0", 1, &workload("app", "1", None));
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.enroll(&["--all-pending"]);
    let file = f.fleet_file(&["edge"]);
    f.enroll_fleet(&file, &["--all-pending"]);

    // The flood in the registry, by raw HTTP (other clusters than the layout's): counted,
    // the first 100 named.
    std::thread::scope(|s| {
        for w in 0..6 {
            let reg = f.reg.clone();
            s.spawn(move || write_reports(&reg, FLOOD + w * 25, FLOOD + (w + 1) * 25));
        }
    });
    let prefix = format!("{}/fleet", f.reg);
    let (public, fleet) = (f.pubkey(), file.display().to_string());
    let out = f.drover(&["-o", "json", "fleet", "status", "--registry", &prefix, "--fleet", &fleet]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let st = out.json();
    assert_eq!((st["untrusted"]["reports"].as_u64(), st["untrusted"]["named"].as_array().unwrap().len()), (Some(150), 100), "{}", out.stdout);
    // The 10,000, as a layout (in memory when the machine has /dev/shm: 120 MB of small files).
    let shm = std::path::Path::new("/dev/shm");
    let scratch = if shm.is_dir() { tempfile::tempdir_in(shm).unwrap() } else { tempfile::tempdir().unwrap() };
    let layout = scratch.path().join("flood");
    write_layout(&layout, FLOOD);
    let flood = format!("oci:{}", layout.display());
    let page = tmp.path().join("fleet.html");
    let limit = Duration::from_secs(600);
    // The page, against the roster: every report is judged, c1's counts.
    let args = ["fleet", "view", "--registry", &prefix, "--reports", &flood, "--trust-key", &public, "--out", page.to_str().unwrap(), "--plain-http"];
    let (out, peak) = run_measured(CAP, limit, "drover", &args).unwrap();
    assert_eq!(out.code, 0, "fleet view under a 1 GiB data cap: {}", out.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!((html.len() as u64) < 2 * MIB, "the page is {} bytes", html.len());
    assert!(peak < 256 * MIB, "fleet view peaked at {} MiB", peak / MIB);
    assert!(html.contains("data-cluster=\"edge.c1\""), "c1 is drawn");
    assert!(html.contains(&format!("+{} untrusted, not named", FLOOD + 150 - 100)), "the flood is counted, not drawn");
    assert!(!html.contains('\u{1b}'), "no escape reaches the page");

    // And `fleet status --fleet`: every report judged against the file.
    {
        let extra = ["--fleet", fleet.as_str()];
        let mut args = vec!["-o", "json", "fleet", "status", "--registry", &prefix, "--reports", &flood, "--plain-http"];
        args.extend_from_slice(&extra);
        let (out, peak) = run_measured(CAP, limit, "drover", &args).unwrap();
        assert_eq!(out.code, 0, "{extra:?}: {}", out.stderr);
        assert!(peak < 256 * MIB, "fleet status {extra:?} peaked at {} MiB", peak / MIB);
        let st = out.json();
        let rows = st["clusters"].as_array().unwrap();
        let named = st["untrusted"]["named"].as_array().unwrap().len() + rows.iter().filter(|r| r["class"] == "untrusted").count();
        assert!(named <= 100, "at most 100 untrusted reports are named, {named} were: {extra:?}");
        assert_eq!(rows.iter().filter(|r| r["class"] == "ready").count(), 1, "c1 counts: {extra:?}");
        let counted = st["untrusted"]["reports"].as_u64().unwrap() + st["summary"][0]["untrusted"].as_u64().unwrap();
        assert_eq!(counted, (FLOOD + 150) as u64, "every forged report is counted: {extra:?}");
    }
}
