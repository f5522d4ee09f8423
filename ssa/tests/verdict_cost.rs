//! What the resync's compare costs per object (`bench/ssa-verdict.sh`, release build;
//! ignored in the suite: no timed tests). Prints the time per verdict over the 44
//! recorded scenarios, and for a Deployment and a ConfigMap alone.

use drover_ssa::verdict::apply_change;
use drover_ssa::Schema;
use serde_json::Value;
use std::time::Instant;

#[test]
#[ignore = "a measurement: bench/ssa-verdict.sh"]
fn verdict_cost() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/kube-fidelity/ssa-corpus.json")).unwrap();
    let all: Vec<Value> = serde_json::from_str(&text).unwrap();
    let builtin: Vec<&Value> = all.iter().filter(|s| Schema::builtin(s["desired"]["apiVersion"].as_str().unwrap(), s["desired"]["kind"].as_str().unwrap()).is_some()).collect();
    let rounds: u32 = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(200);
    for (label, pick) in [("all built-in scenarios", None), ("Deployment", Some("deploy/unchanged(full, canonical)")), ("ConfigMap", Some("cm/unchanged"))] {
        let set: Vec<&&Value> = builtin.iter().filter(|s| pick.is_none_or(|p| s["name"] == p)).collect();
        let start = Instant::now();
        let mut n = 0;
        for _ in 0..rounds {
            for s in &set {
                let schema = Schema::builtin(s["desired"]["apiVersion"].as_str().unwrap(), s["desired"]["kind"].as_str().unwrap()).unwrap();
                std::hint::black_box(apply_change(&schema, drover_ssa::live::Live::from_value(&s["live"]), &s["desired"], "drover"));
                n += 1;
            }
        }
        let per = start.elapsed() / n;
        println!("{label}: {n} verdicts, {per:?} each");
    }
}
