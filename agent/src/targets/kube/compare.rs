//! Would a server-side apply change this object? The resync's compare: an object is left
//! alone only when a forced apply of the body by drover's field manager would change
//! neither the stored object nor any manager's fields, as the API server computes it.
//!
//! That is not guessed from the shape of the live object: the apply is carried out here
//! with `drover-ssa` ([`drover_ssa::verdict`]): structured-merge-diff's field sets,
//! merge and prune over the kind's schema (built-in kinds from the Go API types, custom
//! resources from their CRD's structural schema), the server's defaulting and the Go
//! round trip (`cpu: 1000m` is stored as `1`, `env: []` and `data: {}` are not stored, a
//! port's `protocol` defaults to `TCP` in its key, `stringData` lands in `data`, `status`
//! of a kind with a status subresource is not the apply's). It was checked against 44
//! scenarios recorded with the real library (tests below, docs/kubernetes.md).
//!
//! The live object is read within bounds ([`drover_ssa::live::Live`]: any depth a server
//! stores, managed fields read once); an object the apply cannot be simulated on is not
//! vouched for, and [`change`] says why ([`Change::unknown`]).
//!
//! Two policies on top (docs/kubernetes.md, "What happens to a field someone else
//! added"):
//! - an object being deleted (`deletionTimestamp`) is never "unchanged": it is reported
//!   Terminating, not vouched for;
//! - a value drover owns as one atomic value (a toleration, an RBAC rule, a label
//!   selector) that holds keys nobody applied (an admission webhook's) is drift: a
//!   forced apply replaces it whole, so the compare says so, as the server would.

use drover_ssa::live::Live;
use drover_ssa::verdict::{self, Change};
use drover_ssa::Schema;
use serde_json::Value;

/// Field managers whose entries drover folds into its own when it takes an object over
/// (as Flux does): what `kubectl create/apply/edit` and pre-server-side-apply clients
/// left. Their fields become drover's, so a field the bundle later drops is removed.
pub const ADOPTED_MANAGERS: &[&str] = &["kubectl", "kubectl-client-side-apply", "before-first-apply"];

/// True when applying `desired` (the exact apply body) with `field_manager` would change
/// nothing on `live` (the object as the API server returned it).
pub fn unchanged(schema: &Schema, desired: &Value, live: Live, field_manager: &str) -> bool {
    verdict(schema, desired, live, field_manager).is_none()
}

/// What a forced apply would change, with the policies above: a Terminating object or one
/// with adopted managers' entries left is never "nothing".
pub fn verdict(schema: &Schema, desired: &Value, live: Live, field_manager: &str) -> Change {
    if terminating(&live.object) {
        return Change { values: vec![".metadata.deletionTimestamp".into()], ..Change::default() };
    }
    let leftovers = leftover_managers(&live);
    if !leftovers.is_empty() {
        return Change { owners: leftovers, ..Change::default() };
    }
    change(schema, desired, live, field_manager)
}

/// What a forced apply would change (the plain server verdict).
pub fn change(schema: &Schema, desired: &Value, live: Live, field_manager: &str) -> Change {
    verdict::apply_change(schema, live, desired, field_manager)
}

/// The object is being deleted.
pub fn terminating(live: &Value) -> bool {
    live.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// Entries of [`ADOPTED_MANAGERS`] on `live` (main resource, any operation; none when its
/// managed fields cannot be read).
pub fn leftover_managers(live: &Live) -> Vec<String> {
    live.entries
        .iter()
        .flatten()
        .filter(|e| e.subresource.is_none() && ADOPTED_MANAGERS.contains(&e.manager.as_str()))
        .map(|e| e.manager.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn corpus() -> Vec<Value> {
        serde_json::from_str(include_str!("../../../../tests/fixtures/kube-fidelity/ssa-corpus.json")).unwrap()
    }

    fn schema_of(obj: &Value) -> Schema {
        let av = obj["apiVersion"].as_str().unwrap();
        // The scenarios were recorded with the schema of Kubernetes 1.30.
        Schema::builtin_at(30, av, obj["kind"].as_str().unwrap()).unwrap_or_else(|| {
            let crd: Value = serde_json::from_str(include_str!("../../../../tests/fixtures/kube-fidelity/widget-crd.json")).unwrap();
            drover_ssa::crd::schema_for(&crd, av.split_once('/').unwrap().1).unwrap()
        })
    }

    /// All 44 recorded scenarios give the real server's verdict: the 13 the old compare
    /// re-applied on every resync cost nothing, the 4 it missed are re-applied.
    #[test]
    fn every_recorded_scenario_gives_the_real_verdict() {
        let mut wrong = Vec::new();
        for s in corpus() {
            let got = change(&schema_of(&s["desired"]), &s["desired"], Live::from_value(&s["live"]), "drover").is_none();
            if got != (s["truth_unchanged"] == true) {
                wrong.push(format!("{}: compare says unchanged={got}", s["name"]));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// The named cases of the issue, each way round.
    #[test]
    fn wasteful_and_dangerous_cases_by_name() {
        let all = corpus();
        let get = |n: &str| all.iter().find(|s| s["name"] == n).unwrap_or_else(|| panic!("{n}"));
        for n in ["deploy/port-without-protocol", "deploy/cpu-1000m", "deploy/kubectl-create-dry-run-output", "deploy/empty-env-list", "cm/data-empty-map", "secret/stringData", "rolebinding/unchanged", "crd/with-controller-gen-status-block", "networkpolicy/unchanged(port protocol defaulted inside atomic list)", "deploy/kubectl-set-env-adds-var"] {
            let s = get(n);
            assert!(unchanged(&schema_of(&s["desired"]), &s["desired"], Live::from_value(&s["live"]), "drover"), "{n} must cost no write");
        }
        for n in ["cr/preserve-unknown-subtree-taken-then-restored", "deploy/toleration-key-added-unattributed", "deploy/selector-label-added-unattributed", "role/resourceNames-added-unattributed", "service/selector-edited"] {
            let s = get(n);
            assert!(!unchanged(&schema_of(&s["desired"]), &s["desired"], Live::from_value(&s["live"]), "drover"), "{n} must be re-applied");
        }
    }

    /// Policy beyond the plain server verdict: an adopted object keeps kubectl's entry
    /// until drover folds it into its own, and a Terminating object is never vouched for.
    #[test]
    fn adoption_leftovers_and_terminating_objects_are_not_unchanged() {
        let all = corpus();
        let s = all.iter().find(|s| s["name"] == "deploy/adopted-then-env-var-dropped-from-bundle").unwrap();
        let schema = schema_of(&s["desired"]);
        let live = || Live::from_value(&s["live"]);
        assert!(change(&schema, &s["desired"], live(), "drover").is_none(), "the plain server verdict");
        assert_eq!(leftover_managers(&live()), ["kubectl-client-side-apply"]);
        assert!(!unchanged(&schema, &s["desired"], live(), "drover"), "kubectl's entry must be folded in first");
        let s = all.iter().find(|s| s["name"] == "cm/unchanged").unwrap();
        let mut live = s["live"].clone();
        assert!(unchanged(&schema_of(&s["desired"]), &s["desired"], Live::from_value(&live), "drover"));
        live["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(!unchanged(&schema_of(&s["desired"]), &s["desired"], Live::from_value(&live), "drover"));
    }
}
