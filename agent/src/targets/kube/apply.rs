//! Server-side apply of the order groups: each object gets drover's label and
//! annotations, is applied with `Patch::Apply` under the request's field manager (forced
//! unless `--no-force`), at most `concurrency` at a time inside a group. The live object
//! is read first and the ownership rule ([`super::owner`]) decides: another drover
//! source's object is a `conflict` (not applied); one drover did not manage is `adopted`. Groups run in
//! order; after a group holding CRDs the target waits until they are Established and drops
//! their API group from the discovery cache so the next groups can use the new kinds.
//!
//! Change detection (drift): the object's `resourceVersion` is read before the apply and
//! compared with the one the apply returns. The API server does not write (and does not
//! bump `resourceVersion`) when an apply changes nothing, so a new version means the
//! apply changed the object: `Configured` (on a resync of an unchanged bundle, a drift
//! correction). A missing object is `Created`. The versions come from one LIST (label
//! `app.kubernetes.io/managed-by=drover`) per kind and namespace holding at least
//! [`LIST_THRESHOLD`] objects of the group, and from a GET for the rest (and for objects
//! not in that list: new, or not labelled yet).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use drover_proto::media;
use futures::stream::{self, StreamExt};
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams};
use serde_json::{json, Value};

use super::discovery::{ResolveError, Resolved};
use super::owner::{adopted_message, conflict_message, owner, Owner};
use super::retry::with_retry;
use super::wait::{check_object, Check};
use super::cluster::KubeTarget;
use crate::targets::{Action, ApplyReport, ApplyRequest, ObjectOutcome, OrderGroup, PlannedObject};

/// Metadata the API server owns: never sent in an apply body.
const SERVER_FIELDS: &[&str] = &["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp"];

type Resolutions = HashMap<(String, String), Result<Resolved, ResolveError>>;

/// What the apply needs to know about a live object: its version and its owner.
#[derive(Debug, Clone)]
struct Live {
    resource_version: String,
    owner: Owner,
}

impl Live {
    fn of(meta: &ObjectMeta, source: &str) -> Live {
        Live { resource_version: meta.resource_version.clone().unwrap_or_default(), owner: owner(meta, source) }
    }
}

/// The live state by name of drover's objects, per (apiVersion, kind, namespace).
type Known = HashMap<(String, String, Option<String>), HashMap<String, Live>>;

/// Objects of one kind and namespace in a group from which one LIST replaces their GETs.
pub const LIST_THRESHOLD: usize = 4;

fn known_key(o: &PlannedObject, res: &Resolved) -> (String, String, Option<String>) {
    (o.id.api_version.clone(), o.id.kind.clone(), if res.namespaced { o.id.namespace.clone() } else { None })
}

/// One labelled LIST per (kind, namespace) with enough objects in the group; a failed
/// LIST just leaves its objects to individual GETs.
async fn list_known(t: &KubeTarget, req: &ApplyRequest, group: &OrderGroup, resolved: &Resolutions) -> Known {
    let mut counts: HashMap<(String, String, Option<String>), (usize, &Resolved)> = HashMap::new();
    for o in &group.objects {
        if let Some(Ok(res)) = resolved.get(&(o.id.api_version.clone(), o.id.kind.clone())) {
            counts.entry(known_key(o, res)).or_insert((0, res)).0 += 1;
        }
    }
    let selector = format!("{}={}", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE);
    let mut known = Known::new();
    for (key, (n, res)) in counts {
        if n < LIST_THRESHOLD || (res.namespaced && key.2.is_none()) {
            continue;
        }
        let api = res.api(&t.client, key.2.as_deref());
        let params = ListParams::default().labels(&selector);
        match with_retry(&t.opts.retry, || api.list(&params)).await {
            Ok(list) => {
                let names = list.items.into_iter().filter_map(|o| Some((o.metadata.name.clone()?, Live::of(&o.metadata, &req.source)))).collect();
                known.insert(key, names);
            }
            Err(f) => tracing::debug!(kind = %key.1, error = %f, "LIST before apply failed; reading objects one by one"),
        }
    }
    known
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
        let mut results = apply_group(t, req, group).await;
        if !results.iter().any(|o| o.action == Action::Failed) {
            establish_crds(t, group, &mut results).await;
        }
        failed = results.iter().any(|o| o.action == Action::Failed);
        tracing::info!(
            stage = ?group.stage,
            objects = group.objects.len(),
            changed = results.iter().filter(|o| o.action.changed()).count(),
            failed = results.iter().filter(|o| o.action == Action::Failed).count(),
            ms = started.elapsed().as_millis() as u64,
            "applied order group"
        );
        outcomes.extend(results);
    }
    ApplyReport { outcomes }
}

async fn apply_group(t: &KubeTarget, req: &ApplyRequest, group: &OrderGroup) -> Vec<ObjectOutcome> {
    let mut resolved: Resolutions = HashMap::new();
    for o in &group.objects {
        if let std::collections::hash_map::Entry::Vacant(slot) = resolved.entry((o.id.api_version.clone(), o.id.kind.clone())) {
            slot.insert(t.resolver.resolve(&o.id.api_version, &o.id.kind).await);
        }
    }
    let known = list_known(t, req, group, &resolved).await;
    let (resolved, known) = (&resolved, &known);
    let futs: Vec<_> = group.objects.iter().map(|o| apply_one(t, req, o, resolved, known)).collect();
    stream::iter(futs).buffered(t.opts.concurrency.max(1)).collect().await
}

async fn apply_one(t: &KubeTarget, req: &ApplyRequest, obj: &PlannedObject, resolved: &Resolutions, known: &Known) -> ObjectOutcome {
    let id = &obj.id;
    let fail = |m: String| ObjectOutcome::with(id.clone(), Action::Failed, m);
    let res = match resolved.get(&(id.api_version.clone(), id.kind.clone())) {
        Some(Ok(r)) => r,
        Some(Err(e)) => return fail(e.to_string()),
        None => return fail("not resolved".into()),
    };
    if res.namespaced && id.namespace.is_none() {
        return fail(format!("{} is namespaced but the object has no metadata.namespace", id.kind));
    }
    let body = desired(&obj.value, req, res.namespaced);
    let api = res.api(&t.client, id.namespace.as_deref());
    let listed = known.get(&known_key(obj, res)).and_then(|m| m.get(&id.name)).cloned();
    let before = match listed {
        Some(live) => Some(live),
        None => match with_retry(&t.opts.retry, || api.get_opt(&id.name)).await {
            Ok(o) => o.map(|o| Live::of(&o.metadata, &req.source)),
            Err(f) => return fail(format!("reading before apply: {f}")),
        },
    };
    if let Some(Live { owner: Owner::Other(other), .. }) = &before {
        return ObjectOutcome::with(id.clone(), Action::Conflict, conflict_message(other));
    }
    let mut params = PatchParams::apply(&req.field_manager);
    if t.opts.force {
        params = params.force();
    }
    let patch = Patch::Apply(&body);
    match with_retry(&t.opts.retry, || api.patch(&id.name, &params, &patch)).await {
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
        Err(f) if f.conflict() && !t.opts.force => fail(format!(
            "{f} (another field manager owns these fields; drover runs with --no-force, so it does not take them over: remove the other manager's changes, or drop --no-force)"
        )),
        Err(f) => fail(f.message),
    }
}

/// The apply body: the bundle's object with drover's label and annotations, without
/// server-owned metadata (and without a namespace on a cluster-scoped kind).
pub fn desired(value: &Value, req: &ApplyRequest, namespaced: bool) -> Value {
    let mut v = value.clone();
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
    for (key, k, val) in [
        ("labels", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE),
        ("annotations", media::ANN_OBJ_SOURCE, req.source.as_str()),
        ("annotations", media::ANN_OBJ_DIGEST, req.digest.as_str()),
    ] {
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
        if let Some(g) = group.objects[i].value.pointer("/spec/group").and_then(Value::as_str) {
            t.resolver.invalidate_group(g).await;
        }
    }
}

fn is_crd(o: &PlannedObject) -> bool {
    o.id.kind == "CustomResourceDefinition" && o.id.group() == "apiextensions.k8s.io"
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn desired_injects_ownership_and_strips_server_fields() {
        let req = ApplyRequest { source: "r.example/x:prod".into(), digest: "sha256:ab".into(), sequence: 1, field_manager: "drover".into(), groups: vec![] };
        let v = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "namespace": "zz", "resourceVersion": "9", "labels": {"x": "y"}}});
        let d = desired(&Arc::new(v), &req, false);
        assert_eq!(d["metadata"]["labels"], json!({"x": "y", "app.kubernetes.io/managed-by": "drover"}));
        assert_eq!(d["metadata"]["annotations"]["drover.dev/source"], "r.example/x:prod");
        assert_eq!(d["metadata"]["annotations"]["drover.dev/digest"], "sha256:ab");
        assert!(d["metadata"].get("resourceVersion").is_none());
        assert!(d["metadata"].get("namespace").is_none());
    }
}
