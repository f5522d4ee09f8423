//! CustomResourceDefinitions: the checks the server makes on them, their
//! NamesAccepted/Established conditions, and the resources they add.

use super::resources::{self, ResourceInfo};
use super::status::ApiError;
use super::util::now_rfc3339;
use serde_json::{json, Value};

/// The built-in CRD resource.
pub fn crd_res() -> ResourceInfo {
    resources::builtin()
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

/// The checks the real server makes on a CRD that matter to clients.
pub fn validate_crd(res: &ResourceInfo, name: &str, crd: &Value) -> Result<(), ApiError> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    if group.is_empty() {
        return Err(ApiError::invalid(res, name, "spec.group", "Required value"));
    }
    if plural.is_empty()
        || spec["names"]["kind"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    {
        return Err(ApiError::invalid(
            res,
            name,
            "spec.names",
            "Required value: plural and kind are required",
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(ApiError::invalid(
            res,
            name,
            "metadata.name",
            &format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !matches!(spec["scope"].as_str(), Some("Namespaced" | "Cluster")) {
        return Err(ApiError::invalid(
            res,
            name,
            "spec.scope",
            "Unsupported value: must be \"Cluster\" or \"Namespaced\"",
        ));
    }
    let versions = spec["versions"].as_array().map(Vec::len).unwrap_or(0);
    let storage = spec["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .count()
        })
        .unwrap_or(0);
    if versions == 0 || storage != 1 {
        return Err(ApiError::invalid(
            res,
            name,
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    Ok(())
}
