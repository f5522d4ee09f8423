//! Release link of drover-agent: the functions of agent/link-order.txt (those that run in
//! the agent's ordinary life, written by bench/link-order.sh) are placed first and side by
//! side in the program text, so the code the agent runs is resident and the code it never
//! runs (error paths, help text, unused parts of its libraries) is not. docs/agent.md,
//! "Memory", has the measurements.
//!
//! The list names functions by v0 symbol names (`.cargo/config.toml` builds with them)
//! without what depends on the build: the crate disambiguators (`Cs*_`) and the crate a
//! generic instance was made in depend on the build's settings and on the features cargo
//! unified for its dependencies, so exact names matched only the build they were taken
//! from (the agent built alone) and went stale with every change of settings. A v0 name
//! keeps a generic function's type arguments, so a pattern places the one instance that
//! runs, not all of them. The patterns match in any build of the agent — alone as it
//! ships, or with the whole workspace as `tests/run.sh` builds it. They become a linker script that collects the
//! matching function sections (rustc and the `cc` crate emit one section per function)
//! into an output section placed before `.text` (`INSERT BEFORE .text`, understood by LLD
//! and GNU ld alike).
//!
//! Only for release builds on Linux, and not when the build picks its own linker
//! (`-C linker=…`/`link-arg` in RUSTFLAGS). `DROVER_LINK_ORDER=0` links without it.
//! The same builds also pack the program's relative relocations (see `packed_relocations`).

use std::env;
use std::fmt::Write as _;

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=DROVER_LINK_ORDER");
    let release = env::var("PROFILE").as_deref() == Ok("release");
    let linux = env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    // A linker chosen by the user (-C linker=..., -C link-arg=-fuse-ld=...) may not take the script.
    let own_linker = env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|f| f.contains("link"));
    if !release || !linux || own_linker {
        return;
    }
    let out_dir = env::var("OUT_DIR").expect("OUT_DIR");
    packed_relocations(&out_dir);
    if env::var("DROVER_LINK_ORDER").as_deref() != Ok("0") {
        link_order(&out_dir);
    }
}

/// Places the functions of agent/link-order.txt first in the text.
fn link_order(out_dir: &str) {
    let list = format!("{}/link-order.txt", env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let Ok(text) = std::fs::read_to_string(&list) else { return };
    if !env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|f| f.contains("symbol-mangling-version=v0")) {
        println!("cargo:warning=drover-agent links without its link order: the build's RUSTFLAGS replaced .cargo/config.toml's v0 symbol names, which agent/link-order.txt names (docs/agent.md \"Link order\")");
        return;
    }
    let out = format!("{out_dir}/link-order.ld");
    std::fs::write(&out, script(&text)).expect("writing the link order script");
    println!("cargo:rustc-link-arg-bin=drover-agent=-Wl,-T,{out}");
}

/// Packed relative relocations (`-z pack-relative-relocs`, DT_RELR): a position-independent
/// program's ~38,000 relative relocations take ~10 KiB instead of 900 KiB, which the loader
/// reads at every start and which stayed resident. Needs GNU ld ≥ 2.38 or LLD, and glibc ≥
/// 2.36 where the program runs (the image's Debian 12 has both); a small C program linked
/// and run with the flag first tells whether this build host has them, else it is left out.
fn packed_relocations(out_dir: &str) {
    let dir = std::path::Path::new(out_dir);
    let src = dir.join("relr-probe.c");
    let exe = dir.join("relr-probe");
    // A pointer in writable data: a position-independent program needs a relative relocation for it.
    let probe = "static const char *p = \"x\";\nint main(void) { return p[0] != 'x'; }\n";
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let works = std::fs::write(&src, probe).is_ok()
        && std::process::Command::new(&cc)
            .args(["-pie", "-fPIE", "-Wl,-z,pack-relative-relocs", "-Wl,--fatal-warnings", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .is_ok_and(|o| o.status.success())
        && std::process::Command::new(&exe).status().is_ok_and(|s| s.success());
    if works {
        println!("cargo:rustc-link-arg-bin=drover-agent=-Wl,-z,pack-relative-relocs");
    } else {
        println!("cargo:warning=drover-agent links without packed relocations (-z pack-relative-relocs): this host's {cc} or glibc does not take them (docs/agent.md \"Memory\")");
    }
}

/// The linker script for the patterns of `list` (one per line; `#` starts a comment).
/// Each gets its own input description so the listed order is kept; a function the
/// compiler marked cold sits in `.text.unlikely.NAME`.
fn script(list: &str) -> String {
    let mut s = String::from("/* @generated by agent/build.rs from agent/link-order.txt */\nSECTIONS {\n  .text.ordered : {\n");
    for p in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        // Symbols are [A-Za-z0-9_$.]; anything else cannot be a pattern of one.
        if p.chars().all(|c| c.is_ascii_alphanumeric() || "_$.*".contains(c)) {
            let _ = writeln!(s, "    *(.text.{p} .text.unlikely.{p})");
        }
    }
    s.push_str("  }\n} INSERT BEFORE .text;\n");
    s
}
