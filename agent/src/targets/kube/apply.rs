//! Server-side apply of the order groups: each object gets drover's label and
//! annotations, is applied with `Patch::Apply` under the request's field manager (forced
//! unless `--no-force`), at most `concurrency` at a time inside a group. The live object
//! is read first and the ownership rule ([`super::owner`]) decides: another drover
//! source's object is a `conflict` (not applied); one drover did not manage is `adopted`. Groups run in
//! order; after a group holding CRDs the target waits until they are Established and drops
//! their API group from the discovery cache so the next groups can use the new kinds.
//!
//! Reading before the apply: one LIST (label `app.kubernetes.io/managed-by=drover`, paged
//! by [`super::list::PAGE`] with `limit`/`continue`, parsed one item at a time) per kind
//! and namespace of the group. An object not in a LIST that completed is new or not
//! drover's: it is applied without being read ([`super::unlisted`]: the apply's `201`
//! says it was created), so a first apply of N objects is N PATCHes and the LISTs; only
//! an object whose LIST failed is read with a GET. Each live object of this source is compared with the apply body
//! ([`super::compare`]): when a forced apply by drover's field manager would change
//! neither the object nor anyone's fields, the object is `unchanged` and not sent at
//! all, so a resync of an unchanged cluster writes nothing, and a new bundle writes only
//! the objects whose content changed (objects do not carry the bundle digest). An object
//! being deleted is `terminating` and not sent. An object holding fields kubectl left
//! (adoption) first gets them folded into drover's own entry ([`adopt::fold_adopted`]).
//!
//! Change detection of what is sent: the `resourceVersion` read before is compared with
//! the one the apply returns. The API server does not write (and does not bump
//! `resourceVersion`) when an apply changes nothing, so a new version means the apply
//! changed the object: `Configured` (on a resync of an unchanged bundle, a drift
//! correction); a missing object is `Created`; an object the compare could not vouch for
//! that the server then left as it was is `Unchanged`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use drover_proto::media;
use futures::stream::{self, StreamExt};
use kube::api::{Patch, PatchParams};
use serde_json::{json, Value};

use super::adopt;
use super::compare;
use super::discovery::{ResolveError, Resolved};
use super::schemas::{self, Schemas};
use super::list;
use super::unlisted::{self, Unlisted};
use super::owner::{adopted_message, conflict_message, owner_of, Owner};
use super::retry::with_retry;
use super::wait::{check_object, Check};
use super::cluster::KubeTarget;
use crate::targets::{Action, ApplyReport, ApplyRequest, ObjectOutcome, OrderGroup, PlannedObject};

/// Metadata the API server owns: never sent in an apply body.
const SERVER_FIELDS: &[&str] = &["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp"];

type Resolutions = HashMap<(String, String), Result<Resolved, ResolveError>>;

/// What the apply needs to know about a live object: its version, its owner, whether
/// applying the body would change nothing, whether it is being deleted, and the managed
/// fields to write first when drover takes over what kubectl left ([`adopt::fold_adopted`]).
#[derive(Debug, Clone)]
struct Live {
    resource_version: String,
    owner: Owner,
    unchanged: bool,
    terminating: Option<String>,
    fold: Option<Value>,
}

impl Live {
    /// Reads `live` (as the API server returns it) against the apply `body` of the same
    /// object.
    fn read(live: &Value, body: &Value, schema: &drover_ssa::Schema, req: &ApplyRequest) -> Live {
        let owner = owner_of(live, &req.source);
        let unchanged = owner == Owner::This && compare::unchanged(schema, body, live, &req.field_manager);
        let resource_version = live.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        let terminating = super::wait::terminating(live).map(|m| format!("{m}: not applied; recreated once it is gone"));
        let fold = (!matches!(owner, Owner::Other(_))).then(|| adopt::fold_adopted(live, &req.field_manager)).flatten();
        Live { resource_version, owner, unchanged, terminating, fold }
    }
}

/// (apiVersion, kind, namespace): what one LIST reads.
type ListKey = (String, String, Option<String>);

/// What one LIST found: the live state by name of the group's objects in it, and whether
/// it read every page (an object not in a complete LIST is not drover's, or new).
#[derive(Default)]
struct Listed {
    live: HashMap<String, Live>,
    complete: bool,
}

/// The LISTs of a group, per (apiVersion, kind, namespace).
type Known = HashMap<ListKey, Listed>;

fn known_key(o: &PlannedObject, res: &Resolved) -> ListKey {
    (o.id.api_version.clone(), o.id.kind.clone(), if res.namespaced { o.id.namespace.clone() } else { None })
}

/// One labelled LIST (paged) per (kind, namespace) of the group, at most `concurrency`
/// at a time. Only the verdicts on the group's objects are kept, page by page. A LIST
/// that fails leaves the objects it did not find to individual GETs.
async fn list_known(t: &KubeTarget, req: &ApplyRequest, group: &OrderGroup, resolved: &Resolutions, schemas: &Schemas) -> Known {
    let mut wanted: HashMap<ListKey, (&Resolved, HashMap<&str, &PlannedObject>)> = HashMap::new();
    for o in &group.objects {
        if let Some(Ok(res)) = resolved.get(&(o.id.api_version.clone(), o.id.kind.clone())) {
            if !(res.namespaced && o.id.namespace.is_none()) {
                wanted.entry(known_key(o, res)).or_insert_with(|| (res, HashMap::new())).1.insert(o.id.name.as_str(), o);
            }
        }
    }
    let futs = wanted.into_iter().map(|(key, (res, objects))| {
        let schema = schemas::of(schemas, &key.0, &key.1);
        list_one(t, req, key, res, objects, schema)
    });
    stream::iter(futs).buffer_unordered(t.opts.concurrency.max(1)).collect().await
}

async fn list_one(
    t: &KubeTarget,
    req: &ApplyRequest,
    key: ListKey,
    res: &Resolved,
    objects: HashMap<&str, &PlannedObject>,
    schema: drover_ssa::Schema,
) -> (ListKey, Listed) {
    let selector = format!("{}={}", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE);
    let mut found = HashMap::new();
    let verdict = |live: Value| {
        let Some(o) = live.pointer("/metadata/name").and_then(Value::as_str).and_then(|n| objects.get(n)) else { return };
        // The desired object is parsed only now, for the compare, and dropped after it.
        if let Ok(value) = o.value() {
            found.insert(o.id.name.clone(), Live::read(&live, &desired(value, req, res.namespaced), &schema, req));
        }
    };
    let complete = match list::for_each(t, res, key.2.as_deref(), &selector, verdict).await {
        Ok(()) => true,
        Err(f) => {
            tracing::debug!(kind = %key.1, error = %f, "LIST before apply failed; reading the rest one by one");
            false
        }
    };
    (key, Listed { live: found, complete })
}

/// Applies every group in order; stops after the first group with a failure.
pub(super) async fn apply(t: &KubeTarget, req: &ApplyRequest) -> ApplyReport {
    let mut outcomes = Vec::new();
    let mut failed = false;
    for group in &req.groups {
        if failed {
            outcomes.extend(group.objects.iter().map(|o| ObjectOutcome::with(o.id.clone(), Action::Skipped, "an earlier order group failed")));
            continue;
        }
        let started = Instant::now();
        let (mut results, sent) = apply_group(t, req, group).await;
        if !results.iter().any(|o| o.action == Action::Failed) {
            establish_crds(t, group, &mut results).await;
        }
        failed = results.iter().any(|o| o.action == Action::Failed);
        tracing::info!(
            stage = ?group.stage,
            objects = group.objects.len(),
            sent,
            changed = results.iter().filter(|o| o.action.changed()).count(),
            failed = results.iter().filter(|o| o.action == Action::Failed).count(),
            ms = started.elapsed().as_millis() as u64,
            "applied order group"
        );
        outcomes.extend(results);
    }
    ApplyReport { outcomes, notes: Vec::new() }
}

/// The kinds of `group`, resolved (discovery), and their schemas.
async fn resolve_group(t: &KubeTarget, req: &ApplyRequest, group: &OrderGroup) -> (Resolutions, Schemas) {
    let mut resolved: Resolutions = HashMap::new();
    for o in &group.objects {
        if let std::collections::hash_map::Entry::Vacant(slot) = resolved.entry((o.id.api_version.clone(), o.id.kind.clone())) {
            slot.insert(t.resolver.resolve(&o.id.api_version, &o.id.kind).await);
        }
    }
    let schemas = schemas::for_group(t, req, group, &resolved).await;
    (resolved, schemas)
}

/// Per object of `group`, in order: true when the resync compare vouches that applying it
/// would change nothing (read with the same LISTs as before an apply; nothing sent).
pub(super) async fn known_unchanged(t: &KubeTarget, req: &ApplyRequest, group: &OrderGroup) -> Vec<bool> {
    let (resolved, schemas) = resolve_group(t, req, group).await;
    let known = list_known(t, req, group, &resolved, &schemas).await;
    group
        .objects
        .iter()
        .map(|o| match resolved.get(&(o.id.api_version.clone(), o.id.kind.clone())) {
            Some(Ok(res)) => known.get(&known_key(o, res)).and_then(|m| m.live.get(&o.id.name)).is_some_and(|l| l.unchanged),
            _ => false,
        })
        .collect()
}

/// Applies one group; the outcomes and how many applies were sent.
async fn apply_group(t: &KubeTarget, req: &ApplyRequest, group: &OrderGroup) -> (Vec<ObjectOutcome>, usize) {
    let (resolved, schemas) = resolve_group(t, req, group).await;
    let known = list_known(t, req, group, &resolved, &schemas).await;
    crate::memory::mark("listed");
    let (resolved, known, schemas) = (&resolved, &known, &schemas);
    // Futures are made as the stream needs them: at most `concurrency` exist at a time
    // (10,000 of them made up front took ~10 MiB).
    let futs = group.objects.iter().map(|o| apply_one(t, req, o, resolved, known, schemas));
    let results: Vec<(ObjectOutcome, bool)> = stream::iter(futs).buffered(t.opts.concurrency.max(1)).collect().await;
    let sent = results.iter().filter(|(_, sent)| *sent).count();
    (results.into_iter().map(|(o, _)| o).collect(), sent)
}

/// Applies one object unless the compare found it unchanged; the outcome and whether
/// an apply was sent.
async fn apply_one(t: &KubeTarget, req: &ApplyRequest, obj: &PlannedObject, resolved: &Resolutions, known: &Known, schemas: &Schemas) -> (ObjectOutcome, bool) {
    let id = &obj.id;
    let fail = |m: String| (ObjectOutcome::with(id.clone(), Action::Failed, m), false);
    let res = match resolved.get(&(id.api_version.clone(), id.kind.clone())) {
        Some(Ok(r)) => r,
        Some(Err(e)) => return fail(e.to_string()),
        None => return fail("not resolved".into()),
    };
    if res.namespaced && id.namespace.is_none() {
        return fail(format!("{} is namespaced but the object has no metadata.namespace", id.kind));
    }
    let body = match obj.value() {
        Ok(v) => desired(v, req, res.namespaced),
        Err(e) => return fail(e),
    };
    let api = res.api(&t.client, id.namespace.as_deref());
    let list = known.get(&known_key(obj, res));
    let listed = list.and_then(|m| m.live.get(&id.name)).cloned();
    if listed.is_none() && list.is_some_and(|l| l.complete) {
        match unlisted::apply(t, req, res, id, &body).await {
            Unlisted::Done(outcome) => return (outcome, true),
            Unlisted::ReadFirst => {}
        }
    }
    let before = match listed {
        Some(live) => Some(live),
        None => match with_retry(&t.opts.retry, || api.get_opt(&id.name)).await {
            Ok(o) => o.and_then(|o| serde_json::to_value(o).ok()).map(|o| {
                let schema = schemas::of(schemas, &id.api_version, &id.kind);
                Live::read(&o, &body, &schema, req)
            }),
            Err(f) => return fail(format!("reading before apply: {f}")),
        },
    };
    match &before {
        Some(Live { owner: Owner::Other(other), .. }) => return (ObjectOutcome::with(id.clone(), Action::Conflict, conflict_message(other)), false),
        Some(Live { terminating: Some(m), .. }) => return (ObjectOutcome::with(id.clone(), Action::Terminating, m.clone()), false),
        Some(Live { unchanged: true, .. }) => return (ObjectOutcome::new(id.clone(), Action::Unchanged), false),
        _ => {}
    }
    if let Some(fields) = before.as_ref().and_then(|l| l.fold.clone()) {
        let rv = before.as_ref().map(|l| l.resource_version.clone()).unwrap_or_default();
        let fold = json!({"metadata": {"resourceVersion": rv, "managedFields": fields}});
        let params = PatchParams { field_manager: Some(req.field_manager.clone()), ..Default::default() };
        let fold = Patch::Merge(&fold);
        if let Err(f) = with_retry(&t.opts.retry, || api.patch(&id.name, &params, &fold)).await {
            return (ObjectOutcome::with(id.clone(), Action::Failed, format!("taking over the fields kubectl left (managedFields): {}", f.message)), true);
        }
    }
    let mut params = PatchParams::apply(&req.field_manager);
    if t.opts.force {
        params = params.force();
    }
    let patch = Patch::Apply(&body);
    let outcome = match with_retry(&t.opts.retry, || api.patch(&id.name, &params, &patch)).await {
        Ok(after) => match before {
            None => ObjectOutcome::new(id.clone(), Action::Created),
            Some(Live { owner: was @ (Owner::Foreign | Owner::Unrecorded), .. }) => {
                ObjectOutcome::with(id.clone(), Action::Adopted, adopted_message(&was))
            }
            Some(live) if Some(live.resource_version.as_str()) != after.metadata.resource_version.as_deref() => {
                ObjectOutcome::new(id.clone(), Action::Configured)
            }
            Some(_) => ObjectOutcome::new(id.clone(), Action::Unchanged),
        },
        Err(f) if f.conflict() && !t.opts.force => ObjectOutcome::with(id.clone(), Action::Failed, format!(
            "{f} (another field manager owns these fields; drover runs with --no-force, so it does not take them over: remove the other manager's changes, or drop --no-force)"
        )),
        Err(f) => ObjectOutcome::with(id.clone(), Action::Failed, f.message),
    };
    (outcome, true)
}

/// The apply body: the bundle's object with drover's label and source annotation, without
/// server-owned metadata (and without a namespace on a cluster-scoped kind). The bundle
/// digest is not written on objects: a new bundle then writes only the objects whose
/// content changed (the digest lives in the state record, docs/kubernetes.md).
pub fn desired(value: Value, req: &ApplyRequest, namespaced: bool) -> Value {
    let mut v = value;
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    let meta = v["metadata"].as_object_mut().expect("metadata is an object");
    for f in SERVER_FIELDS {
        meta.remove(*f);
    }
    if !namespaced {
        meta.remove("namespace");
    }
    for (key, k, val) in [("labels", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE), ("annotations", media::ANN_OBJ_SOURCE, req.source.as_str())] {
        let m = meta.entry(key).or_insert_with(|| json!({}));
        if !m.is_object() {
            *m = json!({});
        }
        m[k] = json!(val);
    }
    v
}

/// After a group holding CRDs: waits (bounded by `crd_timeout`) until each is Established,
/// then refreshes discovery for their API groups. A CRD that does not get there fails.
async fn establish_crds(t: &KubeTarget, group: &OrderGroup, results: &mut [ObjectOutcome]) {
    let crds: Vec<usize> = group.objects.iter().enumerate().filter(|(_, o)| is_crd(o)).map(|(i, _)| i).collect();
    if crds.is_empty() {
        return;
    }
    let deadline = Instant::now() + t.opts.crd_timeout;
    let mut pending = crds.clone();
    let mut last: HashMap<usize, String> = HashMap::new();
    let mut pause = Duration::from_millis(100);
    loop {
        let mut still = Vec::new();
        for &i in &pending {
            let o = &group.objects[i];
            match t.get_value(&o.id).await {
                Ok(Some(v)) => match check_object("apiextensions.k8s.io", "CustomResourceDefinition", &v) {
                    Check::Ready => {}
                    Check::Pending(m) => {
                        last.insert(i, m);
                        still.push(i);
                    }
                    Check::Failed(m) => {
                        results[i] = ObjectOutcome::with(o.id.clone(), Action::Failed, format!("applied but not Established: {m}"));
                    }
                },
                Ok(None) => {
                    last.insert(i, "not found after apply".into());
                    still.push(i);
                }
                Err(m) => {
                    last.insert(i, m);
                    still.push(i);
                }
            }
        }
        pending = still;
        if pending.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    for i in pending {
        let why = last.remove(&i).unwrap_or_default();
        results[i] = ObjectOutcome::with(
            group.objects[i].id.clone(),
            Action::Failed,
            format!("applied but not Established after {}: {why}", humantime::format_duration(t.opts.crd_timeout)),
        );
    }
    for &i in &crds {
        if let Some(g) = group.objects[i].value().ok().and_then(|v| v.pointer("/spec/group").and_then(Value::as_str).map(str::to_string)) {
            t.resolver.invalidate_group(&g).await;
        }
    }
}

fn is_crd(o: &PlannedObject) -> bool {
    o.id.kind == "CustomResourceDefinition" && o.id.group() == "apiextensions.k8s.io"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desired_injects_ownership_and_strips_server_fields() {
        let req = ApplyRequest { source: "r.example/x:prod".into(), digest: "sha256:ab".into(), sequence: 1, field_manager: "drover".into(), groups: vec![] };
        let v = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "namespace": "zz", "resourceVersion": "9", "labels": {"x": "y"}}});
        let d = desired(v, &req, false);
        assert_eq!(d["metadata"]["labels"], json!({"x": "y", "app.kubernetes.io/managed-by": "drover"}));
        assert_eq!(d["metadata"]["annotations"]["drover.dev/source"], "r.example/x:prod");
        assert!(d["metadata"]["annotations"].get("drover.dev/digest").is_none(), "a new digest alone must not change objects");
        assert!(d["metadata"].get("resourceVersion").is_none());
        assert!(d["metadata"].get("namespace").is_none());
    }
}
