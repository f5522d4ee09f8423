//! The agent's link order (agent/link-order.txt, agent/build.rs, docs/agent.md "Memory")
//! does not go stale unnoticed. The list holds patterns of the functions the agent runs,
//! without the build hashes their symbols carry, so it applies to any build of the agent
//! (alone as it ships, or with the workspace); what can still age is the code itself —
//! functions renamed or gone. This holds the list against the agent `tests/run.sh` built:
//! at least 90% of its patterns must still name a function of it (re-run
//! `bench/link-order.sh` when this fails), and no line may be an exact, hashed symbol.

use std::collections::HashSet;
use std::process::Command;

/// A symbol without its build hash (the same rule as bench/link-order.sh).
fn pattern(sym: &str) -> String {
    if let Some(rest) = sym.strip_prefix("_R") {
        let mut out = String::from("_R");
        let mut s = rest;
        while let Some(i) = s.find("Cs") {
            out.push_str(&s[..i + 2]);
            let tail = &s[i + 2..];
            let end = tail.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(tail.len());
            if end > 0 && tail[end..].starts_with('_') {
                out.push('*');
                s = &tail[end..];
            } else {
                s = tail;
            }
        }
        out.push_str(s);
        return out;
    }
    match sym.len().checked_sub(20).map(|i| sym.split_at(i)) {
        Some((head, tail)) if tail.starts_with("17h") && tail.ends_with('E') && tail[3..19].chars().all(|c| c.is_ascii_hexdigit()) => format!("{head}17h*E"),
        _ => sym.to_string(),
    }
}

#[test]
fn the_link_order_still_names_the_agents_functions() {
    let list = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../agent/link-order.txt")).unwrap();
    let listed: Vec<&str> = list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert!(listed.len() > 1000, "{} patterns", listed.len());
    let hashed: Vec<&&str> = listed.iter().filter(|p| pattern(p) != **p).take(3).collect();
    assert!(hashed.is_empty(), "exact symbols in the list (they match one build only): {hashed:?}");

    let agent = drover_tests::bin("drover-agent");
    let out = Command::new("nm").arg("--defined-only").arg(&agent).output().expect("nm (binutils)");
    assert!(out.status.success(), "nm {}: {}", agent.display(), String::from_utf8_lossy(&out.stderr));
    let functions: HashSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && "tTwW".contains(f[1])).then(|| pattern(f[2]))
        })
        .collect();
    assert!(!functions.is_empty(), "{} has no symbol table", agent.display());
    let matched = listed.iter().filter(|p| functions.contains(**p)).count();
    let share = matched * 100 / listed.len();
    assert!(share >= 90, "{matched} of {} link-order patterns name a function of the agent ({share}%): the code moved on; re-run bench/link-order.sh", listed.len());
}

#[test]
fn patterns_drop_build_hashes_only() {
    assert_eq!(pattern("_ZN12drover_agent6window7Windows5parse17hc56353bff8976e44E"), "_ZN12drover_agent6window7Windows5parse17h*E");
    assert_eq!(pattern("_RNvNtNtNtNtCsjrHSEGnQ3l9_3std3sys12thread_local11destructors10linux_like8register"), "_RNvNtNtNtNtCs*_3std3sys12thread_local11destructors10linux_like8register");
    assert_eq!(pattern("aws_lc_0_32_sha256_update"), "aws_lc_0_32_sha256_update");
}
