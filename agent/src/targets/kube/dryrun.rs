//! `drover-agent plan` on the kube target: what the apply and the prune would do, asked
//! of the API server without changing anything.
//!
//! Per object, in apply order: read the live object (the ownership rule decides
//! `conflict` as apply does), then the very server-side apply the agent would send, with
//! `dryRun=All`: the API server validates, merges with the other managers' fields and
//! answers the object as it would store it, storing nothing. Its fields against the live
//! object's (without `managedFields`, `resourceVersion`, `generation`) make the diff:
//! none → `unchanged`, some → `update`. A refused dry run is `failed` with the server's
//! message. Two things a dry run cannot check are planned as `create` with a note: an
//! object in a Namespace the same bundle creates (the server would answer NotFound), and
//! a custom resource whose CustomResourceDefinition the same bundle brings.
//!
//! Prune: the same checks as the prune (gone, `drover.dev/prune: disabled`, ownership),
//! without the delete.
//!
//! `--drift report` ([`check_drift`]): the resync compare reads, and only the objects it
//! cannot vouch for get the dry run above (for their drifted fields).

use std::collections::{BTreeSet, HashMap};

use drover_proto::object::ObjectRef;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::apply::desired;
use super::cluster::KubeTarget;
use super::discovery::{ResolveError, Resolved};
use super::owner::{adopted_message, conflict_message, owner, Owner};
use super::prune::verdict;
use super::read;
use crate::diff::diff;
use crate::targets::{ApplyRequest, ObjectPlan, PlanAction, PlannedObject, PruneRequest};

/// Server-owned metadata left out of the comparison.
const VOLATILE: &[&str] = &["managedFields", "resourceVersion", "generation"];

fn comparable(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in VOLATILE {
            m.remove(*f);
        }
    }
    v
}

/// Kinds `(group, kind)` the bundle's own CRDs define.
fn bundle_kinds(req: &ApplyRequest) -> BTreeSet<(String, String)> {
    req.objects()
        .filter(|o| o.id.kind == "CustomResourceDefinition")
        .filter_map(|o| o.value().ok())
        .filter_map(|v| Some((v.pointer("/spec/group")?.as_str()?.to_string(), v.pointer("/spec/names/kind")?.as_str()?.to_string())))
        .collect()
}

/// `--drift report`'s resync of the applied bundle `req`: the resync compare first (one
/// labelled LIST per kind and namespace, [`super::apply::known_unchanged`]); only the
/// objects it cannot vouch for are planned with a dry run, which tells their drifted
/// fields (or that they are unchanged after all: a value the server normalises).
pub(super) async fn check_drift(t: &KubeTarget, req: &ApplyRequest) -> Vec<ObjectPlan> {
    let mut out = Vec::new();
    let none = BTreeSet::new();
    for group in &req.groups {
        let same = super::apply::known_unchanged(t, req, group).await;
        for (obj, same) in group.objects.iter().zip(same) {
            if same {
                out.push(ObjectPlan::with(obj.id.clone(), PlanAction::Unchanged, ""));
                continue;
            }
            let entry = match t.resolver.resolve(&obj.id.api_version, &obj.id.kind).await {
                Ok(res) => plan_one(t, req, obj, &res, &none).await,
                Err(e) => ObjectPlan::with(obj.id.clone(), PlanAction::Failed, e.to_string()),
            };
            out.push(entry);
        }
    }
    out
}

/// What the apply of `req` would do, per object.
pub(super) async fn plan_apply(t: &KubeTarget, req: &ApplyRequest) -> Vec<ObjectPlan> {
    let crd_kinds = bundle_kinds(req);
    let mut resolved: HashMap<(String, String), Result<Resolved, ResolveError>> = HashMap::new();
    let mut new_namespaces: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for obj in req.objects() {
        let key = (obj.id.api_version.clone(), obj.id.kind.clone());
        if !resolved.contains_key(&key) {
            resolved.insert(key.clone(), t.resolver.resolve(&obj.id.api_version, &obj.id.kind).await);
        }
        let entry = match &resolved[&key] {
            Ok(res) => plan_one(t, req, obj, res, &new_namespaces).await,
            Err(ResolveError::Unknown(_)) if crd_kinds.contains(&(obj.id.group().to_string(), obj.id.kind.clone())) => ObjectPlan::with(
                obj.id.clone(),
                PlanAction::Create,
                "its kind comes with this bundle's CustomResourceDefinition: not checked by the API server",
            ),
            Err(e) => ObjectPlan::with(obj.id.clone(), PlanAction::Failed, e.to_string()),
        };
        if obj.id.kind == "Namespace" && obj.id.group().is_empty() && entry.action == PlanAction::Create {
            new_namespaces.insert(obj.id.name.clone());
        }
        out.push(entry);
    }
    out
}

async fn plan_one(t: &KubeTarget, req: &ApplyRequest, obj: &PlannedObject, res: &Resolved, new_namespaces: &BTreeSet<String>) -> ObjectPlan {
    let id = &obj.id;
    let fail = |m: String| ObjectPlan::with(id.clone(), PlanAction::Failed, m);
    if res.namespaced && id.namespace.is_none() {
        return fail(format!("{} is namespaced but the object has no metadata.namespace", id.kind));
    }
    if res.namespaced && id.namespace.as_ref().is_some_and(|ns| new_namespaces.contains(ns)) {
        return ObjectPlan::with(id.clone(), PlanAction::Create, "its Namespace is created by this bundle: not checked by the API server");
    }
    let ns = id.namespace.as_deref();
    let live = match read::get(t, res, ns, &id.name).await {
        Ok(o) => o,
        Err(f) => return fail(format!("reading the live object: {f}")),
    };
    let who = live.as_ref().map(|o| owner(&read::meta(&o.object), &req.source));
    if let Some(Owner::Other(other)) = &who {
        return ObjectPlan::with(id.clone(), PlanAction::Conflict, conflict_message(other));
    }
    let body = match obj.value() {
        Ok(v) => desired(v, &req.source, res.namespaced),
        Err(e) => return fail(e),
    };
    let mut params = PatchParams::apply(&req.field_manager).dry_run();
    if t.opts.force {
        params = params.force();
    }
    let after = match read::patch_read(t, res, ns, &id.name, &params, &Patch::Apply(&body)).await {
        Ok(a) => a,
        Err(f) => return fail(format!("the API server refused the dry run: {}", f.message)),
    };
    let Some(live) = live else {
        return ObjectPlan::with(id.clone(), PlanAction::Create, "");
    };
    if let Some(why) = live.incomplete.as_ref().or(after.incomplete.as_ref()) {
        return fail(format!("its changes cannot be shown: {why}"));
    }
    let changes = diff(&comparable(live.object), &comparable(after.object));
    let message = match &who {
        Some(w @ (Owner::Foreign | Owner::Unrecorded)) => adopted_message(w),
        _ => String::new(),
    };
    let action = if changes.is_empty() { PlanAction::Unchanged } else { PlanAction::Update };
    ObjectPlan { object: id.clone(), action, message, diff: changes }
}

/// What the prune of `req` would do, per object.
pub(super) async fn plan_prune(t: &KubeTarget, req: &PruneRequest) -> Vec<ObjectPlan> {
    let mut out = Vec::new();
    for id in &req.delete {
        out.push(prune_one(t, id, &req.source).await);
    }
    out
}

async fn prune_one(t: &KubeTarget, id: &ObjectRef, source: &str) -> ObjectPlan {
    match verdict(t, id, source).await {
        Ok(_) => ObjectPlan::with(id.clone(), PlanAction::Prune, ""),
        Err((_, m)) if m.starts_with("already gone") => ObjectPlan::with(id.clone(), PlanAction::Unchanged, m),
        Err((crate::targets::Action::Failed, m)) => ObjectPlan::with(id.clone(), PlanAction::Failed, m),
        Err((_, m)) => ObjectPlan::with(id.clone(), PlanAction::PruneRefused, m),
    }
}
