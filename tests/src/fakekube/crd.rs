//! CustomResourceDefinitions: the checks the server makes on them, their
//! NamesAccepted/Established conditions, and the resources they add.

use super::resources::{self, ResourceInfo};
use super::status::FieldError;
use super::util::now_rfc3339;
use serde_json::{json, Value};

/// The built-in CRD resource.
pub fn crd_res() -> ResourceInfo {
    resources::builtin(drover_ssa::builtin::NEWEST)
        .into_iter()
        .find(|r| r.plural == "customresourcedefinitions")
        .expect("crd resource")
}

/// Whether the CRD has Established=True.
pub fn crd_established(obj: &Value) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

/// Sets NamesAccepted=True (not yet Established).
pub fn set_crd_names_accepted(obj: &mut Value) {
    let now = now_rfc3339();
    obj["status"] = json!({
        "conditions": [{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now}],
        "acceptedNames": obj["spec"]["names"].clone(),
        "storedVersions": stored_versions(obj),
    });
}

/// Sets NamesAccepted=True and Established=True.
pub fn set_crd_established(obj: &mut Value) {
    set_crd_names_accepted(obj);
    let now = now_rfc3339();
    if let Some(cs) = obj["status"]["conditions"].as_array_mut() {
        cs.push(json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}));
    }
}

fn stored_versions(crd: &Value) -> Value {
    let v: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    Value::Array(v)
}

/// The spec checks the real server makes on a CRD that matter to clients (its name is
/// checked with the other names, in [`super::validate`]).
pub fn spec_errors(crd: &Value) -> Vec<FieldError> {
    let spec = &crd["spec"];
    let mut errs = Vec::new();
    let text = |p: &str| spec.pointer(p).and_then(Value::as_str).unwrap_or_default();
    match text("/group") {
        "" => errs.push(FieldError::required("spec.group", "")),
        g if !g.contains('.') => errs.push(FieldError::invalid_str(
            "spec.group",
            g,
            "should be a domain with at least one dot",
        )),
        _ => {}
    }
    for field in ["plural", "kind"] {
        if text(&format!("/names/{field}")).is_empty() {
            errs.push(FieldError::required(&format!("spec.names.{field}"), ""));
        }
    }
    match text("/scope") {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        // The real server prints the Go value of the list here; the fake abbreviates it.
        errs.push(FieldError::invalid(
            "spec.versions",
            "[]apiextensions.CustomResourceDefinitionVersion{...}",
            "must have exactly one version marked as storage version",
        ));
    }
    errs
}
