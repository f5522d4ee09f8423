//! Agent reports on the dir target, against the real registry: a report write that fails
//! (dead port) or hangs (a stalled registry) never changes or delays the apply; the
//! report's format as an independent peer (skopeo) reads it, with no object content; a
//! new leader (empty state directory) keeps its predecessor's healthSince; forged and
//! broken reports are skipped by name; `drover export` carries a reports repository out
//! and `fleet status`/`fleet view` read the archive offline; what a reports registry sees:
//! three requests per report write (no blob HEAD), and an agent whose writes are refused backs off instead
//! of retrying on every poll.

mod agent_support;
mod fleet_support;

use std::process::{Command, Stdio};

use agent_support::{http_get, snapshot, terminate, wait_until};
use base64::Engine as _;
use drover_tests::proxy::RecordingProxy;
use drover_tests::{free_port, Registry, RegistrySetup};
use fleet_support::{curl_report, workload, Fleet, Stalled, Target};
use serde_json::{json, Value};

fn world() -> (Registry, tempfile::TempDir, Fleet) {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    (reg, tmp, f)
}

fn status_from_state(f: &Fleet, name: &str) -> Value {
    let state = f.state_dir(name);
    drover_tests::run_ok("drover-agent", &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", state.to_str().unwrap()], &[]).json()
}

#[test]
fn a_report_that_cannot_be_written_changes_nothing_in_the_apply() {
    let (_reg, tmp, f) = world();
    let d1 = f.push("edge", "prod", "prod", 1, &workload("app", "1", None));
    // Control: the same apply without reporting.
    f.agent_ok("control", "edge", "prod", "prod", Target::Dir, &["--no-report"]);
    // Reports to a port nothing listens on.
    let dead = format!("127.0.0.1:{}/fleet/drover-reports", free_port());
    let out = f.agent("c1", "edge", "prod", "prod", Target::Dir, &["--report-to", &dead]);
    assert_eq!(out.code, 0, "the apply succeeded, the report did not: exit 0\n{}", out.stderr);
    assert!(out.stderr.contains("report not written"), "the failed report is logged: {}", out.stderr);
    let st = status_from_state(&f, "c1");
    assert_eq!((st["appliedDigest"].as_str(), st["lastAttempt"]["result"].as_str()), (Some(d1.as_str()), Some("Applied")), "{st:#}");
    assert_eq!(
        snapshot(&tmp.path().join("agents/c1/out/manifests")),
        snapshot(&tmp.path().join("agents/control/out/manifests")),
        "the target is what it is without reporting"
    );

    // A stalled reports registry (accepts, never answers) does not hold up the polls: a
    // new bundle is applied while the report push still hangs on its first connection.
    let stalled = Stalled::start();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let state = f.state_dir("c2");
    let target = format!("dir:{}", tmp.path().join("agents/c2/out").display());
    let mut agent = Command::new(drover_tests::bin("drover-agent"))
        .args(["run", "--source", &f.channel("edge", "prod"), "--plain-http", "--trust-key", &f.pubkey()])
        .args(["--expect-cluster-type", "edge", "--expect-environment", "prod", "--target", &target])
        .args(["--state-dir", state.to_str().unwrap(), "--listen", &listen, "--interval", "1s", "--cluster-name", "c2"])
        .args(["--report-to", &format!("{}/fleet/drover-reports", stalled.addr)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.path().join("c2.log")).unwrap())
        .spawn()
        .unwrap();
    let applied = |seq: u64| {
        http_get(&listen, "/status").and_then(|(_, b)| serde_json::from_str::<Value>(&b).ok()).is_some_and(|s| s["appliedSequence"] == seq)
    };
    wait_until(60, "the first apply", || applied(1));
    wait_until(60, "a report push to hang on the stalled registry", || stalled.open() >= 1);
    let first = stalled.first_accepted();
    f.push("edge", "prod", "prod", 2, &workload("app", "2", None));
    wait_until(60, "the second apply", || applied(2));
    let still_hanging = stalled.still_open(first);
    let code = terminate(&mut agent);
    assert!(still_hanging, "sequence 2 was applied while the first report push still hung:\n{}", std::fs::read_to_string(tmp.path().join("c2.log")).unwrap());
    assert_eq!(code, Some(0));
}

#[test]
fn a_new_leader_keeps_health_since_and_reports_carry_no_content() {
    let (_reg, _tmp, f) = world();
    let mut docs = workload("app", "topsecret-value-4711", None);
    docs.push("apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: app\nstringData:\n  password: hunter2-secret\n".into());
    let d1 = f.push("edge", "prod", "prod-ring0", 1, &docs);
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let (manifest, report) = f.raw_report("edge.c1");
    // The artifact, as any OCI tool sees it.
    assert_eq!(manifest["artifactType"], "application/vnd.drover.report.v1");
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.drover.report.v1+json");
    assert_eq!(manifest["layers"], json!([]));
    for (k, v) in [("schemaVersion", json!(1)), ("clusterName", json!("c1")), ("clusterType", json!("edge")), ("environment", json!("prod"))] {
        assert_eq!(report[k], v, "{report:#}");
    }
    assert_eq!((report["channel"].as_str(), report["appliedDigest"].as_str()), (Some("prod-ring0"), Some(d1.as_str())));
    assert_eq!((report["appliedSequence"].as_u64(), report["health"].as_str()), (Some(1), Some("Healthy")));
    assert_eq!(report["lastAttempt"]["result"], "Applied");
    assert_eq!(report["objects"], json!({"created": 3}), "{report:#}");
    assert!(report["agentVersion"].as_str().is_some_and(|v| !v.is_empty()));
    let text = report.to_string();
    assert!(!text.contains("topsecret-value-4711") && !text.contains("hunter2"), "no object content in a report: {text}");
    let since = report["healthSince"].as_str().expect("healthSince").to_string();

    // A new leader: the same cluster, an empty state directory, a second later. It is the
    // same cluster because it has the cluster's report key (on the dir target the key is
    // the one file a new leader takes over; the kube target keeps it in a Secret:
    // kube_report_key), so it trusts its predecessor's healthSince.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let key = std::fs::read(f.state_dir("c1").join("report-key.pem")).unwrap();
    std::fs::remove_dir_all(f.state_dir("c1")).unwrap();
    std::fs::create_dir_all(f.state_dir("c1")).unwrap();
    std::fs::write(f.state_dir("c1").join("report-key.pem"), key).unwrap();
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let (_, again) = f.raw_report("edge.c1");
    assert!(again["reportedAt"].as_str() > report["reportedAt"].as_str(), "a new report was written: {again:#}");
    assert_eq!(again["healthSince"].as_str(), Some(since.as_str()), "same digest, same health: the soak goes on");

    // A new bundle is a new start.
    f.push("edge", "prod", "prod-ring0", 2, &workload("app", "2", None));
    f.agent_ok("c1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let (_, moved) = f.raw_report("edge.c1");
    assert_eq!(moved["appliedSequence"], 2);
    assert!(moved["healthSince"].as_str() > Some(since.as_str()), "{moved:#}");
}

#[test]
fn forged_and_broken_reports_are_skipped_by_name() {
    let (_reg, tmp, f) = world();
    f.push("edge", "prod", "prod", 1, &workload("app", "1", None));
    f.agent_ok("c1", "edge", "prod", "prod", Target::Dir, &[]);
    f.enroll(&["--cluster", "edge.c1"]);
    // An attacker copies c1's Healthy report to pose as another cluster, and writes a
    // report from the future and a bundle-less artifact into the reports repository.
    let repo = format!("{}/fleet/drover-reports", f.reg);
    drover_tests::tool_ok(
        "skopeo",
        &["copy", "--src-tls-verify=false", "--dest-tls-verify=false", &format!("docker://{repo}:edge.c1"), &format!("docker://{repo}:edge.ghost")],
    );
    let (_, mut future) = f.raw_report("edge.c1");
    future["schemaVersion"] = json!(99);
    future["clusterName"] = json!("bad");
    curl_report(&f.reg, "fleet/drover-reports", "edge.bad", &future);
    let prefix = format!("{}/fleet", f.reg);
    let out = f.drover(&["-o", "json", "fleet", "status", "--registry", &prefix, "--trust-key", &f.pubkey()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let names: Vec<String> = out.json()["clusters"].as_array().unwrap().iter().map(|c| c["clusterName"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["c1"], "only c1 counts");
    let ghost = out.stderr.lines().find(|l| l.contains("edge.ghost")).unwrap_or_else(|| panic!("ghost named: {}", out.stderr));
    assert!(ghost.contains("holds the report of edge.c1"), "{ghost}");
    let bad = out.stderr.lines().find(|l| l.contains("edge.bad")).unwrap_or_else(|| panic!("bad named: {}", out.stderr));
    assert!(bad.contains("schemaVersion 99"), "{bad}");
    // The page says so too.
    let page = tmp.path().join("fleet.html");
    let out = f.drover(&["fleet", "view", "--registry", &prefix, "--trust-key", &f.pubkey(), "--out", page.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("skipped") && html.contains("edge.ghost"), "the page lists skipped reports");
}

#[test]
fn export_carries_the_reports_out_and_the_page_is_drawn_offline() {
    let (mut reg, tmp, f) = world();
    f.push("edge", "prod", "prod", 1, &workload("app", "1", None));
    f.push("cloud", "prod", "prod", 1, &workload("app", "1", None));
    f.agent_ok("e1", "edge", "prod", "prod", Target::Dir, &[]);
    f.agent_ok("k1", "cloud", "prod", "prod", Target::Dir, &[]);
    f.enroll(&["--all-pending"]);
    let live = f.status();
    assert!(live["clusters"].as_array().unwrap().iter().all(|c| c["untrusted"].is_null()), "both count: {live:#}");
    let archive = tmp.path().join("reports.tar");
    let repo = format!("{}/fleet/drover-reports", f.reg);
    let out = f.drover(&["-o", "json", "export", &repo, "--out", archive.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("no signature"), "reports are not bundles: no signature warning: {}", out.stderr);
    let exported: Vec<String> = out.json()["bundles"].as_array().unwrap().iter().map(|b| b["refName"].as_str().unwrap().to_string()).collect();
    assert_eq!(exported, ["fleet/drover-reports:cloud.k1", "fleet/drover-reports:drover-roster", "fleet/drover-reports:edge.e1"], "the roster travels with the reports");
    reg.stop();
    // Offline: the archive alone.
    let src = format!("oci-archive:{}", archive.display());
    let out = drover_tests::run("drover", &["-o", "json", "fleet", "status", "--reports", &src, "--stale", "1h", "--trust-key", &f.pubkey()], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The same rows (how long each has been Healthy aside: that grows while we read).
    let without_reason = |v: &serde_json::Value| {
        let mut v = v.clone();
        v.as_array_mut().unwrap().iter_mut().for_each(|c| drop(c.as_object_mut().unwrap().remove("reason")));
        v
    };
    assert_eq!(without_reason(&out.json()["clusters"]), without_reason(&live["clusters"]), "the archive says what the registry said");
    let page = tmp.path().join("offline.html");
    let out = drover_tests::run("drover", &["fleet", "view", "--reports", &src, "--trust-key", &f.pubkey(), "--out", page.to_str().unwrap()], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("data-cluster=\"edge.e1\"") && html.contains("data-cluster=\"cloud.k1\""), "{html}");
    assert!(!html.contains("data-untrusted=\"true\""), "the roster came along: every report counts");

    // Imported into another registry (the central side keeps a copy): the roster is
    // verified with the release key and carried, the reports as they are.
    let central = Registry::start();
    let out = drover_tests::run(
        "drover",
        &["-o", "json", "import", archive.to_str().unwrap(), "--to", &central.addr, "--trust-key", &f.pubkey(), "--plain-http"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reports = format!("{}/fleet/drover-reports", central.addr);
    let out = drover_tests::run("drover", &["-o", "json", "fleet", "status", "--reports", &reports, "--stale", "1h", "--trust-key", &f.pubkey(), "--plain-http"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let imported: Vec<Value> = out.json()["clusters"].as_array().unwrap().clone();
    assert_eq!(imported.len(), 2);
    assert!(imported.iter().all(|c| c["untrusted"].is_null()), "{imported:#?}");
}

/// Requests the proxy saw for the reports repository `fleet/drover-reports`.
fn report_requests(proxy: &RecordingProxy) -> Vec<String> {
    proxy.lines().into_iter().filter(|l| l.contains(" /v2/fleet/drover-reports/")).collect()
}

#[test]
fn a_report_write_is_three_requests_with_no_blob_head() {
    let (reg, _tmp, f) = world();
    f.push("edge", "prod", "prod", 1, &workload("app", "1", None));
    let proxy = RecordingProxy::start(&reg.addr);
    let to = format!("{}/fleet/drover-reports", proxy.addr);
    f.agent_ok("c1", "edge", "prod", "prod", Target::Dir, &["--report-to", &to]);
    // The first write of a process reads its predecessor's report (healthSince), then
    // uploads the config blob and tags the manifest. A report's config is new on every
    // write (reportedAt), so asking whether the registry has it first is a wasted request
    // — 10,000 clusters pay it every heartbeat (docs/fleet.md "Numbers").
    let seen = report_requests(&proxy);
    let methods: Vec<&str> = seen.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(methods, ["GET", "POST", "PUT", "PUT"], "{seen:#?}");
    assert!(seen[0].contains("/manifests/edge.c1 ") && seen[3].contains("/manifests/edge.c1 "), "{seen:#?}");
    let (_, report) = f.raw_report("edge.c1");
    assert_eq!(report["clusterName"], "c1", "the report was written: {report:#}");
    // What signing costs a write: no request, the two annotations' bytes in the manifest
    // (docs/fleet.md "Numbers").
    let (bytes, _) = drover_tests::rawreg::manifest(&reg.addr, "fleet/drover-reports", "edge.c1").unwrap();
    let mut unsigned: Value = serde_json::from_slice(&bytes).unwrap();
    let annotations = unsigned["annotations"].as_object_mut().unwrap();
    assert!(annotations.remove("dev.drover.report.key").is_some() && annotations.remove("dev.drover.report.signature").is_some(), "signed");
    let config = serde_json::to_vec(&report).unwrap().len();
    let unsigned_len = serde_json::to_vec(&unsigned).unwrap().len();
    eprintln!("report write: config {config} B, manifest {} B signed ({} B without the signature annotations)", bytes.len(), unsigned_len);
    assert!(bytes.len() - unsigned_len < 400, "a signature costs a few hundred bytes");
}

#[test]
fn refused_report_writes_back_off_instead_of_retrying_every_poll() {
    let (_reg, tmp, f) = world();
    f.push("edge", "prod", "prod", 1, &workload("app", "1", None));
    // The reports registry wants a login and the agent's report token is wrong (expired,
    // revoked): every write is refused. Its operator sees the requests through a proxy.
    let reports = Registry::start_with(RegistrySetup::default().user("pusher", "right"));
    let proxy = RecordingProxy::start(&reports.addr);
    let auth = base64::engine::general_purpose::STANDARD.encode("pusher:expired");
    let docker_config = tmp.path().join("report-credentials.json");
    std::fs::write(&docker_config, json!({"auths": {proxy.addr.clone(): {"auth": auth}}}).to_string()).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let log = tmp.path().join("c1.log");
    let mut agent = Command::new(drover_tests::bin("drover-agent"))
        .args(["run", "--source", &f.channel("edge", "prod"), "--plain-http", "--trust-key", &f.pubkey()])
        .args(["--expect-cluster-type", "edge", "--expect-environment", "prod"])
        .args(["--target", &format!("dir:{}", tmp.path().join("agents/c1/out").display())])
        .args(["--state-dir", f.state_dir("c1").to_str().unwrap(), "--listen", &listen, "--interval", "1s", "--cluster-name", "c1"])
        .args(["--report-to", &format!("{}/fleet/drover-reports", proxy.addr), "--report-docker-config", docker_config.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let polls = || -> u64 {
        let metrics = http_get(&listen, "/metrics").map(|(_, b)| b).unwrap_or_default();
        metrics.lines().filter(|l| l.starts_with("drover_polls_total{")).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum::<f64>() as u64
    };
    wait_until(120, "20 polls", || polls() >= 20);
    let n = polls();
    let seen = report_requests(&proxy);
    let code = terminate(&mut agent);
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, Some(0), "{log}");
    let refused = log.matches("report not written").count();
    assert!(refused >= 1, "the refused write is logged: {log}");
    // One refused write per poll would be a request storm from the whole fleet on a
    // registry that is already failing; the next try waits 30 s, then longer.
    assert!(refused <= 3, "{refused} refused writes in {n} polls: retried on every poll\n{log}");
    assert!(seen.len() < n as usize, "{} requests to the reports repository in {n} polls: {seen:#?}", seen.len());
    assert!(log.contains("retried in 30s"), "the log says when it tries again: {log}");
}
