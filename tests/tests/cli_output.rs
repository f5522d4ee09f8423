//! The CLI speaks one language (issue 17, items 1 and 7): every command of both binaries
//! ends quietly when its reader goes away (`drover inspect REF | head -1`), and every
//! `-o json` document has camelCase field names, each once.

mod cli_support;

use cli_support::{key_problems, run_closed_stdout, World, ENV};
use drover_tests::run;

#[test]
fn every_command_ends_quietly_on_a_closed_pipe() {
    let w = World::new();
    let mut failures = Vec::new();
    for (i, format) in ["table", "json"].iter().enumerate() {
        for (bin, mut args, code) in w.commands(i) {
            args.extend(["-o".to_string(), format.to_string()]);
            let out = run_closed_stdout(bin, &args, ENV);
            if out.code != code || out.stderr.contains("panicked") || out.stderr.contains("Broken pipe") {
                failures.push(format!("{bin} {}: exit {} (want {code}):\n{}", args.join(" "), out.code, out.stderr));
            }
        }
    }
    for (bin, sub) in [("drover", "inspect"), ("drover", "publish"), ("drover-agent", "run"), ("drover-agent", "status")] {
        let out = run_closed_stdout(bin, &[sub.to_string(), "--help".to_string()], &[]);
        if out.code != 0 || out.stderr.contains("panicked") {
            failures.push(format!("{bin} {sub} --help: exit {}:\n{}", out.code, out.stderr));
        }
    }
    assert!(failures.is_empty(), "commands that did not end quietly on a closed stdout:\n{}", failures.join("\n"));
}

#[test]
fn every_json_output_has_camel_case_keys_once() {
    let w = World::new();
    let mut failures = Vec::new();
    for (bin, mut args, code) in w.commands(0) {
        args.extend(["-o".to_string(), "json".to_string()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(bin, &refs, ENV);
        if out.code != code {
            failures.push(format!("{bin} {}: exit {} (want {code}): {}", args.join(" "), out.code, out.stderr));
            continue;
        }
        for p in key_problems(&out.stdout) {
            failures.push(format!("{bin} {}: {p}", args[0]));
        }
    }
    assert!(failures.is_empty(), "JSON output problems:\n{}", failures.join("\n"));
}

#[test]
fn key_checker_finds_duplicates_and_snake_case() {
    // The checker itself: what serde_json::Value would silently merge.
    let p = key_problems(r#"{"digest": "a", "ok": {"signed_by": 1, "annotations": {"a_b": 1}}, "digest": "b"}"#);
    assert_eq!(p, vec!["$.ok.signed_by: not camelCase".to_string(), "$.digest: given twice".to_string()]);
}

/// `--help` of every command speaks one vocabulary: `--key` is a private signing key,
/// `--trust-key` a trusted public key, `--env` an environment (`--environment` only as
/// its alias), `-o/--output` everywhere a result is printed.
#[test]
fn help_speaks_one_vocabulary() {
    let commands: Vec<(&str, Vec<&str>)> = [
        "keygen", "render", "build", "push", "publish", "releases", "sign", "verify", "inspect", "pull", "diff", "promote", "rollback",
        "export", "import",
    ]
    .iter()
    .map(|c| ("drover", vec![*c]))
    .chain([("drover", vec!["fleet", "status"]), ("drover", vec!["fleet", "wait"]), ("drover", vec!["fleet", "view"]), ("drover", vec!["fleet", "enroll"])])
    .chain(["run", "status", "history", "plan", "hold", "release"].map(|c| ("drover-agent", vec![c])))
    .collect();
    let mut problems = Vec::new();
    for (bin, sub) in &commands {
        let mut args = sub.clone();
        args.push("--help");
        let help = drover_tests::run_ok(bin, &args, &[]).stdout;
        // Each option: its first line (flag names) and its description up to the next option.
        let mut options: Vec<(String, String)> = Vec::new();
        for line in help.lines() {
            let t = line.trim_start();
            if t.starts_with('-') && line.len() - t.len() <= 6 {
                options.push((t.split("  ").next().unwrap_or(t).to_string(), t.to_string()));
            } else if let Some(last) = options.last_mut() {
                last.1.push(' ');
                last.1.push_str(t);
            }
        }
        let name = format!("{bin} {}", sub.join(" "));
        for (flags, text) in &options {
            let text = text.to_lowercase();
            if flags.starts_with("--key ") && !text.contains("private") {
                problems.push(format!("{name}: --key is not described as a private key: {text}"));
            }
            if flags.starts_with("--trust-key") && !(text.contains("public") || text.contains("trusted")) {
                problems.push(format!("{name}: --trust-key is not described as a trusted public key: {text}"));
            }
            if flags.starts_with("--environment") {
                problems.push(format!("{name}: --environment is a flag of its own; it must be an alias of --env"));
            }
            for word in ["--public-key", "--pubkey", "--pub-key", "--signing-key", "--output-format", "--format "] {
                if flags.contains(word) {
                    problems.push(format!("{name}: {word} is not in the vocabulary"));
                }
            }
            if flags.starts_with("--env ") && !text.contains("--environment") {
                problems.push(format!("{name}: --env does not accept --environment: {text}"));
            }
        }
        let prints = !(*bin == "drover-agent" && sub[0] == "run");
        if prints && !options.iter().any(|(f, _)| f.starts_with("-o, --output")) {
            problems.push(format!("{name}: no -o/--output"));
        }
    }
    assert!(problems.is_empty(), "--help vocabulary:\n{}", problems.join("\n"));
}
