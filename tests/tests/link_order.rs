//! The agent's link order (agent/link-order.txt, agent/build.rs, docs/agent.md "Memory")
//! does not go stale unnoticed. The list holds patterns of the functions the agent runs,
//! without what in their symbols depends on the build (v0's crate disambiguators, the crate
//! a generic instance was made in), so it applies to any build of the agent (alone as it
//! ships, or with the workspace); what can still age is the code itself — functions
//! renamed or gone. The rule that turns a symbol into its pattern lives in one place,
//! `bench/link-order.sh`; these tests run it as a maintainer does.

use std::process::Command;

fn script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/link-order.sh")
}

/// The `link-order-check` numbers of `bench/link-order.sh --check` for the agent the suite built.
fn check() -> std::collections::HashMap<String, usize> {
    let agent = drover_tests::bin("drover-agent");
    let out = Command::new(script()).arg("--check").env("AGENT", &agent).output().expect("bench/link-order.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench/link-order.sh --check: {text}{}", String::from_utf8_lossy(&out.stderr));
    let line = text.lines().find_map(|l| l.strip_prefix("link-order-check ")).unwrap_or_else(|| panic!("no numbers in: {text}"));
    line.split(' ').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect()
}

/// At least 90% of the patterns still name a function of the agent the suite built (drop
/// glue aside: a debug build makes other `drop_in_place` instances than the release build
/// the list came from; re-run `bench/link-order.sh` when this fails), and none is a
/// pattern that matches only one
/// build (a hash kept) or every instance of a generic function (a legacy name: the list
/// was taken from a build without v0 symbol names, `.cargo/config.toml`).
#[test]
fn the_link_order_still_names_the_agents_functions() {
    let n = check();
    assert!(n["listed"] > 1000, "{n:?}");
    assert_eq!(n["hashed"], 0, "exact symbols in the list (they match one build only): {n:?}");
    assert_eq!(n["legacy"], 0, "legacy patterns in the list: each places every instance of a generic function; take the list from a v0-mangled build (.cargo/config.toml): {n:?}");
    let share = n["matched_code"] * 100 / n["listed_code"];
    assert!(share >= 90, "{} of {} link-order patterns (drop glue aside) name a function of the agent ({share}%): the code moved on; re-run bench/link-order.sh", n["matched_code"], n["listed_code"]);
}

/// The suite's own agent is built with v0 symbol names, as the shipped one is: a legacy
/// build (RUSTFLAGS set in the environment replaces the workspace's) would not match the list.
#[test]
fn the_agent_is_built_with_v0_symbol_names() {
    let agent = drover_tests::bin("drover-agent");
    let out = Command::new("nm").arg("--defined-only").arg(&agent).output().expect("nm (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let ours = |prefix: &str| text.lines().filter(|l| l.split_whitespace().nth(2).is_some_and(|s| s.starts_with(prefix) && s.contains("drover_agent"))).count();
    assert!(ours("_R") > 100, "{} has {} v0 and {} legacy symbols of drover_agent: built without .cargo/config.toml's rustflags?", agent.display(), ours("_R"), ours("_ZN"));
}

/// The rule drops only what depends on the build: crate disambiguators, the instantiating
/// crate, LTO's suffix, a local copy's number, a legacy hash; a generic instance keeps its
/// type arguments.
#[test]
fn patterns_drop_build_hashes_only() {
    let cases = [
        ("_ZN12drover_agent6window7Windows5parse17hc56353bff8976e44E", "_ZN12drover_agent6window7Windows5parse17h*E"),
        ("_RNvNtNtNtNtCsjrHSEGnQ3l9_3std3sys12thread_local11destructors10linux_like8register", "_RNvNtNtNtNtCs*_3std3sys12thread_local11destructors10linux_like8register"),
        ("aws_lc_0_32_sha256_update", "aws_lc_0_32_sha256_update"),
        // Vec<u8>::push and Vec<String>::push made in drover_agent: two patterns.
        ("_RNvMs_NtCslNYArtu3iFV_5alloc3vecINtB4_3VechE4pushCs9xYz12ab_12drover_agent", "_RNvMs_NtCs*_5alloc3vecINtB4_3VechE4push*"),
        ("_RNvMs_NtCslNYArtu3iFV_5alloc3vecINtB4_3VecNtNtB6_6string6StringE4pushCs9xYz12ab_12drover_agent", "_RNvMs_NtCs*_5alloc3vecINtB4_3VecNtNtB6_6string6StringE4push*"),
        ("_RNvCs123abc_3foo3bar.llvm.99", "_RNvCs*_3foo3bar.llvm.*"),
        // A local copy's number shifts with any change elsewhere: every copy is placed.
        ("_RNvNtCsjrHSEGnQ3l9_5alloc5boxed14box_new_uninit.4581", "_RNvNtCs*_5alloc5boxed14box_new_uninit.*"),
        ("_RNvNtCsjrHSEGnQ3l9_3std7process4exit", "_RNvNtCs*_3std7process4exit"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("symbols");
    std::fs::write(&file, cases.iter().map(|(s, _)| format!("{s}\n")).collect::<String>()).unwrap();
    let out = Command::new(script()).arg("--pattern").arg(&file).output().expect("bench/link-order.sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    let want: Vec<String> = cases.iter().map(|(_, p)| p.to_string()).collect();
    assert_eq!(got, want);
}
