//! The README's command walkthrough, run exactly as written (issue 17): the block in
//! README.md is the block of `examples/walkthrough.sh` line for line, and the script
//! runs it against two real registries (the connected one and the air-gapped one). A
//! README command that stops working, or a README edit that the script does not follow,
//! fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

use drover_tests::{bin, Registry};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The lines of `text` strictly between the line containing `begin` and the next line
/// containing `end`.
fn between(text: &str, begin: &str, end: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| !l.contains(begin));
    assert!(lines.next().is_some(), "no {begin:?} marker");
    let block: Vec<String> = lines.by_ref().take_while(|l| !l.contains(end)).map(String::from).collect();
    assert!(!block.is_empty(), "nothing between {begin:?} and {end:?}");
    block
}

#[test]
fn readme_block_is_the_script_block() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let script = std::fs::read_to_string(root().join("examples/walkthrough.sh")).unwrap();
    let mut from_readme = between(&readme, "<!-- walkthrough begin", "<!-- walkthrough end");
    // The README wraps the block in a ```sh fence.
    assert_eq!(from_readme.first().map(String::as_str), Some("```sh"), "the README block starts with ```sh");
    assert_eq!(from_readme.last().map(String::as_str), Some("```"), "the README block ends with ```");
    from_readme = from_readme[1..from_readme.len() - 1].to_vec();
    let from_script = between(&script, "# --- walkthrough begin ---", "# --- walkthrough end ---");
    for (i, (r, s)) in from_readme.iter().zip(&from_script).enumerate() {
        assert_eq!(r, s, "line {} of the walkthrough differs between README.md and examples/walkthrough.sh", i + 1);
    }
    assert_eq!(from_readme.len(), from_script.len(), "README.md and examples/walkthrough.sh have walkthroughs of different length");
}

#[test]
fn walkthrough_runs_as_written() {
    let connected = Registry::start();
    let airgap = Registry::start();
    let bin_dir = bin("drover").parent().unwrap().to_path_buf();
    let out = Command::new("bash")
        .arg(root().join("examples/walkthrough.sh"))
        .env("REGISTRY", &connected.addr)
        .env("AIRGAP", &airgap.addr)
        .env("DROVER_BIN", &bin_dir)
        .current_dir(root())
        .output()
        .expect("run the walkthrough");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the walkthrough failed:\n{stdout}\n--- stderr (commands as run) ---\n{stderr}");
    assert!(stdout.contains("walkthrough done"), "{stdout}");
    // What a reader is told to expect.
    assert!(stdout.contains("2 of 2 required key(s) signed"), "two-party verify: {stdout}");
    assert!(stdout.contains("they differ (exit 1)"), "diff of prod-41 and prod: {stdout}");
    assert!(stdout.contains("0 added, 0 removed, 0 changed"), "the pushed bundle holds the rendered directory: {stdout}");
    for env in ["dev", "staging", "prod"] {
        assert!(stdout.lines().any(|l| l.starts_with(env) && l.contains(" yes ")), "releases shows {env} verified: {stdout}");
    }
    assert!(stdout.contains("release record (drover publish)"), "inspect of a release record: {stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("last attempt:") && l.contains("Applied")), "the edge-small agent applied: {stdout}");
    assert!(stdout.contains("\"result\": \"Applied\""), "the cloud-standard agent applied from the archive: {stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("edge-small.factory-1") && l.contains("Healthy")),
        "fleet status shows the reporting agent: {stdout}"
    );
    assert!(!stderr.contains("left out"), "import keeps both signers' signatures: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
