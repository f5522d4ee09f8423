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
use drover_tests::{rawreg, run};

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

/// The registry's repository of the channel (`fleet/edge`).
const REPO: &str = "fleet/edge";

/// Moves the channel tag `prod` to `bytes` with a raw HTTP PUT straight to the registry.
fn move_tag(registry: &str, bytes: &[u8]) {
    rawreg::put_manifest(registry, REPO, "prod", bytes, drover_proto::media::OCI_MANIFEST);
}

/// Arms `proxy`: right after the registry answered the next `HEAD` of the channel tag,
/// and before the agent sees that answer, the tag is moved to `bytes` (raw HTTP).
fn move_tag_after_head(proxy: &FaultProxy, registry: &str, bytes: Vec<u8>) {
    let armed = std::sync::atomic::AtomicBool::new(true);
    let registry = registry.to_string();
    proxy.on_answer(move |line| {
        if line.starts_with("HEAD /v2/fleet/edge/manifests/prod ") && armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            move_tag(&registry, &bytes);
        }
    });
}

#[test]
fn a_tag_moved_between_head_and_get_never_mixes_bundles() {
    let fx = Fx::new();
    let proxy = FaultProxy::start(&fx.reg.addr, 0, 0);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    let reg = fx.reg.addr.clone();
    fx.push(&objs(&bundle(1)), 1, Some("k1"), &[]);
    assert_eq!(fx.once_from(&source, &[]).code, 0);
    let d2 = fx.push(&objs(&bundle(2)), 2, Some("k1"), &[]);
    let d3 = fx.push(&objs(&bundle(3)), 3, Some("k1"), &[]);
    let bytes = |d: &str| rawreg::manifest(&reg, REPO, d).expect("pushed manifest").0;
    // The attacker's manifest: bundle 3's manifest with one annotation more (other
    // digest, signed by nobody), put under the tag between the agent's HEAD and GET.
    let mut evil: serde_json::Value = serde_json::from_slice(&bytes(&d3)).unwrap();
    evil["annotations"]["org.example.moved"] = "yes".into();
    let evil = serde_json::to_vec(&evil).unwrap();
    let evil_digest = rawreg::digest(&evil);

    move_tag(&reg, &bytes(&d2));
    move_tag_after_head(&proxy, &reg, evil);
    let out = fx.once_from(&source, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let st = fx.status();
    assert_eq!(st["appliedDigest"], d2.as_str(), "the agent applies what its HEAD resolved: {st}");
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), 3), Some(2), "the target is bundle 2, whole");
    let by_tag: Vec<String> = proxy.lines().into_iter().filter(|l| l.starts_with("GET /v2/fleet/edge/manifests/prod ")).collect();
    assert!(by_tag.is_empty(), "the agent fetched the manifest by tag, not by the digest it resolved: {by_tag:?}");
    // Next poll: the tag names the attacker's manifest: refused, bundle 2 stays.
    let out = fx.once_from(&source, &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let h = fx.history();
    assert_eq!(h[0]["result"], "Rejected", "{}", h[0]);
    assert_eq!(h[0]["digest"], evil_digest.as_str(), "{}", h[0]);
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), 3), Some(2));
    assert_eq!(fx.status()["appliedDigest"], d2.as_str());

    // A publisher's race: the tag moves to the next signed bundle between HEAD and GET.
    let d4 = fx.push(&objs(&bundle(4)), 4, Some("k1"), &[]);
    move_tag(&reg, &bytes(&d3));
    move_tag_after_head(&proxy, &reg, bytes(&d4));
    assert_eq!(fx.once_from(&source, &[]).code, 0);
    assert_eq!(fx.status()["appliedDigest"], d3.as_str());
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), 4), Some(3), "bundle 3, whole");
    assert_eq!(fx.once_from(&source, &[]).code, 0);
    assert_eq!(fx.status()["appliedDigest"], d4.as_str());
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), 4), Some(4), "then bundle 4, whole");
    let by_tag: Vec<String> = proxy.lines().into_iter().filter(|l| l.starts_with("GET /v2/fleet/edge/manifests/prod ")).collect();
    assert!(by_tag.is_empty(), "{by_tag:?}");
}

#[test]
fn a_signature_manifest_cut_or_flipped_on_the_way_is_retried_not_refused() {
    let fx = Fx::new();
    let proxy = FaultProxy::start(&fx.reg.addr, 0, 0);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    for (i, fault) in [(1u64, Fault::Truncate), (2, Fault::Corrupt)] {
        let d = fx.push(&objs(&bundle(i)), i, Some("k1"), &[]);
        proxy.script(".sig ", fault);
        let out = fx.once_from(&source, &[]);
        assert!(proxy.injected().iter().any(|f| f.fault == fault && f.line.contains(".sig ")), "{fault:?} was not injected: {:?}", proxy.injected());
        assert_eq!(out.code, 1, "{fault:?}: {}", out.stderr);
        let h = fx.history();
        assert_eq!(h[0]["result"], "Failed", "{fault:?} on the signature manifest is damage on the way, not tampering: {}", h[0]);
        let reason = h[0]["reason"].as_str().unwrap_or("");
        assert!(reason.contains("digest mismatch") && reason.contains(".sig"), "{fault:?}: {reason}");
        // The next poll fetches it again and applies the bundle.
        let out = fx.once_from(&source, &[]);
        assert_eq!(out.code, 0, "{fault:?}: {}", out.stderr);
        assert_eq!(fx.status()["appliedDigest"], d.as_str());
    }
}
