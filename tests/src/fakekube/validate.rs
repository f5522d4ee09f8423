//! The validations the FAKE API server makes, as the real server makes them: object
//! names per kind (each resource's `ValidateNameFunc`), label keys and values,
//! annotation keys, Service ports, CronJob name length and the CRD checks
//! ([`super::crd`]). Like the real server it collects every error of an object (a
//! `field.ErrorList`) and answers them as one 422 `Invalid`. Schemas and field types are
//! not checked.

use super::crd;
use super::names;
use super::resources::ResourceInfo;
use super::status::{ApiError, FieldError};
use serde_json::Value;

/// How the real server checks a kind's `metadata.name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (`NameIsDNSSubdomain`): most kinds and all custom resources.
    Subdomain,
    /// DNS-1123 label (`NameIsDNSLabel`): Namespace, StatefulSet.
    Label,
    /// DNS-1035 label (`NameIsDNS1035Label`): Service.
    Dns1035Label,
    /// Only a valid URL path segment (`path.IsValidPathSegmentName`): RBAC Roles,
    /// ClusterRoles and their bindings, core/v1 Events, APIServices.
    PathSegment,
}

/// The name rule of a resource, as in kubernetes' `pkg/apis/*/validation`.
pub fn name_rule(res: &ResourceInfo) -> NameRule {
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "namespaces") | ("apps", "statefulsets") => NameRule::Label,
        ("", "services") => NameRule::Dns1035Label,
        ("rbac.authorization.k8s.io", _) | ("", "events") => NameRule::PathSegment,
        ("apiregistration.k8s.io", "apiservices") => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

/// The messages of `rule` for `name` (empty = valid).
pub fn rule_messages(rule: NameRule, name: &str) -> Vec<String> {
    match rule {
        NameRule::Subdomain => names::dns1123_subdomain(name),
        NameRule::Label => names::dns1123_label(name),
        NameRule::Dns1035Label => names::dns1035_label(name),
        NameRule::PathSegment => names::path_segment(name),
    }
}

/// The `metadata.name` errors of an object: its kind's rule plus the kinds whose name
/// is derived from the spec (CRD `<plural>.<group>`, APIService `<version>.<group>`).
fn name_errors(res: &ResourceInfo, name: &str, body: &Value) -> Vec<FieldError> {
    let mut msgs = rule_messages(name_rule(res), name);
    let spec = &body["spec"];
    let spec_str = |p: &str| spec.pointer(p).and_then(Value::as_str).unwrap_or_default();
    match (res.group.as_str(), res.plural.as_str()) {
        ("apiextensions.k8s.io", "customresourcedefinitions")
            if name != format!("{}.{}", spec_str("/names/plural"), spec_str("/group")) =>
        {
            msgs.push("must be spec.names.plural+\".\"+spec.group".to_string());
        }
        ("apiregistration.k8s.io", "apiservices") if msgs.is_empty() => {
            let required = format!("{}.{}", spec_str("/version"), spec_str("/group"));
            if name != required {
                msgs.push(format!(
                    "must be `spec.version+\".\"+spec.group`: {required:?}"
                ));
            }
        }
        _ => {}
    }
    msgs.iter()
        .map(|m| FieldError::invalid_str("metadata.name", name, m))
        .collect()
}

/// Label keys and values, annotation keys (`metadata.labels` / `metadata.annotations`).
fn meta_errors(res: &ResourceInfo, body: &Value) -> Result<Vec<FieldError>, ApiError> {
    let mut errs = Vec::new();
    if let Some(labels) = body["metadata"]["labels"].as_object() {
        for (k, v) in labels {
            let Some(s) = v.as_str() else {
                return Err(ApiError::bad_request(format!("{} in version \"{}\" cannot be handled as a {}: json: cannot unmarshal {v} into Go struct field ObjectMeta.metadata.labels of type string (label {k:?})", res.kind, res.version, res.kind)));
            };
            for m in names::label_key(k) {
                errs.push(FieldError::invalid_str("metadata.labels", k, &m));
            }
            for m in names::label_value(s) {
                errs.push(FieldError::invalid_str("metadata.labels", s, &m));
            }
        }
    }
    if let Some(annotations) = body["metadata"]["annotations"].as_object() {
        for k in annotations.keys() {
            for m in names::label_key(&k.to_lowercase()) {
                errs.push(FieldError::invalid_str("metadata.annotations", k, &m));
            }
        }
    }
    errs.extend(managed_fields_errors(body));
    Ok(errs)
}

/// `ValidateManagedFields` of the real server (apimachinery's objectmeta validation): what
/// it checks of each entry and nothing more (`fieldsV1` itself is not validated; the
/// field manager decodes it when it computes ownership).
fn managed_fields_errors(body: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(entries) = body["metadata"]["managedFields"].as_array() else { return errs };
    for (i, e) in entries.iter().enumerate() {
        let at = |f: &str| format!("metadata.managedFields[{i}].{f}");
        let text = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or_default();
        // `[{}]` is how a client clears the list: not an entry.
        if e.as_object().is_some_and(|o| o.is_empty()) && entries.len() == 1 {
            continue;
        }
        if !matches!(text("operation"), "Apply" | "Update") {
            errs.push(FieldError::invalid_str(&at("operation"), text("operation"), "must be `Apply` or `Update`"));
        }
        if !text("fieldsType").is_empty() && text("fieldsType") != "FieldsV1" {
            errs.push(FieldError::invalid_str(&at("fieldsType"), text("fieldsType"), "must be `FieldsV1`"));
        }
        let manager = text("manager");
        if manager.len() > 128 {
            errs.push(FieldError { field: at("manager"), reason: "FieldValueTooLong", body: "Too long: may not be more than 128 bytes".into() });
        }
        for (pos, c) in manager.char_indices() {
            if c.is_control() || (c.is_whitespace() && c != ' ') {
                errs.push(FieldError::invalid_str(&at("manager"), manager, &format!("invalid character U+{:04X} (at position {pos})", c as u32)));
            }
        }
        if text("subresource").len() > 256 {
            errs.push(FieldError { field: at("subresource"), reason: "FieldValueTooLong", body: "Too long: may not be more than 256 bytes".into() });
        }
    }
    errs
}

/// The update checks that compare with the stored object: a ConfigMap or Secret marked
/// `immutable: true` keeps its data and the mark (`ValidateConfigMapUpdate`,
/// `ValidateSecretUpdate`).
pub fn update(res: &ResourceInfo, name: &str, live: &Value, new: &Value) -> Result<(), ApiError> {
    let fields: &[&str] = match (res.group.as_str(), res.plural.as_str()) {
        ("", "configmaps") => &["data", "binaryData"],
        ("", "secrets") => &["data", "type"],
        _ => return Ok(()),
    };
    if live["immutable"] != true {
        return Ok(());
    }
    let forbidden = |f: &str| FieldError { field: f.into(), reason: "FieldValueForbidden", body: "Forbidden: field is immutable when `immutable` is set".into() };
    let mut errs = Vec::new();
    if new["immutable"] != true {
        errs.push(forbidden("immutable"));
    }
    for f in fields {
        if live.get(*f) != new.get(*f) {
            errs.push(forbidden(f));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_list(res, name, &errs))
    }
}

/// The most an object may take in storage (etcd's request limit, 1.5 MiB; measured here
/// as JSON, which the real server stores as protobuf for built-in kinds: a little larger).
pub const MAX_OBJECT: usize = 1_572_864;

/// An object too large to store: the error etcd gives through the real server.
pub fn size(body: &Value) -> Result<(), ApiError> {
    let n = serde_json::to_vec(body).map(|b| b.len()).unwrap_or(0);
    if n > MAX_OBJECT {
        return Err(ApiError::new(413, "RequestEntityTooLarge", "etcdserver: request is too large"));
    }
    Ok(())
}

/// The kind-specific checks after the metadata ones.
fn spec_errors(res: &ResourceInfo, name: &str, body: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "services") => {
            for (i, p) in body["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let Some(port) = p["port"].as_i64().filter(|n| !(1..=65535).contains(n)) {
                    errs.push(FieldError::invalid(
                        &format!("spec.ports[{i}].port"),
                        &port.to_string(),
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            errs.extend(crd::spec_errors(body));
        }
        // The CronJob controller appends an 11-character suffix to its Jobs' names.
        ("batch", "cronjobs") if name.len() > 52 => {
            errs.push(FieldError::invalid_str(
                "metadata.name",
                name,
                "must be no more than 52 characters",
            ));
        }
        _ => {}
    }
    errs
}

/// Checks an object about to be stored as `name`: every error at once, as one 422.
pub fn object(res: &ResourceInfo, name: &str, body: &Value) -> Result<(), ApiError> {
    let mut errs = name_errors(res, name, body);
    errs.extend(meta_errors(res, body)?);
    errs.extend(spec_errors(res, name, body));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_list(res, name, &errs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakekube::resources::builtin;
    use serde_json::json;

    fn res(plural: &str) -> ResourceInfo {
        builtin(drover_ssa::builtin::NEWEST).into_iter().find(|r| r.plural == plural).unwrap()
    }

    #[test]
    fn name_rules_per_kind() {
        assert_eq!(name_rule(&res("clusterroles")), NameRule::PathSegment);
        assert_eq!(name_rule(&res("rolebindings")), NameRule::PathSegment);
        assert_eq!(name_rule(&res("namespaces")), NameRule::Label);
        assert_eq!(name_rule(&res("statefulsets")), NameRule::Label);
        assert_eq!(name_rule(&res("services")), NameRule::Dns1035Label);
        assert_eq!(name_rule(&res("configmaps")), NameRule::Subdomain);
        assert!(object(&res("clusterroles"), "system:aggregate-to-view", &json!({})).is_ok());
        let e = object(&res("statefulsets"), "db.primary", &json!({})).unwrap_err();
        assert_eq!(e.message, "StatefulSet.apps \"db.primary\" is invalid: metadata.name: Invalid value: \"db.primary\": must not contain dots");
    }

    #[test]
    fn managed_fields_entries_are_checked_as_the_real_server_checks_them() {
        let body = json!({"metadata": {"managedFields": [
            {"manager": "m", "operation": "Evil", "fieldsType": "FieldsV2", "fieldsV1": {}},
            {"manager": "x".repeat(129), "operation": "Update", "subresource": "s".repeat(257)},
            {"manager": "tab\there", "operation": "Apply", "fieldsV1": {"anything": {"goes": {}}}}]}});
        let e = object(&res("configmaps"), "c", &body).unwrap_err();
        for want in ["metadata.managedFields[0].operation: Invalid value: \"Evil\": must be `Apply` or `Update`",
            "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
            "metadata.managedFields[1].manager: Too long", "metadata.managedFields[1].subresource: Too long",
            "metadata.managedFields[2].manager: Invalid value: \"tab\\there\": invalid character U+0009 (at position 3)"] {
            assert!(e.message.contains(want), "{want}\n{}", e.message);
        }
        assert!(object(&res("configmaps"), "c", &json!({"metadata": {"managedFields": [{}]}})).is_ok(), "[{{}}] clears the list");
        assert!(size(&json!({"data": {"a": "x".repeat(MAX_OBJECT)}})).is_err());
    }

    #[test]
    fn every_error_is_reported_once() {
        let body = json!({"metadata": {"labels": {"a": "bad value", "b": "bad value"}}});
        let e = object(&res("configmaps"), "Bad", &body).unwrap_err();
        assert!(e.message.starts_with("ConfigMap \"Bad\" is invalid: [metadata.name: Invalid value: \"Bad\": a lowercase RFC 1123 subdomain"), "{}", e.message);
        assert_eq!(
            e.message
                .matches("metadata.labels: Invalid value: \"bad value\"")
                .count(),
            1,
            "{}",
            e.message
        );
        assert_eq!(e.details.unwrap()["causes"].as_array().unwrap().len(), 3);
    }
}
