//! The agent's own surfaces as an operator reads them (issue 33): `drover-agent history`
//! is a table whose columns line up whatever the values (sequences are Unix seconds) and
//! that says how much drift each resync found; `drover-agent run --help` shows every
//! default. Real binaries, real registry, the dir target.

mod agent_support;

use agent_support::{cm, objs, Fx};
use drover_tests::run;

/// The start of each column of `header` (a run of two spaces separates columns).
fn column_starts(header: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    let b = header.as_bytes();
    while i < b.len() {
        if b[i] != b' ' && (i == 0 || (i >= 2 && &header[i - 2..i] == "  ")) {
            let end = header[i..].find("  ").map(|e| i + e).unwrap_or(header.len());
            out.push((header[i..end].to_string(), i));
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn history_lines_up_and_shows_the_drift_of_each_resync() {
    let fx = Fx::new();
    // A sequence as `drover publish` makes them: Unix seconds.
    let digest = fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1_795_812_250, Some("k1"), &[]);
    assert_eq!(fx.once(&["--resync", "0s"]).code, 0);
    // By hand: a value changed; the next resync puts it back.
    let file = fx.target().join("manifests/app/ConfigMap.core.a.yaml");
    let edited = std::fs::read_to_string(&file).unwrap().replace("\"1\"", "\"by hand\"");
    std::fs::write(&file, edited).unwrap();
    assert_eq!(fx.once(&["--resync", "0s"]).code, 0);
    // A refusal (an untrusted key): a long reason at the end of its line.
    fx.push(&objs(&[cm("app", "a", "2")]), 1_795_812_251, Some("k2"), &[]);
    assert_eq!(fx.once(&["--resync", "0s"]).code, 1);

    let out = run("drover-agent", &["history", "--endpoint", "http://127.0.0.1:9", "--state-dir", &fx.state()], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let columns = column_starts(lines[0]);
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["AT", "RESULT", "SEQUENCE", "DIGEST", "OBJECTS", "DRIFT", "REASON"], "{}", out.stdout);
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    for line in &lines[1..] {
        for (name, start) in &columns {
            if *start >= line.len() {
                assert_eq!(name, "REASON", "only the last column may be empty: {line:?}");
                continue;
            }
            let at = &line[*start..];
            assert!(
                !at.starts_with(' ') && (*start == 0 || line.as_bytes()[start - 1] == b' '),
                "column {name} of {line:?} does not start at {start}:\n{}",
                out.stdout
            );
        }
    }
    let cell = |line: &str, name: &str| {
        let i = columns.iter().position(|(n, _)| n == name).unwrap();
        let start = columns[i].1;
        let end = columns.get(i + 1).map(|c| c.1).unwrap_or(line.len()).min(line.len());
        line.get(start..end).unwrap_or_default().trim().to_string()
    };
    // Newest first: the refusal, the resync that corrected one object, the apply.
    // (refused at its signatures, before its config was read: no sequence known)
    assert_eq!((cell(lines[1], "RESULT"), cell(lines[1], "SEQUENCE")), ("Rejected".into(), "-".into()));
    assert_eq!(cell(lines[2], "SEQUENCE"), "1795812250");
    assert_eq!(cell(lines[2], "DRIFT"), "1", "the resync corrected one object:\n{}", out.stdout);
    assert_eq!((cell(lines[3], "RESULT"), cell(lines[3], "DRIFT")), ("Applied".into(), "-".into()));
    assert!(digest.starts_with(&cell(lines[3], "DIGEST")), "{}", out.stdout);
}

#[test]
fn run_help_shows_every_default() {
    let out = run("drover-agent", &["run", "--help"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let help = out.stdout.replace('\n', " ");
    for (flag, default) in [
        ("--interval", "30s"),
        ("--resync", "10m"),
        ("--health-timeout", "2m"),
        ("--api-timeout", "30s"),
        ("--threshold", "1"),
        ("--max-prune-ratio", "0.5"),
        ("--report-interval", "5m"),
        ("--lease-duration", "15s"),
    ] {
        let at = help.find(&format!("{flag} <")).unwrap_or_else(|| panic!("{flag} in:\n{}", out.stdout));
        let next = help[at + 2..].find("    --").map(|n| at + 2 + n).unwrap_or(help.len());
        assert!(help[at..next].contains(&format!("[default: {default}]")), "{flag} shows its default {default}:\n{}", &help[at..next]);
    }
}

#[test]
fn reconcile_makes_a_running_agent_with_a_one_hour_interval_apply_a_new_bundle_now() {
    use agent_support::{live_status, terminate, wait_until};
    let fx = Fx::new();
    let v1 = fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1h"]);
    wait_until(60, "v1 applied by the first poll", || agent_support::http_get(&listen, "/status").is_some() && live_status(&listen)["appliedDigest"] == v1.as_str());
    let v2 = fx.push(&objs(&[cm("app", "a", "2")]), 2, Some("k1"), &[]);

    let state = fx.state();
    let reconcile = |extra: &[&str]| {
        let mut args = vec!["reconcile", "--state-dir", state.as_str()];
        args.extend_from_slice(extra);
        let started = std::time::Instant::now();
        (run("drover-agent", &args, &[]), started.elapsed())
    };
    let (out, took) = reconcile(&["-o", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(took < std::time::Duration::from_secs(30), "within seconds, not the hour: {took:?}");
    let j = out.json();
    assert_eq!(j["result"], "Applied", "{j:#}");
    assert_eq!(j["appliedDigest"], v2.as_str(), "{j:#}");
    assert_eq!(live_status(&listen)["appliedDigest"], v2.as_str());
    let file = std::fs::read_to_string(fx.target().join("manifests/app/ConfigMap.core.a.yaml")).unwrap();
    assert!(file.contains("\"2\""), "{file}");

    // The port does not carry the command: only the local channel (the socket in the
    // state directory, the agent's user alone) does.
    let code = std::process::Command::new("curl").args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", &format!("http://{listen}/reconcile")]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&code.stdout), "404", "POST /reconcile on the port");

    // Again: nothing new on the channel.
    let (out, _) = reconcile(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Unchanged") && out.stdout.contains(&v2), "{}", out.stdout);

    // A bundle the agent refuses: the refusal and its reason, exit 1.
    fx.push(&objs(&[cm("app", "a", "3")]), 3, Some("k2"), &[]);
    let (out, _) = reconcile(&[]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("Rejected") && out.stdout.contains("reason:"), "{}", out.stdout);

    // The source selection names what the agent polls.
    let (out, _) = reconcile(&["--source", "127.0.0.1:1/other:prod"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("this agent polls"), "{}", out.stderr);
    assert_eq!(terminate(&mut agent), Some(0));

    // No agent running: said so.
    let (out, _) = reconcile(&[]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no agent answers"), "{}", out.stderr);
}

#[test]
fn status_shows_the_fleet_report_write_and_key() {
    use agent_support::{terminate, wait_until};
    use base64::Engine as _;
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1h", "--cluster-name", "weu-1"]);
    let state = fx.state();
    let status = || {
        let out = run("drover-agent", &["status", "-o", "json", "--state-dir", &state], &[]);
        if out.code == 0 { out.json() } else { serde_json::Value::Null }
    };
    // Ask only once it serves: `status` of a state directory no agent answers for reads
    // its database, and an agent starting meanwhile finds the database locked.
    wait_until(60, "the agent serving", || agent_support::http_get(&listen, "/status").is_some());
    wait_until(60, "the report written", || status()["report"]["result"] == "written");
    let st = status();
    let report = &st["report"];
    assert!(report["to"].as_str().unwrap().ends_with("/fleet/drover-reports:edge.weu-1"), "{st:#}");
    assert!(report["lastWrite"].is_string() && report.get("error").is_none(), "{st:#}");
    // The key fingerprint is the one the written report carries (read with skopeo).
    let manifest: serde_json::Value = serde_json::from_str(&drover_tests::tool_ok(
        "skopeo",
        &["inspect", "--raw", "--tls-verify=false", &format!("docker://{}/fleet/drover-reports:edge.weu-1", fx.reg.addr)],
    ))
    .unwrap();
    let spki = base64::engine::general_purpose::STANDARD.decode(manifest["annotations"]["dev.drover.report.key"].as_str().unwrap()).unwrap();
    assert_eq!(report["keyFingerprint"].as_str(), Some(drover_tests::rawreg::digest(&spki).trim_start_matches("sha256:")), "{st:#}");
    let text = run("drover-agent", &["status", "--state-dir", &state], &[]).stdout;
    assert!(text.contains("report:        written, last written") && text.contains(report["keyFingerprint"].as_str().unwrap()), "{text}");
    assert_eq!(terminate(&mut agent), Some(0));

    // Reports that cannot be written: the failure and why.
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1h", "--cluster-name", "weu-1", "--report-to", "127.0.0.1:1/fleet/drover-reports"]);
    wait_until(60, "the agent serving", || agent_support::http_get(&listen, "/status").is_some());
    wait_until(60, "the failed write shown", || status()["report"]["result"] == "failed");
    let st = status();
    assert!(st["report"]["error"].as_str().unwrap().contains("127.0.0.1:1"), "{st:#}");
    let text = run("drover-agent", &["status", "--state-dir", &state], &[]).stdout;
    assert!(text.contains("report:        failed") && text.contains("report error:"), "{text}");
    assert_eq!(terminate(&mut agent), Some(0));
}
