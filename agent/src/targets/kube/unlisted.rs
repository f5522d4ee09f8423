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
use serde_json::Value;

use super::cluster::KubeTarget;
use super::discovery::Resolved;
use super::owner::{adopted_message, Owner};
use super::retry::{with_retry, ApiFailure};
use crate::offload::off_thread_if_large;
use crate::targets::{Action, ApplyRequest, ObjectOutcome};
use drover_proto::object::ObjectRef;
use drover_ssa::live::Live;

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
    /// The object as the server returned it (JSON text, read only when needed).
    pub text: String,
    /// The apply was sent more than once (an earlier attempt failed in transit).
    pub retried: bool,
}

/// The server-side apply of `body` (JSON text, sent as it is) as [`PatchParams`] say.
pub(super) async fn send(t: &KubeTarget, res: &Resolved, id: &ObjectRef, params: &PatchParams, body: &str) -> Result<Sent, ApiFailure> {
    let ns = if res.namespaced { id.namespace.as_deref() } else { None };
    let path = DynamicObject::url_path(&res.resource, ns);
    let attempts = AtomicU32::new(0);
    let call = || async {
        attempts.fetch_add(1, Ordering::Relaxed);
        let mut request = Request::new(&path).patch(&id.name, params, &Patch::Apply(Value::Null)).map_err(kube::Error::BuildRequest)?;
        *request.body_mut() = body.as_bytes().to_vec();
        let resp = t.client.send(request.map(kube::client::Body::from)).await?;
        let status = resp.status();
        let bytes = http_body_util::BodyExt::collect(resp.into_body()).await?.to_bytes();
        if !status.is_success() {
            let s = serde_json::from_slice::<kube::core::Status>(&bytes)
                .unwrap_or_else(|_| kube::core::Status::failure(&String::from_utf8_lossy(&bytes), "").with_code(status.as_u16()));
            return Err(kube::Error::Api(s.boxed()));
        }
        Ok((status == http::StatusCode::CREATED, String::from_utf8_lossy(&bytes).into_owned()))
    };
    let (created, text) = with_retry(&t.opts.retry, call).await?;
    Ok(Sent { created, text, retried: attempts.load(Ordering::Relaxed) > 1 })
}

/// What a `200` answer says about the object (read off the async thread).
struct Found {
    terminating: Option<String>,
    only_ours: bool,
    resource_version: String,
    /// kubectl's fields to take over ([`super::adopt::fold_adopted`]).
    fold: Option<String>,
}

impl Found {
    fn read(text: &str, manager: &str) -> Result<Found, String> {
        let live = Live::parse(text)?;
        Ok(Found {
            terminating: super::wait::terminating(&live.object),
            only_ours: only_ours(&live, manager),
            resource_version: live.resource_version().to_string(),
            fold: super::adopt::fold_adopted(&live, manager),
        })
    }
}

/// Applies `body` (the object `id`, not in its kind's LIST; JSON text) without reading it
/// first.
pub(super) async fn apply(t: &KubeTarget, req: &ApplyRequest, res: &Resolved, id: &ObjectRef, body: &str) -> Unlisted {
    let mut params = PatchParams::apply(&req.field_manager);
    if t.opts.force {
        params = params.force();
    }
    let failed = |m: String| Unlisted::Done(ObjectOutcome::with(id.clone(), Action::Failed, m));
    let (text, retried) = match send(t, res, id, &params, body).await {
        Ok(Sent { created: true, .. }) => return Unlisted::Done(ObjectOutcome::new(id.clone(), Action::Created)),
        Ok(Sent { text, retried, .. }) => (text, retried),
        Err(f) if f.conflict() && !t.opts.force => return Unlisted::ReadFirst,
        Err(f) => return failed(f.message),
    };
    let manager = req.field_manager.clone();
    let after = match off_thread_if_large(text.len(), move || Found::read(&text, &manager)).await {
        Ok(found) => found,
        Err(e) => return failed(format!("applied, but the API server's answer cannot be read to tell whether it was adopted: {e}")),
    };
    if retried && after.only_ours {
        return Unlisted::Done(ObjectOutcome::new(id.clone(), Action::Created));
    }
    if let Some(m) = after.terminating {
        return Unlisted::Done(ObjectOutcome::with(id.clone(), Action::Terminating, format!("{m}: recreated once it is gone")));
    }
    if let Some(fields) = after.fold {
        let ns = id.namespace.as_deref();
        let again = match super::adopt::take_over(t, res, ns, &id.name, &req.field_manager, &after.resource_version, &fields).await {
            Ok(()) => send(t, res, id, &params, body).await.map(|_| ()),
            Err(f) => Err(f),
        };
        if let Err(f) = again {
            return failed(format!("taking over the fields kubectl left (managedFields): {}", f.message));
        }
    }
    Unlisted::Done(ObjectOutcome::with(id.clone(), Action::Adopted, adopted_message(&Owner::Foreign)))
}

/// The object's only managed-fields entry is `manager`'s apply: nobody else ever wrote it.
fn only_ours(live: &Live, manager: &str) -> bool {
    let entries = live.entries.as_deref().unwrap_or_default();
    !entries.is_empty() && entries.iter().all(|e| e.manager == manager && e.operation == "Apply")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_only_drover_applied_was_made_by_drover() {
        let entry = |m: &str, op: &str| json!({"manager": m, "operation": op, "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}});
        let ours = json!({"metadata": {"managedFields": [entry("drover", "Apply")]}});
        assert!(only_ours(&Live::from_value(&ours), "drover"));
        let theirs = json!({"metadata": {"managedFields": [entry("drover", "Apply"), entry("kubectl-client-side-apply", "Update")]}});
        assert!(!only_ours(&Live::from_value(&theirs), "drover"));
        assert!(!only_ours(&Live::from_value(&json!({"metadata": {}})), "drover"));
    }
}
