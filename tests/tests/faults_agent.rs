//! The agent follows a channel through 50 bundle updates while a seeded fault-injecting
//! proxy (tests/src/faults.rs) sits between it and the real registry: resets mid-body,
//! 500/502/503, 429 with Retry-After, truncated bodies, bodies with flipped bytes, slow
//! bodies. The bundles are pushed by `drover push` straight to the registry. After every
//! `run --once` cycle the dir target is exactly one whole pushed bundle and the applied
//! sequence never moved backwards; every failed cycle is a Failed attempt with a reason in
//! the history; at the end the target equals the last bundle byte for byte (compared with
//! a fault-free agent). Seed: DROVER_FAULT_SEED (default 14), printed on failure.

mod agent_support;

use std::collections::BTreeMap;

use agent_support::*;
use drover_tests::faults::{Fault, FaultProxy};
use drover_tests::run;

const UPDATES: u64 = 50;
/// Faults per 1,000 proxied requests.
const RATE: u32 = 60;
/// Cycles allowed per update before the test gives up (the agent must converge).
const MAX_TRIES: u32 = 25;

fn seed() -> u64 {
    std::env::var("DROVER_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(14)
}

/// Bundle `i`: 4 to 6 ConfigMaps (objects come and go), every value marked `rev-NNN`.
fn bundle(i: u64) -> Vec<(String, String)> {
    (0..4 + i % 3).map(|j| cm("app", &format!("c{j}"), &format!("rev-{i:03}"))).collect()
}

/// Which pushed bundle the target holds, if it holds exactly one whole bundle.
fn whole(snap: &BTreeMap<String, Vec<u8>>, pushed: u64) -> Option<u64> {
    (1..=pushed).find(|&k| {
        let names: Vec<String> = (0..4 + k % 3).map(|j| format!("app/ConfigMap.core.c{j}.yaml")).collect();
        let mark = format!("rev-{k:03}");
        snap.keys().cloned().collect::<Vec<_>>() == {
            let mut n = names.clone();
            n.sort();
            n
        } && snap.values().all(|v| String::from_utf8_lossy(v).contains(&mark))
    })
}

#[test]
fn agent_follows_50_updates_through_a_faulty_registry() {
    let seed = seed();
    let fx = Fx::new();
    let proxy = FaultProxy::start(&fx.reg.addr, seed, RATE);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    let ctx = |msg: String| format!("seed {seed} (re-run with DROVER_FAULT_SEED={seed}): {msg}");
    let (mut floor, mut failed_cycles, mut cycles) = (0u64, 0u32, 0u32);
    let mut reasons = Vec::new();
    let mut last_digest = String::new();
    for i in 1..=UPDATES {
        last_digest = fx.push(&objs(&bundle(i)), i, Some("k1"), &[]);
        let mut tries = 0;
        loop {
            let out = fx.once_from(&source, &[]);
            cycles += 1;
            let snap = snapshot(&fx.target().join("manifests"));
            let st = fx.status();
            let seq = st["appliedSequence"].as_u64().unwrap_or(0);
            if !snap.is_empty() || seq > 0 {
                let k = whole(&snap, i).unwrap_or_else(|| {
                    panic!("{}", ctx(format!("update {i}, cycle {tries}: the target is not one whole bundle: {:?}", snap.keys())))
                });
                assert_eq!(k, seq, "{}", ctx(format!("update {i}: the target holds bundle {k}, status says {seq}")));
                assert!(seq >= floor, "{}", ctx(format!("update {i}: applied sequence moved back from {floor} to {seq}")));
                floor = seq;
            }
            if out.code != 0 {
                failed_cycles += 1;
                let h = fx.history();
                let a = &h[0];
                assert_eq!(a["result"], "Failed", "{}", ctx(format!("exit {} but the newest attempt is {a}\n{}", out.code, out.stderr)));
                let reason = a["reason"].as_str().unwrap_or("");
                assert!(!reason.trim().is_empty(), "{}", ctx(format!("a Failed attempt without a reason: {a}")));
                reasons.push(reason.to_string());
            }
            if st["appliedDigest"] == last_digest.as_str() {
                break;
            }
            tries += 1;
            assert!(tries < MAX_TRIES, "{}", ctx(format!("update {i} not applied after {tries} cycles; last: {}", out.stderr)));
        }
    }
    let injected = proxy.injected();
    eprintln!("seed {seed}: {} faults injected, {cycles} cycles, {failed_cycles} failed", injected.len());
    for r in &reasons {
        eprintln!("  Failed: {r}");
    }

    // The end state equals the last bundle byte for byte: what a fault-free agent writes.
    let mut args = fx.agent_args(&fx.tag_ref);
    let reference = fx.p("reference");
    let swap = |args: &mut Vec<String>, flag: &str, v: String| {
        let i = args.iter().position(|a| a == flag).unwrap();
        args[i + 1] = v;
    };
    swap(&mut args, "--target", format!("dir:{}", reference.display()));
    swap(&mut args, "--state-dir", fx.s("reference-state"));
    args.push("--once".into());
    let out = run("drover-agent", &args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(snapshot(&fx.target().join("manifests")), snapshot(&reference.join("manifests")), "{}", ctx("end state".into()));
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), UPDATES), Some(UPDATES));
    assert_eq!(fx.status()["appliedDigest"], last_digest.as_str());

    // The run was not trivially clean: faults were injected, some cycles failed.
    let kinds: std::collections::BTreeSet<Fault> = injected.iter().map(|f| f.fault).collect();
    assert!(kinds.len() >= 4, "{}", ctx(format!("too few kinds of faults injected: {kinds:?}")));
    assert!(failed_cycles > 0, "{}", ctx("no cycle failed: the faults were not seen".into()));
}
