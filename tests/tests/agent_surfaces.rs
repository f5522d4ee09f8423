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
