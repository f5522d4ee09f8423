//! Taking over what kubectl left: an object drover adopts may hold entries of
//! [`compare::ADOPTED_MANAGERS`] (`kubectl create/apply`, clients older than server-side
//! apply); their fields are folded into drover's own Apply entry before (or, for an object
//! the LIST did not find, right after) drover's apply, so a field the bundle does not set
//! is removed, as Flux does. One rule for both paths: the object is read as a
//! [`drover_ssa::live::Live`] (the GET or LIST before the apply, or the `200` answer of
//! an apply to an object the LIST did not find) and the entries go back as JSON text.

use kube::api::PatchParams;
use serde_json::Value;

use super::cluster::KubeTarget;
use super::compare;
use super::discovery::Resolved;
use super::read;
use super::retry::ApiFailure;

/// The managed fields `live` should have before drover's apply when it holds entries of
/// [`compare::ADOPTED_MANAGERS`] (what `kubectl create/apply` and clients older than
/// server-side apply left): their fields join drover's own Apply entry, so the apply
/// that follows removes every field of theirs the bundle does not set, as Flux does.
/// JSON text (an entry may nest 10,000 deep); None when there is nothing to fold (or the
/// entries cannot be read).
pub(super) fn fold_adopted(live: &drover_ssa::live::Live, manager: &str) -> Option<String> {
    let leftovers = compare::leftover_managers(live);
    if leftovers.is_empty() {
        return None;
    }
    let entries = live.entries.as_ref().ok()?;
    let mut mine: Option<drover_ssa::server::Entry> = None;
    let mut kept = Vec::new();
    let mut taken = drover_ssa::fieldpath::Set::new();
    for e in entries {
        if e.subresource.is_none() && leftovers.contains(&e.manager) {
            taken.extend(&e.set);
        } else if e.manager == manager && e.operation == "Apply" && e.subresource.is_none() {
            mine = Some(e.clone());
        } else {
            kept.push(e.clone());
        }
    }
    let api_version = live.object["apiVersion"].as_str().unwrap_or_default().to_string();
    let mut mine = mine.unwrap_or(drover_ssa::server::Entry {
        manager: manager.into(),
        operation: "Apply".into(),
        api_version,
        time: live.object.pointer("/metadata/creationTimestamp").and_then(Value::as_str).map(str::to_string),
        subresource: None,
        set: drover_ssa::fieldpath::Set::new(),
    });
    mine.set.extend(&taken);
    kept.push(mine);
    Some(drover_ssa::server::entries_json(&kept))
}

/// Writes `fields` ([`fold_adopted`]'s text) as the object's `managedFields` with a JSON
/// merge patch conditional on `resource_version` (the version the fold was read from).
pub(super) async fn take_over(t: &KubeTarget, res: &Resolved, namespace: Option<&str>, name: &str, manager: &str, resource_version: &str, fields: &str) -> Result<(), ApiFailure> {
    // Written as text: the entries go back as they are, however deep.
    let text = format!("{{\"metadata\":{{\"resourceVersion\":{},\"managedFields\":{fields}}}}}", Value::String(resource_version.to_string()));
    let params = PatchParams { field_manager: Some(manager.to_string()), ..Default::default() };
    read::patch_text(t, res, namespace, name, &params, false, &text).await.map(|_| ())
}
