//! Deleting what the new bundle no longer holds. Per object: read it, then
//!
//! - gone already (or its kind is no longer served): Kept, "already gone";
//! - `drover.dev/prune: disabled`: Kept;
//! - not this source's by the ownership rule ([`super::owner`]): no
//!   `app.kubernetes.io/managed-by: drover` label, or a `drover.dev/source` naming another
//!   source (or none): Refused;
//! - otherwise deleted with background propagation and a UID precondition (an object
//!   re-created meanwhile is not touched).
//!
//! In delete order ([`crate::order::DeletePhase`]): custom resources and other objects
//! first, then CustomResourceDefinitions, then Namespaces (deleting those takes everything
//! inside with them).

use drover_proto::media;
use drover_proto::object::ObjectRef;
use futures::stream::{self, StreamExt};
use kube::api::{DeleteParams, Preconditions};

use super::discovery::{ResolveError, Resolved};
use super::owner::{owner, prune_refusal};
use super::read;
use super::cluster::KubeTarget;
use crate::order::{delete_phase, DeletePhase};
use crate::targets::{Action, ObjectOutcome, PruneReport, PruneRequest};

/// Deletes the requested objects, in phases.
pub(super) async fn prune(t: &KubeTarget, req: &PruneRequest) -> PruneReport {
    let mut outcomes = Vec::new();
    for p in DeletePhase::ALL {
        let futs = req.delete.iter().filter(|o| delete_phase(o) == p).map(|o| prune_one(t, o, &req.source));
        let done: Vec<ObjectOutcome> = stream::iter(futs).buffered(t.opts.concurrency.max(1)).collect().await;
        outcomes.extend(done);
    }
    PruneReport { outcomes }
}

/// The object prune may delete (its API and live UID), or the outcome that says why not:
/// gone already, `drover.dev/prune: disabled`, not this source's, unreadable.
pub(super) async fn verdict(t: &KubeTarget, id: &ObjectRef, source: &str) -> Result<(Resolved, Option<String>), (Action, String)> {
    let outcome = |a: Action, m: String| (a, m);
    let res = match t.resolver.resolve(&id.api_version, &id.kind).await {
        Ok(r) => r,
        Err(ResolveError::Unknown(m)) => return Err(outcome(Action::Kept, format!("already gone: {m}"))),
        Err(e) => return Err(outcome(Action::Failed, e.to_string())),
    };
    // Read whole (any depth a server stores); one that cannot be read is not deleted.
    let live = match read::get(t, &res, id.namespace.as_deref(), &id.name).await {
        Ok(Some(o)) => read::meta(&o.object),
        Ok(None) => return Err(outcome(Action::Kept, "already gone".into())),
        Err(f) => return Err(outcome(Action::Failed, format!("reading before delete: {f}"))),
    };
    if live.annotations.as_ref().and_then(|a| a.get(media::ANN_OBJ_PRUNE)).map(String::as_str) == Some("disabled") {
        return Err(outcome(Action::Kept, format!("annotated {}: disabled", media::ANN_OBJ_PRUNE)));
    }
    if let Some(why) = prune_refusal(&owner(&live, source)) {
        return Err(outcome(Action::Refused, why));
    }
    Ok((res, live.uid.clone()))
}

async fn prune_one(t: &KubeTarget, id: &ObjectRef, source: &str) -> ObjectOutcome {
    let outcome = |a: Action, m: String| ObjectOutcome::with(id.clone(), a, m);
    let (res, uid) = match verdict(t, id, source).await {
        Ok(v) => v,
        Err((action, message)) => return outcome(action, message),
    };
    let mut params = DeleteParams::background();
    params.preconditions = Some(Preconditions { uid, resource_version: None });
    match read::delete(t, &res, id.namespace.as_deref(), &id.name, &params).await {
        Ok(_) => ObjectOutcome::new(id.clone(), Action::Deleted),
        Err(f) if f.not_found() => outcome(Action::Kept, "already gone".into()),
        Err(f) => outcome(Action::Failed, f.message),
    }
}
