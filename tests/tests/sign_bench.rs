//! Sign and verify time per bundle against the local registry (median of 100).
//! Ignored by default; run explicitly (release numbers):
//!
//! ```text
//! cargo build --release -p drover-bundler
//! cargo test --release -p drover-tests --test sign_bench -- --ignored --nocapture
//! ```

mod sign_support;

use std::time::{Duration, Instant};

use drover_proto::keys::PrivateKey;
use drover_proto::trust::{append_signature_layers, sigmanifest, verify as trust_verify, TrustPolicy};
use drover_tests::Registry;
use sign_support::*;

const N: usize = 101;

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!("median {:.2} ms, p90 {:.2} ms, min {:.2} ms (n={})", ms(v[v.len() / 2]), ms(v[v.len() * 9 / 10]), ms(v[0]), v.len())
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn sign_and_verify_time_per_bundle() {
    let reg = Registry::start();
    let proxy = CountingProxy::start(&reg.addr);
    let tmp = tempfile::tempdir().unwrap();
    let (key_path, public) = keygen(tmp.path());
    let digests: Vec<String> = (0..N).map(|i| push_bundle(&reg, "bench/edge", "prod", "prod", i as u64 + 1, &format!("v{i}"))).collect();

    // 1. The CLI, as CI runs it: one `drover sign` / `drover verify` process per bundle
    //    (includes process start, scrypt key decryption, registry round trips).
    let mut sign_cli = Vec::new();
    let mut verify_cli = Vec::new();
    for d in &digests[1..] {
        let r = reg.reference(&format!("bench/edge@{d}"));
        let t = Instant::now();
        sign(&r, &key_path);
        sign_cli.push(t.elapsed());
        let t = Instant::now();
        let out = verify(&r, &[&public], 1);
        verify_cli.push(t.elapsed());
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    // Requests of one verification, counted through the proxy (not timed).
    let r = format!("{}/bench/edge@{}", proxy.addr, digests[0]);
    sign(&r, &key_path);
    proxy.take();
    assert_eq!(verify(&r, &[&public], 1).code, 0);
    let seen = proxy.take();
    let gets = seen.iter().filter(|l| l.starts_with("GET ") && l != &"GET /v2/").count();
    assert_eq!(gets, 2, "one manifest GET + one blob GET for one layer: {seen:?}");
    println!("requests of one `drover verify` (1 signature layer): {seen:?}");

    // 2. In process (what the agent pays per bundle): key loaded once.
    let key = PrivateKey::from_file(&key_path, PW).unwrap();
    let policy = TrustPolicy::new(vec![key.public_key().clone()], 1).unwrap();
    let rt = rt();
    let repo = repo(&reg.reference("bench/edge"));
    let docker_ref = reg.reference("bench/edge");
    let mut sign_lib = Vec::new();
    let mut verify_lib = Vec::new();
    for (i, d) in digests.iter().enumerate() {
        // A second, distinct payload per bundle so the append really writes.
        let payload = sigmanifest::payload(&format!("{docker_ref}-{i}"), d);
        let t = Instant::now();
        let sig = key.sign(&payload).unwrap();
        rt.block_on(append_signature_layers(&repo, d, vec![(sigmanifest::signature_layer(&payload, &sig), payload.clone())]))
            .unwrap();
        sign_lib.push(t.elapsed());
        let t = Instant::now();
        let v = rt.block_on(trust_verify(&repo, d, &policy)).unwrap();
        verify_lib.push(t.elapsed());
        assert_eq!(v.layers.len(), 2);
    }
    println!("drover sign   (process per bundle): {}", stats(sign_cli));
    println!("drover verify (process per bundle): {}", stats(verify_cli));
    println!("sign in process (sign + append):     {}", stats(sign_lib));
    println!("verify in process (2 layers):        {}", stats(verify_lib));
}
