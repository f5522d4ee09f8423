//! Error messages and logs suggest only flags the printing command accepts (issue 33:
//! `drover render` said "pass --cluster-scoped-kind ConfigMap", which `render` rejects).
//!
//! The flags each command accepts come from the binaries as a user sees them (`drover
//! <command> --help`, `drover-agent <command> --help`). The messages come from the source:
//! every string literal of `bundler/src`, `proto/src` and `agent/src` outside tests,
//! comments and clap attributes. Two rules:
//! - a command quoted in backquotes (`` `drover sign REF --key KEY` ``) names its command:
//!   every flag in it must be one that command accepts;
//! - any other flag (a bare `--plain-http`) is the printing command's own: every command
//!   that prints the file's messages ([`printers`]) must accept it.
//!
//! The follow-the-advice half is end to end: `drover render` of an object without a
//! namespace names `spec.clusterScopedKinds`, and doing what it says makes render pass.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use drover_tests::{run, write_files};

/// Command path (`drover fleet wait`) → the long flags its `--help` lists.
type Commands = BTreeMap<String, BTreeSet<String>>;

/// The option flags of a `--help` text (only where options are defined, not in prose).
fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = if t.starts_with('-') && t.as_bytes().get(2) == Some(&b',') { t[3..].trim_start() } else { t };
            let flag = t.strip_prefix("--")?;
            let name: String = flag.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            (!name.is_empty()).then(|| format!("--{name}"))
        })
        .collect()
}

/// The subcommands a `--help` text lists (without `help`).
fn help_commands(help: &str) -> Vec<String> {
    let Some(rest) = help.split("\nCommands:\n").nth(1) else { return Vec::new() };
    rest.lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Every command of `bin` with its flags, from `--help` (recursively).
fn commands(bin: &str, into: &mut Commands) {
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = run(bin, &args, &[]);
        assert_eq!(out.code, 0, "{bin} {args:?}: {}", out.stderr);
        let name = std::iter::once(bin.to_string()).chain(path.iter().cloned()).collect::<Vec<_>>().join(" ");
        into.insert(name, help_flags(&out.stdout));
        for c in help_commands(&out.stdout) {
            let mut p = path.clone();
            p.push(c);
            todo.push(p);
        }
    }
}

/// The commands that print the messages of source file `file` (relative to the
/// repository), `None` when nobody said. Shared files name their printers here.
fn printers(file: &str, cmds: &Commands) -> Option<Vec<String>> {
    let accepting = |flag: &str| -> Vec<String> { cmds.iter().filter(|(_, f)| f.contains(flag)).map(|(c, _)| c.clone()).collect() };
    let named = |names: &[&str]| -> Vec<String> { names.iter().map(|s| s.to_string()).collect() };
    // The commands that read fleet reports by publish prefix (`--registry PREFIX`).
    let reports_by_prefix = || -> Vec<String> { accepting("--reports").into_iter().filter(|c| cmds[c].contains("--registry")).collect() };
    let stem = Path::new(file).file_stem()?.to_str()?.to_string();
    Some(match file {
        // Shared code of drover, by who uses it.
        "bundler/src/input.rs" => named(&["drover build", "drover push", "drover diff"]),
        "bundler/src/output.rs" => accepting("--strict"),
        "bundler/src/regargs.rs" => accepting("--credentials-for"),
        "bundler/src/trustargs.rs" => accepting("--threshold").into_iter().filter(|c| c.starts_with("drover ")).collect(),
        "bundler/src/cmd/fleet/args.rs" | "bundler/src/fleet/gate.rs" => accepting("--require-healthy"),
        "bundler/src/fleet/mod.rs" => reports_by_prefix(),
        "bundler/src/fleet/enroll.rs" => named(&["drover fleet enroll"]),
        // The promotion gate between environments.
        "bundler/src/release.rs" => named(&["drover publish"]),
        f if f.starts_with("bundler/src/platform/") => named(&["drover render", "drover publish"]),
        f if f.starts_with("bundler/src/cmd/fleet/") => vec![format!("drover fleet {stem}")],
        // A command's own file, or its directory (`cmd/inspect/bundle.rs`: `drover inspect`).
        f if f.starts_with("bundler/src/cmd/") => {
            let first = f.trim_start_matches("bundler/src/cmd/").split('/').next()?.trim_end_matches(".rs");
            vec![format!("drover {first}")]
        }
        // proto: the registry transport reaches every command of both binaries that
        // reaches a registry; the trust policy every command that takes trusted keys.
        f if f.starts_with("proto/src/registry") || f == "proto/src/auth.rs" => accepting("--plain-http"),
        "proto/src/trust.rs" => accepting("--trust-key"),
        "proto/src/channel/import.rs" => named(&["drover import"]),
        "proto/src/report/mod.rs" => reports_by_prefix(),
        "proto/src/channel/sign.rs" => named(&["drover sign"]),
        // Only `drover push` gives an exact sequence.
        "proto/src/channel/publish.rs" => named(&["drover push"]),
        // The agent: the pipeline prints in `run` and `plan`; the rest by command.
        "agent/src/query.rs" => named(&["drover-agent status", "drover-agent history"]),
        "agent/src/reconcile.rs" => named(&["drover-agent reconcile"]),
        // `release` prints only the state-directory errors, and accepts --state-dir too.
        "agent/src/hold.rs" => named(&["drover-agent hold"]),
        f if f.starts_with("agent/src/") => named(&["drover-agent run", "drover-agent plan"]),
        _ => return None,
    })
}

/// String literals of Rust source `src` outside comments, `#[cfg(test)]` items and clap
/// attributes (`#[arg(...)]`, `#[command(...)]`, `#[value(...)]`): (line, text).
fn literals(src: &str) -> Vec<(usize, String)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let line_at = |i: usize| src[..i].bytes().filter(|&c| c == b'\n').count() + 1;
    // Skips a balanced `open`..`close` region starting at `i` (string-aware); returns the end.
    fn skip_balanced(b: &[u8], mut i: usize, open: u8, close: u8) -> usize {
        let mut depth = 0;
        while i < b.len() {
            match b[i] {
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b'"' => i = read_string(b, i).0 - 1,
                _ => {}
            }
            i += 1;
        }
        i
    }
    // Reads a normal string literal starting at the quote `i`: (end, text).
    fn read_string(b: &[u8], mut i: usize) -> (usize, String) {
        let mut text = Vec::new();
        i += 1;
        while i < b.len() && b[i] != b'"' {
            if b[i] == b'\\' && i + 1 < b.len() {
                match b[i + 1] {
                    b'\n' => {
                        i += 2;
                        while i < b.len() && (b[i] as char).is_whitespace() {
                            i += 1;
                        }
                        continue;
                    }
                    b'n' => text.push(b'\n'),
                    c => text.push(c),
                }
                i += 2;
                continue;
            }
            text.push(b[i]);
            i += 1;
        }
        (i + 1, String::from_utf8_lossy(&text).into_owned())
    }
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map(|e| e + 2).unwrap_or(rest.len());
        } else if rest.starts_with("#[cfg(test)]") {
            // The item after it: up to its closing brace, or a `;` before any brace.
            let after = i + "#[cfg(test)]".len();
            let brace = src[after..].find('{').map(|p| after + p);
            let semi = src[after..].find(';').map(|p| after + p);
            i = match (brace, semi) {
                (Some(br), Some(s)) if s < br => s + 1,
                (Some(br), _) => skip_balanced(b, br, b'{', b'}'),
                _ => b.len(),
            };
        } else if rest.starts_with("#[arg(") || rest.starts_with("#[command(") || rest.starts_with("#[value(") {
            i = skip_balanced(b, i + 1, b'[', b']');
        } else if b[i] == b'\'' {
            // A char literal ('"', '\'', 'x') or a lifetime.
            i += if let Some(escaped) = rest.strip_prefix("'\\") {
                escaped.find('\'').map(|p| p + 3).unwrap_or(1)
            } else if rest.len() > 2 && rest[1..].chars().nth(1) == Some('\'') {
                1 + rest[1..].chars().next().unwrap().len_utf8() + 1
            } else {
                1
            };
        } else if (b[i] == b'r' || rest.starts_with("br")) && (i == 0 || !(b[i - 1] as char).is_alphanumeric() && b[i - 1] != b'_') {
            let start = if b[i] == b'b' { i + 2 } else { i + 1 };
            let hashes = src[start..].bytes().take_while(|&c| c == b'#').count();
            if src.as_bytes().get(start + hashes) == Some(&b'"') {
                let body = start + hashes + 1;
                let end_pat = format!("\"{}", "#".repeat(hashes));
                let end = src[body..].find(&end_pat).map(|p| body + p).unwrap_or(b.len());
                out.push((line_at(i), src[body..end].to_string()));
                i = end + end_pat.len();
            } else {
                i += 1;
            }
        } else if b[i] == b'"' {
            let (end, text) = read_string(b, i);
            out.push((line_at(i), text));
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The long flags mentioned in `text` (`--name`, a letter first).
fn flags_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(p) = rest.find("--") {
        let after = &rest[p + 2..];
        let before_ok = p == 0 || !rest[..p].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '-');
        let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        if before_ok && after.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.push(format!("--{}", name.trim_end_matches('-')));
        }
        rest = &after[name.len()..];
    }
    out
}

/// One problem found in the sources.
fn check_literal(file: &str, line: usize, text: &str, cmds: &Commands, problems: &mut Vec<String>) {
    let mut bare = String::new();
    // Backquoted segments alternate with plain text.
    for (n, seg) in text.split('`').enumerate() {
        let quoted = n % 2 == 1 && text.matches('`').count() > n - 1;
        let words: Vec<&str> = seg.split_whitespace().collect();
        let bin = words.first().copied().filter(|w| *w == "drover" || *w == "drover-agent");
        match (quoted, bin) {
            (true, Some(bin)) => {
                let mut name = bin.to_string();
                for w in &words[1..] {
                    let longer = format!("{name} {w}");
                    if cmds.contains_key(&longer) {
                        name = longer;
                    } else {
                        break;
                    }
                }
                let accepted = &cmds[&name];
                for f in flags_in(seg) {
                    if !accepted.contains(&f) {
                        problems.push(format!("{file}:{line}: `{name}` does not accept {f}, yet the message `{seg}` suggests it"));
                    }
                }
            }
            (true, None) => {} // another program's command line (git, kubectl, skopeo)
            (false, _) => {
                bare.push_str(seg);
                bare.push(' ');
            }
        }
    }
    let flags = flags_in(&bare);
    if flags.is_empty() {
        return;
    }
    let Some(who) = printers(file, cmds) else {
        problems.push(format!("{file}:{line}: mentions {flags:?} but tests/tests/cli_messages.rs does not say which commands print its messages: {text:?}"));
        return;
    };
    for f in flags {
        for c in &who {
            if !cmds.get(c).is_some_and(|a| a.contains(&f)) {
                problems.push(format!("{file}:{line}: {c} prints {text:?}, which suggests {f}; {c} does not accept {f}"));
            }
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") && p.file_name().is_some_and(|n| n != "tests.rs") {
            out.push(p);
        }
    }
}

#[test]
fn messages_suggest_only_flags_the_printing_command_accepts() {
    let mut cmds = Commands::new();
    commands("drover", &mut cmds);
    commands("drover-agent", &mut cmds);
    assert!(cmds["drover render"].contains("--out") && cmds["drover-agent run"].contains("--trust-key"), "help parsed: {cmds:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in ["bundler/src", "proto/src", "agent/src"] {
        rust_files(&root.join(krate), &mut files);
    }
    files.sort();
    let mut problems = Vec::new();
    let mut seen = 0;
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        for (line, text) in literals(&std::fs::read_to_string(f).unwrap()) {
            seen += 1;
            check_literal(&rel, line, &text, &cmds, &mut problems);
        }
    }
    assert!(seen > 1000, "the scan read the sources ({seen} literals)");
    assert!(problems.is_empty(), "{} message(s) suggest what their command does not accept:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_scanner_sees_what_it_must() {
    let src = "fn f() {\n    // \"--not-a-message\"\n    let a = \"pass --cluster-scoped-kind {kind}\";\n    let b = '\"';\n    let c = r#\"raw --raw-flag\"#;\n    let d = \"one \\\n        two --two\";\n}\n#[cfg(test)]\nmod tests { const X: &str = \"--in-tests\"; }\n";
    let lits: Vec<String> = literals(src).into_iter().map(|(_, t)| t).collect();
    assert_eq!(lits, ["pass --cluster-scoped-kind {kind}", "raw --raw-flag", "one two --two"]);
    assert_eq!(flags_in("pass --cluster-scoped-kind K, or --x; not a-b--c nor --{flag}"), ["--cluster-scoped-kind", "--x"]);
    let mut cmds = Commands::new();
    cmds.insert("drover".into(), BTreeSet::new());
    cmds.insert("drover render".into(), ["--out".to_string()].into());
    cmds.insert("drover build".into(), ["--cluster-scoped-kind".to_string()].into());
    cmds.insert("drover publish".into(), ["--out".to_string()].into());
    let mut problems = Vec::new();
    check_literal("bundler/src/platform/render.rs", 1, "or pass --cluster-scoped-kind K", &cmds, &mut problems);
    check_literal("bundler/src/platform/render.rs", 2, "see `drover build DIR --cluster-scoped-kind K`", &cmds, &mut problems);
    check_literal("bundler/src/platform/render.rs", 3, "see `drover render --cluster-scoped-kind K`", &cmds, &mut problems);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("drover render prints") && problems[2].contains("`drover render` does not accept"), "{problems:#?}");
}

#[test]
fn render_of_an_object_without_a_namespace_says_what_render_accepts_and_that_works() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("platform");
    write_files(
        &root,
        &[
            ("fleet.yaml", "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev]\n"),
            ("cluster-types/edge.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata: {name: edge}\n"),
            ("environments/dev.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\n"),
            (
                "workloads/gadgets/workload.yaml",
                "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: gadgets\n  selector: {}\n",
            ),
            ("workloads/gadgets/templates/g.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n"),
        ],
    );
    let out_dir = tmp.path().join("out");
    let render = || run("drover", &["render", root.to_str().unwrap(), "--env", "dev", "--out", out_dir.to_str().unwrap()], &[]);
    let out = render();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(!out.stderr.contains("--cluster-scoped-kind"), "render accepts no --cluster-scoped-kind: {}", out.stderr);
    assert!(out.stderr.contains("spec.clusterScopedKinds") && out.stderr.contains("fleet.yaml"), "{}", out.stderr);
    // Doing what it says.
    std::fs::write(root.join("fleet.yaml"), "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev]\n  clusterScopedKinds: [Gadget]\n").unwrap();
    let out = render();
    assert_eq!(out.code, 0, "{}", out.stderr);
}
