//! What `deploy/` and the docs ship is valid as its consumers read it: every YAML file
//! parses (all documents), the CI examples validate against the real GitHub Actions and
//! Azure Pipelines schemas (`check-jsonschema`, as their editors and linters do) and call
//! `drover` only with subcommands and flags the built binary has, and no tracked file
//! points outside the repository for its design.

use drover_tests::{bin, Out};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

/// Every file under `dir` (recursively) whose name ends with one of `exts`, sorted.
fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if exts.iter().any(|x| p.to_string_lossy().ends_with(x)) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The documents of a YAML file, or the parser's error (with line and column).
fn yaml_documents(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    serde_yaml_ng::Deserializer::from_str(&text).map(|doc| Value::deserialize(doc).map_err(|e| e.to_string())).collect()
}

fn tool(cmd: &str, args: &[&str]) -> Out {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} must be installed (tests/run.sh installs it: pip install check-jsonschema): {e}"))
        .into()
}

#[test]
fn every_yaml_file_under_deploy_parses() {
    let found = files(&repo().join("deploy"), &[".yaml", ".yml"]);
    assert!(found.len() >= 10, "deploy/ has the Kubernetes manifests and two CI examples: {found:?}");
    let broken: Vec<String> =
        found.iter().filter_map(|p| yaml_documents(p).err().map(|e| format!("{}: {e}", p.strip_prefix(repo()).unwrap().display()))).collect();
    assert!(broken.is_empty(), "YAML that does not parse:\n{}", broken.join("\n"));
}

#[test]
fn ci_examples_validate_against_their_schemas() {
    let ci = repo().join("deploy/ci");
    for (file, args) in [
        ("github-actions.yml", vec!["--builtin-schema", "vendor.github-workflows"]),
        ("azure-pipelines.yml", vec!["--builtin-schema", "vendor.azure-pipelines", "--regex-variant", "python"]),
    ] {
        let path = ci.join(file);
        let mut all = args.clone();
        all.push(path.to_str().unwrap());
        let out = tool("check-jsonschema", &all);
        assert_eq!(out.code, 0, "deploy/ci/{file} does not validate:\n{}\n{}", out.stdout, out.stderr);
    }
}

/// Every shell line of the CI examples (`run:` in GitHub Actions, `script:` in Azure).
fn ci_shell_lines(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                match (k.as_str(), v.as_str()) {
                    (Some("run" | "script"), Some(script)) => out.extend(script.lines().map(str::to_string)),
                    _ => ci_shell_lines(v, out),
                }
            }
        }
        Value::Sequence(s) => s.iter().for_each(|v| ci_shell_lines(v, out)),
        _ => {}
    }
}

/// (subcommand, flags) of every `drover SUB ...` call in a shell line.
fn drover_calls(line: &str) -> Vec<(String, Vec<String>)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut calls = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if *w != "drover" || i + 1 >= words.len() {
            continue;
        }
        let flags = words[i + 2..]
            .iter()
            .take_while(|w| !matches!(**w, "|" | ";" | "&&" | "||" | ">" | "2>&1"))
            .filter(|w| w.starts_with('-'))
            .map(|w| w.split('=').next().unwrap().to_string())
            .collect();
        calls.push((words[i + 1].to_string(), flags));
    }
    calls
}

#[test]
fn ci_examples_call_drover_with_flags_it_has() {
    let mut checked = 0;
    for path in files(&repo().join("deploy/ci"), &[".yml", ".yaml"]) {
        let mut lines = Vec::new();
        for doc in yaml_documents(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
            ci_shell_lines(&doc, &mut lines);
        }
        for line in &lines {
            for (sub, flags) in drover_calls(line) {
                let help = Command::new(bin("drover")).args([sub.as_str(), "--help"]).output().expect("drover --help");
                let help: Out = help.into();
                assert_eq!(help.code, 0, "{}: `drover {sub}` is not a drover command:\n{line}\n{}", path.display(), help.stderr);
                for flag in flags {
                    let known = help.stdout.lines().any(|l| l.trim_start().split([',', ' ']).any(|w| w == flag));
                    assert!(known, "{}: `drover {sub}` has no flag {flag}:\n  {}\n`drover {sub} --help`:\n{}", path.display(), line.trim(), help.stdout);
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "the CI examples publish, promote and export: {checked} drover calls found");
}

#[test]
fn no_tracked_file_points_outside_the_repository() {
    // Built from pieces so that this file does not match itself.
    let needles = [["..", "/shared"].concat(), ["DESIGN", " §"].concat(), ["DESIGN", ".md"].concat()];
    let listed = Command::new("git").arg("-C").arg(repo()).args(["ls-files", "-z"]).output().expect("git ls-files");
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    let mut hits = Vec::new();
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let Ok(text) = std::fs::read(repo().join(&name)) else { continue };
        let text = String::from_utf8_lossy(&text);
        for (i, line) in text.lines().enumerate() {
            for n in &needles {
                if line.contains(n.as_str()) {
                    hits.push(format!("{name}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "the design the code cites is docs/design.md (cite it as \"docs/design.md §N\"); these lines point elsewhere:\n{}",
        hits.join("\n")
    );
    let design = std::fs::read_to_string(repo().join("docs/design.md")).expect("docs/design.md exists");
    for n in 1..=9 {
        assert!(design.contains(&format!("\n## {n}. ")), "docs/design.md keeps section §{n}");
    }
}
