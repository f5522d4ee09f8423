//! The agent follows a channel while a seeded fault-injecting proxy (tests/src/faults.rs)
//! sits between it and the real registry: resets mid-body, 500/502/503, 429 with
//! Retry-After, truncated bodies, bodies with flipped bytes, slow bodies. The bundles are
//! pushed by `drover push` straight to the registry.
//!
//! - 20 updates, one `run --once` per cycle: after every cycle the dir target is exactly
//!   one whole pushed bundle and the applied sequence never moved backwards; every failed
//!   cycle is a Failed attempt with a reason in the history; at the end the target equals
//!   the last bundle byte for byte (compared with a fault-free agent).
//! - 40 updates, one long-running agent (`run --interval 100ms`): the same checks at every
//!   sample of `/status` and the target, no fault ever Rejected, and its memory (VmRSS)
//!   flat between the first and the last quarter of the updates.
//! - A tag moved between the agent's HEAD and GET (an attacker's manifest; a publisher's
//!   race) never mixes bundles; a signature manifest cut or flipped on the way is retried.
//!
//! Seed: DROVER_FAULT_SEED (default 14), printed on failure.

mod agent_support;

use std::collections::BTreeMap;

use agent_support::*;
use drover_tests::faults::{Fault, FaultProxy};
use drover_tests::{rawreg, run};

/// Updates followed with one `run --once` per cycle.
const UPDATES: u64 = 20;
/// Updates followed by the long-running agent.
const LONG_UPDATES: u64 = 40;
/// How much VmRSS may grow between the first and the last quarter of the long run (a
/// leak check, not a speed target).
const RSS_GROWTH_KIB: u64 = 4 << 10;
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

/// A test world whose trusted signing key k1 is kept as plain PKCS#8 (`--key` takes
/// either form): a debug build spends about half a second per push deriving the key of
/// keygen's encrypted envelope, and these scenarios push up to 50 bundles.
fn fast_fx() -> Fx {
    let fx = Fx::new();
    let k = drover_proto::keys::PrivateKey::generate().unwrap();
    std::fs::write(fx.p("k1/drover.key"), k.to_pkcs8_pem().unwrap()).unwrap();
    std::fs::write(fx.p("k1/drover.pub"), k.public_key().to_pem()).unwrap();
    fx
}

/// What a fault-free agent (no proxy, fresh state) writes for the channel's bundle.
fn fault_free(fx: &Fx) -> BTreeMap<String, Vec<u8>> {
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
    snapshot(&reference.join("manifests"))
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
fn agent_follows_20_updates_through_a_faulty_registry() {
    let seed = seed();
    let fx = fast_fx();
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
    assert_eq!(snapshot(&fx.target().join("manifests")), fault_free(&fx), "{}", ctx("end state".into()));
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), UPDATES), Some(UPDATES));
    assert_eq!(fx.status()["appliedDigest"], last_digest.as_str());

    // The run was not trivially clean: faults were injected, some cycles failed.
    let kinds: std::collections::BTreeSet<Fault> = injected.iter().map(|f| f.fault).collect();
    assert!(kinds.len() >= 4, "{}", ctx(format!("too few kinds of faults injected: {kinds:?}")));
    assert!(failed_cycles > 0, "{}", ctx("no cycle failed: the faults were not seen".into()));
}

/// VmRSS of process `pid` in KiB (Linux `/proc`).
fn rss_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = text.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS in kB")
}

#[test]
fn a_long_running_agent_follows_40_updates_with_flat_memory() {
    let seed = seed();
    let fx = fast_fx();
    let proxy = FaultProxy::start(&fx.reg.addr, seed, RATE);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let ctx = |msg: String| format!("seed {seed} (re-run with DROVER_FAULT_SEED={seed}): {msg}");
    let mut agent = fx.spawn(&source, &listen, &["--interval", "100ms"]);
    let pid = agent.id();
    let (mut floor, mut samples, mut torn, mut rss) = (0u64, 0u32, 0u32, Vec::new());
    for i in 1..=LONG_UPDATES {
        let last_digest = fx.push(&objs(&bundle(i)), i, Some("k1"), &[]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            assert!(agent.try_wait().unwrap().is_none(), "{}", ctx("the agent exited".into()));
            // `/status` first, then the target: the target is at least as new as the status.
            let st = http_get(&listen, "/status").and_then(|(c, b)| (c == 200).then(|| serde_json::from_str::<serde_json::Value>(&b).ok()).flatten());
            // The tree is read path by path, so a swap in the middle of a read mixes two
            // trees (or loses files): judge only a tree read the same twice in a row.
            let snap = snapshot(&fx.target().join("manifests"));
            let steady = snap == snapshot(&fx.target().join("manifests"));
            samples += 1;
            torn += u32::from(!steady);
            let seq = st.as_ref().and_then(|s| s["appliedSequence"].as_u64()).unwrap_or(0);
            assert!(seq >= floor, "{}", ctx(format!("update {i}: applied sequence moved back from {floor} to {seq}")));
            floor = seq;
            // An empty tree is the instant between the dir target's two renames.
            if steady && !snap.is_empty() {
                let k = whole(&snap, i).unwrap_or_else(|| panic!("{}", ctx(format!("update {i}: not one whole bundle: {:?}", snap.keys()))));
                assert!(k >= seq, "{}", ctx(format!("update {i}: the target holds bundle {k}, older than the applied {seq}")));
            }
            if st.as_ref().is_some_and(|s| s["appliedDigest"] == last_digest.as_str()) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{}", ctx(format!("update {i} not applied within 30 s: {st:?}")));
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        rss.push(rss_kib(pid));
    }
    let (code, body) = http_get(&listen, "/history").expect("the agent answers /history");
    assert_eq!(code, 200, "{body}");
    let history: serde_json::Value = serde_json::from_str(&body).unwrap();
    let attempts = history.as_array().or(history["attempts"].as_array()).cloned().unwrap_or_default();
    let failed = attempts.iter().filter(|a| a["result"] == "Failed").count();
    for a in &attempts {
        assert_ne!(a["result"], "Rejected", "{}", ctx(format!("a fault on the way refused a good bundle: {a}")));
        if a["result"] == "Failed" {
            assert!(!a["reason"].as_str().unwrap_or("").trim().is_empty(), "{}", ctx(format!("a Failed attempt without a reason: {a}")));
        }
    }
    terminate(&mut agent);
    assert_eq!(snapshot(&fx.target().join("manifests")), fault_free(&fx), "{}", ctx("end state".into()));

    let quarter = rss.len() / 4;
    let mean = |v: &[u64]| v.iter().sum::<u64>() / v.len() as u64;
    let (first, last) = (mean(&rss[..quarter]), mean(&rss[rss.len() - quarter..]));
    eprintln!(
        "seed {seed}: long run: {} faults injected, {samples} samples ({torn} read during a swap), {failed} Failed attempts in the history; VmRSS KiB first quarter {first}, last quarter {last}, max {}",
        proxy.injected().len(),
        rss.iter().max().unwrap()
    );
    assert!(last <= first + RSS_GROWTH_KIB, "{}", ctx(format!("VmRSS grew from {first} KiB to {last} KiB over {LONG_UPDATES} updates: {rss:?}")));
    assert!(failed > 0 && !proxy.injected().is_empty(), "{}", ctx("no fault was seen".into()));
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
    let fx = fast_fx();
    let proxy = FaultProxy::start(&fx.reg.addr, 0, 0);
    let source = format!("{}/fleet/edge:prod", proxy.addr);
    let reg = fx.reg.addr.clone();
    fx.push(&objs(&bundle(1)), 1, Some("k1"), &[]);
    assert_eq!(fx.once_from(&source, &[]).code, 0);
    // Bundle 3 is signed but published to another channel (its manifest is the
    // attacker's template); `prod` holds bundle 2 with its signed channel statement.
    let next = fx.reg.reference("fleet/edge:next");
    let d3 = fx.push_at(&next, "edge", &objs(&bundle(3)), 3, Some("k1"), &[]);
    let bytes = |d: &str| rawreg::manifest(&reg, REPO, d).expect("pushed manifest").0;
    let d3_bytes = bytes(&d3);
    let d2 = fx.push(&objs(&bundle(2)), 2, Some("k1"), &[]);
    // The attacker's manifest: bundle 3's manifest with one annotation more (other
    // digest, signed by nobody), put under the tag between the agent's HEAD and GET.
    let mut evil: serde_json::Value = serde_json::from_slice(&d3_bytes).unwrap();
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
    // The publisher signed bundle 4's channel statement before moving the tag, so the
    // bundle the HEAD resolved (3) is no longer placed on the channel: that poll refuses
    // it (nothing applied, nothing mixed) and the next one applies bundle 4 whole.
    let d4 = fx.push(&objs(&bundle(4)), 4, Some("k1"), &[]);
    move_tag(&reg, &d3_bytes);
    move_tag_after_head(&proxy, &reg, bytes(&d4));
    assert_eq!(fx.once_from(&source, &[]).code, 1);
    assert_eq!(fx.history()[0]["digest"], d3.as_str());
    assert_eq!(fx.status()["appliedDigest"], d2.as_str());
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), 4), Some(2), "bundle 2, whole");
    assert_eq!(fx.once_from(&source, &[]).code, 0);
    assert_eq!(fx.status()["appliedDigest"], d4.as_str());
    assert_eq!(whole(&snapshot(&fx.target().join("manifests")), 4), Some(4), "then bundle 4, whole");
    let by_tag: Vec<String> = proxy.lines().into_iter().filter(|l| l.starts_with("GET /v2/fleet/edge/manifests/prod ")).collect();
    assert!(by_tag.is_empty(), "{by_tag:?}");
}

#[test]
fn a_signature_manifest_cut_or_flipped_on_the_way_is_retried_not_refused() {
    let fx = fast_fx();
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
