//! Release link of drover-agent: the functions of agent/link-order.txt (those that run in
//! the agent's ordinary life, written by bench/link-order.sh) are placed first and side by
//! side in the program text, so the code the agent runs is resident and the code it never
//! runs (error paths, help text, unused parts of its libraries) is not. docs/agent.md,
//! "Memory", has the measurements.
//!
//! Only where the linker is known to be LLD (rustc's default on x86_64-unknown-linux-gnu
//! since 1.90): GNU ld has no `--symbol-ordering-file`. `DROVER_LINK_ORDER=0` links without it.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=DROVER_LINK_ORDER");
    let release = env::var("PROFILE").as_deref() == Ok("release");
    let x86_64_linux = env::var("TARGET").as_deref() == Ok("x86_64-unknown-linux-gnu");
    // A linker chosen by the user (-C linker=..., -C link-arg=-fuse-ld=...) may not be LLD.
    let own_linker = env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|f| f.contains("link"));
    let off = env::var("DROVER_LINK_ORDER").as_deref() == Ok("0");
    let order = format!("{}/link-order.txt", env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let listed = std::path::Path::new(&order).is_file();
    // The compiler is asked its version only for a build that would use the order.
    if release && x86_64_linux && !own_linker && !off && listed && rustc_minor() >= 90 {
        println!("cargo:rustc-link-arg-bin=drover-agent=-Wl,--symbol-ordering-file={order}");
        // Symbols of the list that a later change removed are skipped without a warning.
        println!("cargo:rustc-link-arg-bin=drover-agent=-Wl,--no-warn-symbol-ordering");
    }
}

/// The minor version of the compiler cargo builds with (`rustc 1.95.0 (...)` gives 95), 0
/// when it cannot be told.
fn rustc_minor() -> u32 {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let out = std::process::Command::new(rustc).arg("--version").output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    text.split_whitespace().nth(1).and_then(|v| v.split('.').nth(1)).and_then(|m| m.parse().ok()).unwrap_or(0)
}
