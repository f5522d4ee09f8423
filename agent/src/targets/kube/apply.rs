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
use kube::api::PatchParams;
use serde_json::{json, Value};

use super::adopt;
use super::compare;
use super::discovery::{ResolveError, Resolved};
use super::schemas::{self, Schemas};
use super::list;
use super::unlisted::{self, Unlisted};
use super::owner::{adopted_message, conflict_message, owner_of, Owner};
use super::read;
use super::wait::{check_object, Check};
use super::cluster::KubeTarget;
use crate::targets::{Action, ApplyReport, ApplyRequest, ObjectOutcome, OrderGroup, PlannedObject};

/// Metadata the API server owns: never sent in an apply body.
const SERVER_FIELDS: &[&str] = &["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp"];

type Resolutions = HashMap<(String, String), Result<Resolved, ResolveError>>;

/// What the apply needs to know about a live object: its version, its owner, whether
/// applying the body would change nothing (or why that cannot be told), whether it is
/// being deleted, and the managed fields to write first when drover takes over what
/// kubectl left ([`adopt::fold_adopted`]).
#[derive(Debug, Clone)]
struct Live {
    resource_version: String,
    owner: Owner,
    unchanged: bool,
    undecided: Option<String>,
    terminating: Option<String>,
    /// The managedFields to write first, as JSON text (an entry may nest 10,000 deep).
    fold: Option<String>,
}

/// A read that holds more than this (estimated) is compared while no other large one is:
/// the compare's peak is a few times the read, and `concurrency` objects are compared at
/// once (eight hostile 8 MiB objects at once would not fit the agent's 64 MiB).
const LARGE: usize = 1 << 20;

static LARGE_COMPARE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What the compare of one object needs, owned (it runs on a blocking thread).
#[derive(Clone)]
struct Judge {
    schema: drover_ssa::Schema,
    source: String,
    field_manager: String,
    namespaced: bool,
}

impl Judge {
    fn new(schema: drover_ssa::Schema, req: &ApplyRequest, namespaced: bool) -> Judge {
        Judge { schema, source: req.source.clone(), field_manager: req.field_manager.clone(), namespaced }
    }

    /// Reads `live` (as the API server returned it) against the apply `body` of the same
    /// object (CPU: call it off the async thread; `live` is taken by the compare).
    fn read(&self, live: drover_ssa::live::Live, body: &Value) -> Live {
        let owner = owner_of(&live.object, &self.source);
        let terminating = super::wait::terminating(&live.object).map(|m| format!("{m}: not applied; recreated once it is gone"));
        let fold = (!matches!(owner, Owner::Other(_))).then(|| adopt::fold_adopted(&live, &self.field_manager)).flatten();
        let resource_version = live.resource_version().to_string();
        let change = (owner == Owner::This).then(|| {
            // A large object's compare holds several times its read: one at a time.
            let _one = (live.heap > LARGE).then(|| LARGE_COMPARE.lock().unwrap_or_else(|e| e.into_inner()));
            compare::verdict(&self.schema, body, live, &self.field_manager)
        });
        Live {
            resource_version,
            owner,
            unchanged: change.as_ref().is_some_and(|c| c.is_none()),
            undecided: change.and_then(|c| c.unknown),
            terminating,
            fold,
        }
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
        let judge = Judge::new(schemas::of(schemas, &key.0, &key.1), req, res.namespaced);
        let objects = objects.into_iter().map(|(n, o)| (n.to_string(), o.clone())).collect();
        list_one(t, key, res, objects, judge)
    });
    stream::iter(futs).buffer_unordered(t.opts.concurrency.max(1)).collect().await
}

async fn list_one(t: &KubeTarget, key: ListKey, res: &Resolved, objects: HashMap<String, PlannedObject>, judge: Judge) -> (ListKey, Listed) {
    let selector = format!("{}={}", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE);
    let objects = std::sync::Arc::new(objects);
    let found = std::sync::Arc::new(std::sync::Mutex::new(HashMap::new()));
    // Each page is read, and its objects compared, on a blocking thread.
    let page = |body: String| {
        let (objects, found, judge) = (objects.clone(), found.clone(), judge.clone());
        crate::offload::off_thread(move || {
            let mut found = found.lock().expect("verdicts lock");
            list::read_page(&body, &mut |live: drover_ssa::live::Live| {
                let Some(o) = live.object.pointer("/metadata/name").and_then(Value::as_str).and_then(|n| objects.get(n)) else { return };
                // The desired object is parsed only now, for the compare, and dropped after it.
                if let Ok(value) = o.value() {
                    found.insert(o.id.name.clone(), judge.read(live, &desired(value, &judge.source, judge.namespaced)));
                }
            })
        })
    };
    let complete = match list::for_each_page(t, res, key.2.as_deref(), &selector, page).await {
        Ok(()) => true,
        Err(f) => {
            tracing::debug!(kind = %key.1, error = %f, "LIST before apply failed; reading the rest one by one");
            false
        }
    };
    let live = std::mem::take(&mut *found.lock().expect("verdicts lock"));
    (key, Listed { live, complete })
}

/// Applies every group in order. An object that fails is that object's outcome: the
/// other objects of its group and the later groups are applied all the same (an object
/// that needs the failed one fails on its own, with the API server's reason).
pub(super) async fn apply(t: &KubeTarget, req: &ApplyRequest) -> ApplyReport {
    let mut outcomes = Vec::new();
    for group in &req.groups {
        let started = Instant::now();
        let (mut results, sent) = apply_group(t, req, group).await;
        establish_crds(t, group, &mut results).await;
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
    // The body is parsed (and written) only for an object that is read or sent, off the
    // async thread (a 1 MiB object takes a debug build a second).
    let (source, namespaced) = (req.source.clone(), res.namespaced);
    let parse = move |o: PlannedObject| o.value().map(|v| desired(v, &source, namespaced));
    let list = known.get(&known_key(obj, res));
    let listed = list.and_then(|l| l.live.get(&id.name)).cloned();
    // Not in a LIST that read every page: new, or not drover's; applied without a GET.
    let mut sent_body = None;
    if listed.is_none() && list.is_some_and(|l| l.complete) {
        let body = match body_text(obj, parse.clone()).await {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        match unlisted::apply(t, req, res, id, &body).await {
            Unlisted::Done(outcome) => return (outcome, true),
            Unlisted::ReadFirst => sent_body = Some(body),
        }
    }
    let before = match listed {
        Some(live) => Some(live),
        None => match read::get_text(t, res, id.namespace.as_deref(), &id.name).await {
            Ok(Some(text)) => {
                let judge = Judge::new(schemas::of(schemas, &id.api_version, &id.kind), req, res.namespaced);
                let (o, parse) = (obj.clone(), parse.clone());
                let read = move || {
                    let body = parse(o)?;
                    drover_ssa::live::Live::parse(&text).map(|live| judge.read(live, &body)).map_err(|e| format!("reading before apply: the API server's answer cannot be read: {e}"))
                };
                match crate::offload::off_thread(read).await {
                    Ok(live) => Some(live),
                    Err(e) => return fail(e),
                }
            }
            Ok(None) => None,
            Err(f) => return fail(format!("reading before apply: {f}")),
        },
    };
    match &before {
        Some(Live { owner: Owner::Other(other), .. }) => return (ObjectOutcome::with(id.clone(), Action::Conflict, conflict_message(other)), false),
        Some(Live { terminating: Some(m), .. }) => return (ObjectOutcome::with(id.clone(), Action::Terminating, m.clone()), false),
        Some(Live { unchanged: true, .. }) => return (ObjectOutcome::new(id.clone(), Action::Unchanged), false),
        _ => {}
    }
    let ns = id.namespace.as_deref();
    if let Some(l @ Live { fold: Some(fields), .. }) = &before {
        if let Err(f) = adopt::take_over(t, res, ns, &id.name, &req.field_manager, &l.resource_version, fields).await {
            return (ObjectOutcome::with(id.clone(), Action::Failed, format!("taking over the fields kubectl left (managedFields): {f}")), true);
        }
    }
    let body = match sent_body {
        Some(b) => b,
        None => match body_text(obj, parse).await {
            Ok(b) => b,
            Err(e) => return fail(e),
        },
    };
    let mut params = PatchParams::apply(&req.field_manager);
    if t.opts.force {
        params = params.force();
    }
    // Applied without a compare: said so beside the outcome.
    let note = |o: ObjectOutcome| match before.as_ref().and_then(|l| l.undecided.as_ref()) {
        Some(why) if o.message.is_empty() => ObjectOutcome { message: format!("applied without a compare ({why})"), ..o },
        _ => o,
    };
    let outcome = match read::patch_text(t, res, ns, &id.name, &params, true, &body).await {
        Ok(after) => note(match &before {
            None => ObjectOutcome::new(id.clone(), Action::Created),
            Some(Live { owner: was @ (Owner::Foreign | Owner::Unrecorded), .. }) => {
                ObjectOutcome::with(id.clone(), Action::Adopted, adopted_message(was))
            }
            Some(live) if live.resource_version != after => ObjectOutcome::new(id.clone(), Action::Configured),
            Some(_) => ObjectOutcome::new(id.clone(), Action::Unchanged),
        }),
        Err(f) if f.conflict() && !t.opts.force => ObjectOutcome::with(id.clone(), Action::Failed, format!(
            "{f} (another field manager owns these fields; drover runs with --no-force, so it does not take them over: remove the other manager's changes, or drop --no-force)"
        )),
        Err(f) => ObjectOutcome::with(id.clone(), Action::Failed, f.message),
    };
    (outcome, true)
}

/// The apply body of `obj` (`parse` makes it) as JSON text, made off the async thread
/// when the object is large.
async fn body_text(obj: &PlannedObject, parse: impl FnOnce(PlannedObject) -> Result<Value, String> + Send + 'static) -> Result<String, String> {
    let o = obj.clone();
    crate::offload::off_thread_if_large(obj.yaml.len(), move || parse(o).and_then(|b| serde_json::to_string(&b).map_err(|e| e.to_string()))).await
}

/// The apply body: the bundle's object with drover's label and source annotation, without
/// server-owned metadata (and without a namespace on a cluster-scoped kind). The bundle
/// digest is not written on objects: a new bundle then writes only the objects whose
/// content changed (the digest lives in the state record, docs/kubernetes.md).
pub fn desired(value: Value, source: &str, namespaced: bool) -> Value {
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
    for (key, k, val) in [("labels", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE), ("annotations", media::ANN_OBJ_SOURCE, source)] {
        let m = meta.entry(key).or_insert_with(|| json!({}));
        if !m.is_object() {
            *m = json!({});
        }
        m[k] = json!(val);
    }
    v
}

/// After a group holding CRDs: waits (bounded by `crd_timeout`) until each applied one is Established,
/// then refreshes discovery for their API groups. A CRD that does not get there fails.
async fn establish_crds(t: &KubeTarget, group: &OrderGroup, results: &mut [ObjectOutcome]) {
    // A CRD that failed is that CRD's outcome: it is not waited for.
    let crds: Vec<usize> = group.objects.iter().enumerate().filter(|(i, o)| is_crd(o) && results[*i].action != Action::Failed).map(|(i, _)| i).collect();
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
            match super::read::get_value(t, &o.id).await {
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
        let req = ApplyRequest { source: "r.example/x:prod".into(), digest: "sha256:ab".into(), sequence: 1, field_manager: "drover".into(), groups: vec![], health: Default::default() };
        let v = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "namespace": "zz", "resourceVersion": "9", "labels": {"x": "y"}}});
        let d = desired(v, &req.source, false);
        assert_eq!(d["metadata"]["labels"], json!({"x": "y", "app.kubernetes.io/managed-by": "drover"}));
        assert_eq!(d["metadata"]["annotations"]["drover.dev/source"], "r.example/x:prod");
        assert!(d["metadata"]["annotations"].get("drover.dev/digest").is_none(), "a new digest alone must not change objects");
        assert!(d["metadata"].get("resourceVersion").is_none());
        assert!(d["metadata"].get("namespace").is_none());
    }
}
