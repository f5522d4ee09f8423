//! Objects the labelled LIST before the apply did not find (a new bundle's objects, or an
//! object someone made without drover's label): applied at once, without reading them
//! first. The LIST selects `app.kubernetes.io/managed-by=drover`, and the ownership rule
//! ([`super::owner`]) decides by that label: every object of this or another drover source
//! is in the LIST, so an object not in a LIST that completed is new or not drover's
//! (`adopted`), and the apply itself says which — `201 Created` made it, `200 OK` found it.
//! A first apply of N new objects is then one PATCH each plus the LISTs (it was a GET and
//! a PATCH each).
//!
//! What the GET used to settle is settled after the apply, for the few objects it concerns:
//! - an object that existed without drover's label is `adopted`; when it holds fields
//!   kubectl left ([`super::compare::ADOPTED_MANAGERS`], [`super::adopt::fold_adopted`]) they are folded into drover's
//!   entry and the apply repeated, which removes what the bundle does not set (the same
//!   end state as folding first);
//! - one being deleted is reported `terminating` (it got drover's fields on its way out;
//!   it is recreated once gone);
//! - with `--no-force`, a conflict (another manager's fields) sends the object back to the
//!   path that reads it first and folds kubectl's fields before applying;
//! - a `200` to a retried apply (an earlier attempt timed out or lost its connection)
//!   whose only manager is drover's own apply was made by that earlier attempt: `created`.

use std::sync::atomic::{AtomicU32, Ordering};

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::Request;
use kube::Resource;
use serde_json::{json, Value};

use super::cluster::KubeTarget;
use super::discovery::Resolved;
use super::owner::{adopted_message, Owner};
use super::retry::{with_retry, ApiFailure};
use crate::targets::{Action, ApplyRequest, ObjectOutcome};
use drover_proto::object::ObjectRef;

/// What applying an object the LIST did not find came to.
pub(super) enum Unlisted {
    /// Done: the outcome (an apply was sent).
    Done(ObjectOutcome),
    /// Read it and apply it the ordinary way (a `--no-force` conflict).
    ReadFirst,
}

/// What the server answered a server-side apply.
pub(super) struct Sent {
    /// `201`: the apply created the object.
    pub created: bool,
    /// The object as the server returned it.
    pub object: Value,
    /// The apply was sent more than once (an earlier attempt failed in transit).
    pub retried: bool,
}

/// The server-side apply of `body` as [`PatchParams`] say.
pub(super) async fn send(t: &KubeTarget, res: &Resolved, id: &ObjectRef, params: &PatchParams, body: &Value) -> Result<Sent, ApiFailure> {
    let ns = if res.namespaced { id.namespace.as_deref() } else { None };
    let path = DynamicObject::url_path(&res.resource, ns);
    let attempts = AtomicU32::new(0);
    let call = || async {
        attempts.fetch_add(1, Ordering::Relaxed);
        let request = Request::new(&path).patch(&id.name, params, &Patch::Apply(body)).map_err(kube::Error::BuildRequest)?;
        let resp = t.client.send(request.map(kube::client::Body::from)).await?;
        let status = resp.status();
        let bytes = http_body_util::BodyExt::collect(resp.into_body()).await?.to_bytes();
        if !status.is_success() {
            let s = serde_json::from_slice::<kube::core::Status>(&bytes)
                .unwrap_or_else(|_| kube::core::Status::failure(&String::from_utf8_lossy(&bytes), "").with_code(status.as_u16()));
            return Err(kube::Error::Api(s.boxed()));
        }
        let obj: Value = serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError)?;
        Ok((status == http::StatusCode::CREATED, obj))
    };
    let (created, object) = with_retry(&t.opts.retry, call).await?;
    Ok(Sent { created, object, retried: attempts.load(Ordering::Relaxed) > 1 })
}

/// Applies `body` (the object `id`, not in its kind's LIST) without reading it first.
pub(super) async fn apply(t: &KubeTarget, req: &ApplyRequest, res: &Resolved, id: &ObjectRef, body: &Value) -> Unlisted {
    let mut params = PatchParams::apply(&req.field_manager);
    if t.opts.force {
        params = params.force();
    }
    let after = match send(t, res, id, &params, body).await {
        Ok(Sent { created: true, .. }) => return Unlisted::Done(ObjectOutcome::new(id.clone(), Action::Created)),
        Ok(Sent { object, retried, .. }) if retried && only_ours(&object, &req.field_manager) => {
            return Unlisted::Done(ObjectOutcome::new(id.clone(), Action::Created));
        }
        Ok(Sent { object, .. }) => object,
        Err(f) if f.conflict() && !t.opts.force => return Unlisted::ReadFirst,
        Err(f) => return Unlisted::Done(ObjectOutcome::with(id.clone(), Action::Failed, f.message)),
    };
    if let Some(m) = super::wait::terminating(&after) {
        return Unlisted::Done(ObjectOutcome::with(id.clone(), Action::Terminating, format!("{m}: recreated once it is gone")));
    }
    if let Some(fields) = super::adopt::fold_adopted(&after, &req.field_manager) {
        let rv = after.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null);
        let fold = json!({"metadata": {"resourceVersion": rv, "managedFields": fields}});
        let api = res.api(&t.client, id.namespace.as_deref());
        let merge = PatchParams { field_manager: Some(req.field_manager.clone()), ..Default::default() };
        let fold = Patch::Merge(&fold);
        let taken = with_retry(&t.opts.retry, || api.patch(&id.name, &merge, &fold)).await;
        let again = match taken {
            Ok(_) => send(t, res, id, &params, body).await.map(|_| ()),
            Err(f) => Err(f),
        };
        if let Err(f) = again {
            return Unlisted::Done(ObjectOutcome::with(id.clone(), Action::Failed, format!("taking over the fields kubectl left (managedFields): {}", f.message)));
        }
    }
    Unlisted::Done(ObjectOutcome::with(id.clone(), Action::Adopted, adopted_message(&Owner::Foreign)))
}

/// The object's only managed-fields entry is `manager`'s apply: nobody else ever wrote it.
fn only_ours(obj: &Value, manager: &str) -> bool {
    let entries = obj.pointer("/metadata/managedFields").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    !entries.is_empty() && entries.iter().all(|e| e["manager"] == manager && e["operation"] == "Apply")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_only_drover_applied_was_made_by_drover() {
        let ours = json!({"metadata": {"managedFields": [{"manager": "drover", "operation": "Apply"}]}});
        assert!(only_ours(&ours, "drover"));
        let theirs = json!({"metadata": {"managedFields": [{"manager": "drover", "operation": "Apply"}, {"manager": "kubectl-client-side-apply", "operation": "Update"}]}});
        assert!(!only_ours(&theirs, "drover"));
        assert!(!only_ours(&json!({"metadata": {}}), "drover"));
    }
}
