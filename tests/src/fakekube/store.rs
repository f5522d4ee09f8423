//! The object store of the FAKE API server: every object keyed by (group, plural,
//! namespace, name), one global resourceVersion counter, and the write paths (create,
//! update, merge patch, server-side apply, delete) with their Kubernetes semantics.

use super::crd::{crd_established, crd_res, set_crd_established, set_crd_names_accepted};
use super::resources::{self, ResourceInfo};
use super::rollout::{self, RolloutMode};
use super::selector::Selector;
use super::status::ApiError;
use super::util::{new_uid, now_rfc3339};
use super::watch::{WatchEvent, Watchers};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Store key: (group, plural, namespace or "", name).
pub type Key = (String, String, String, String);

/// Work to do later, outside the request (CRD establishment, rollout progress).
#[derive(Clone, Debug)]
pub enum Deferred {
    /// Mark the CRD Established and serve its resources.
    Establish(Key),
    /// Finish the rollout of a workload if it still has this generation.
    Rollout(Key, i64),
}

/// The Kubernetes minor the fake plays unless told otherwise.
pub const DEFAULT_MINOR: u8 = 34;

/// Knobs tests turn.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Rollout mode for workloads without an override.
    pub rollout_default: RolloutMode,
    /// Per (namespace, name) rollout mode.
    pub rollout_overrides: HashMap<(String, String), RolloutMode>,
    /// Time a `Ready` rollout spends Progressing first.
    pub rollout_delay: Duration,
    /// Time before a new CRD becomes Established.
    pub crd_delay: Duration,
    /// The Kubernetes minor this server is (`/version`): the built-in kinds it serves and
    /// their schemas are that release's.
    pub minor: u8,
}

/// Who writes and how.
#[derive(Clone, Debug)]
pub struct WriteOpts {
    /// Field manager.
    pub manager: String,
    /// `dryRun=All`: validate and answer, persist nothing.
    pub dry_run: bool,
    /// `force=true` for apply.
    pub force: bool,
    /// Subresource (`status`) or none.
    pub subresource: Option<String>,
    /// `fieldValidation`: `Strict` refuses undeclared fields; `Warn` (the default) and
    /// `Ignore` drop them.
    pub field_validation: Option<String>,
}

/// Everything the server keeps.
pub struct State {
    /// Last resourceVersion handed out.
    pub rv: u64,
    /// All objects.
    pub objects: BTreeMap<Key, Value>,
    /// Built-in resources.
    pub builtin: Vec<ResourceInfo>,
    /// Resources of Established CRDs.
    pub custom: Vec<ResourceInfo>,
    /// Aggregated APIs (`POST /fake/apis`): each resource with the OpenAPI v3 document
    /// its server would serve, which is also the schema its objects are managed with.
    pub apis: Vec<(ResourceInfo, Value)>,
    /// Test knobs.
    pub settings: Settings,
    /// Deferred work queued by the last operations.
    pub pending: Vec<(Duration, Deferred)>,
    /// Watch history and subscribers.
    pub watchers: Watchers,
}

/// The store key of an object of `res`.
pub fn key(res: &ResourceInfo, ns: Option<&str>, name: &str) -> Key {
    (
        res.group.clone(),
        res.plural.clone(),
        if res.namespaced {
            ns.unwrap_or("").to_string()
        } else {
            String::new()
        },
        name.to_string(),
    )
}

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj["metadata"][field].as_str()
}

/// Everything but metadata and status: what bumps `generation` when it changes.
pub(crate) fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["metadata", "status", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    v
}

impl State {
    /// A fresh store with the `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease` namespaces.
    pub fn new(settings: Settings) -> State {
        let mut s = State {
            rv: 0,
            objects: BTreeMap::new(),
            builtin: resources::builtin(settings.minor),
            custom: Vec::new(),
            apis: Vec::new(),
            settings,
            pending: Vec::new(),
            watchers: Watchers::new(),
        };
        let ns = s.builtin[0].clone();
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let opts = WriteOpts {
                manager: "kube-apiserver".into(),
                dry_run: false,
                force: false,
                subresource: None,
                field_validation: None,
            };
            let _ = s.create(&ns, None, body, &opts);
        }
        s
    }

    /// Every served resource (built-in, then custom).
    pub fn all_resources(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.builtin.iter().chain(self.custom.iter()).chain(self.apis.iter().map(|(r, _)| r))
    }

    /// The OpenAPI document of an aggregated API's resource `r`.
    pub fn aggregated_openapi(&self, r: &ResourceInfo) -> Option<&Value> {
        self.apis.iter().find(|(a, _)| a == r).map(|(_, doc)| doc)
    }

    /// The resource served at group/version/plural.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceInfo> {
        self.all_resources()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// The resource of an apiVersion + kind.
    pub fn resolve_kind(&self, api_version: &str, kind: &str) -> Option<ResourceInfo> {
        self.all_resources()
            .find(|r| r.api_version() == api_version && r.kind == kind)
            .cloned()
    }

    pub(crate) fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub(crate) fn present(res: &ResourceInfo, obj: &Value) -> Value {
        let mut o = obj.clone();
        o["apiVersion"] = json!(res.api_version());
        o["kind"] = json!(res.kind);
        o
    }

    /// GET one object.
    pub fn get(&self, res: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&key(res, ns, name))
            .map(|o| Self::present(res, o))
            .ok_or_else(|| ApiError::not_found(res, name))
    }

    /// LIST objects (all namespaces when `ns` is None) filtered by selectors.
    pub fn list(
        &self,
        res: &ResourceInfo,
        ns: Option<&str>,
        labels: Option<&Selector>,
        fields_sel: Option<&Selector>,
    ) -> Value {
        let items: Vec<Value> = self
            .matching(res, ns, labels, fields_sel)
            .map(|o| Self::present(res, o))
            .collect();
        self.list_of(res, items)
    }

    /// The stored objects a LIST returns, in key order (namespace, name), not copied.
    pub(crate) fn matching<'a>(
        &'a self,
        res: &'a ResourceInfo,
        ns: Option<&'a str>,
        labels: Option<&'a Selector>,
        fields_sel: Option<&'a Selector>,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects
            .iter()
            .filter(move |(k, _)| {
                k.0 == res.group
                    && k.1 == res.plural
                    && (ns.is_none() || !res.namespaced || Some(k.2.as_str()) == ns)
            })
            .map(|(_, o)| o)
            .filter(move |o| {
                labels.is_none_or(|s| s.matches_labels(o))
                    && fields_sel.is_none_or(|s| s.matches_fields(o))
            })
    }

    /// A `<Kind>List` of `items` at the current resourceVersion.
    pub(crate) fn list_of(&self, res: &ResourceInfo, items: Vec<Value>) -> Value {
        json!({"apiVersion": res.api_version(), "kind": format!("{}List", res.kind), "metadata": {"resourceVersion": self.rv.to_string()}, "items": items})
    }

    /// Checks what a write names (apiVersion, kind, name against the URL, namespace
    /// exists) and returns the object's name; the object itself is checked by
    /// [`super::validate::object`].
    pub(crate) fn check_identity(
        &self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: Option<&str>,
        body: &Value,
    ) -> Result<String, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a single JSON or YAML object",
            ));
        }
        if let Some(av) = body["apiVersion"].as_str() {
            if av != res.api_version() {
                return Err(ApiError::bad_request(format!("the API version in the data ({av}) does not match the expected API version ({})", res.api_version())));
            }
        }
        if let Some(k) = body["kind"].as_str() {
            if k != res.kind {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    res.kind
                )));
            }
        }
        let body_name = meta_str(body, "name").filter(|n| !n.is_empty());
        let name = match (name, body_name) {
            (Some(u), Some(b)) if u != b => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({b}) does not match the name on the URL ({u})"
                )))
            }
            (Some(u), _) => u.to_string(),
            (None, Some(b)) => b.to_string(),
            (None, None) => match meta_str(body, "generateName") {
                Some(g) => format!("{g}{}", &new_uid()[..5]),
                None => {
                    return Err(ApiError::invalid(
                        res,
                        "",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    ))
                }
            },
        };
        if res.namespaced {
            if let (Some(b), Some(u)) = (meta_str(body, "namespace"), ns) {
                if b != u {
                    return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
                }
            }
            let nsname = ns.unwrap_or("");
            if !self.objects.contains_key(&(
                String::new(),
                "namespaces".into(),
                String::new(),
                nsname.to_string(),
            )) {
                return Err(ApiError::not_found(&self.builtin[0], nsname));
            }
        }
        Ok(name)
    }

    /// Fills identity and server-set metadata for a new object.
    pub(crate) fn new_object(
        &self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        body: Value,
    ) -> Value {
        let mut obj = body;
        obj["apiVersion"] = json!(res.api_version());
        obj["kind"] = json!(res.kind);
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        let m = obj["metadata"].as_object_mut().expect("map");
        m.insert("name".into(), json!(name));
        if res.namespaced {
            m.insert("namespace".into(), json!(ns.unwrap_or("")));
        } else {
            m.remove("namespace");
        }
        for k in [
            "resourceVersion",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generateName",
            "selfLink",
        ] {
            m.remove(k);
        }
        m.insert("uid".into(), json!(new_uid()));
        m.insert("creationTimestamp".into(), json!(now_rfc3339()));
        m.insert("generation".into(), json!(1));
        if res.status_subresource {
            obj.as_object_mut().expect("map").remove("status");
        }
        if res.plural == "namespaces" {
            obj["status"] = json!({"phase": "Active"});
            if obj["spec"]["finalizers"].is_null() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
        }
        obj
    }

    /// Stores `obj` under a new resourceVersion (unless dry run), runs CRD and rollout
    /// follow-ups, emits the watch event, and returns what the client sees.
    pub(crate) fn commit(
        &mut self,
        res: &ResourceInfo,
        obj: Value,
        event: &str,
        opts: &WriteOpts,
    ) -> Value {
        let mut obj = obj;
        let k = key(
            res,
            meta_str(&obj, "namespace"),
            meta_str(&obj, "name").unwrap_or(""),
        );
        if opts.dry_run {
            obj["metadata"]["resourceVersion"] = json!(self
                .objects
                .get(&k)
                .and_then(|o| o["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_string))
                .unwrap_or_default());
            return Self::present(res, &obj);
        }
        if res.plural == "customresourcedefinitions" && !crd_established(&obj) {
            if self.settings.crd_delay.is_zero() {
                set_crd_established(&mut obj);
            } else {
                set_crd_names_accepted(&mut obj);
                self.pending
                    .push((self.settings.crd_delay, Deferred::Establish(k.clone())));
            }
        }
        let rv = self.next_rv();
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.objects.insert(k.clone(), obj.clone());
        self.watchers.emit(WatchEvent {
            rv,
            group: k.0.clone(),
            plural: k.1.clone(),
            namespace: k.2.clone(),
            kind: event.into(),
            object: Self::present(res, &obj),
        });
        if res.plural == "customresourcedefinitions" {
            self.refresh_custom();
        }
        if rollout::is_workload(res) && opts.subresource.as_deref() != Some("status") {
            self.start_rollout(res, &k);
        }
        Self::present(res, &obj)
    }

    pub(crate) fn refresh_custom(&mut self) {
        let crd = crd_res();
        self.custom = self
            .objects
            .iter()
            .filter(|(k, o)| k.0 == crd.group && k.1 == crd.plural && crd_established(o))
            .flat_map(|(_, o)| resources::from_crd(o))
            .collect();
    }

    /// Replaces an object's status (a controller's write): bumps resourceVersion only
    /// when the status changes.
    pub fn write_status(&mut self, res: &ResourceInfo, k: &Key, status: Value) -> Option<Value> {
        let schema = self.schema(res);
        let obj = self.objects.get_mut(k)?;
        // Stored as the server stores it (a zero time as null, and so on).
        let mut status = {
            let mut probe = obj.clone();
            probe["status"] = status;
            drover_ssa::server::normalize(&schema, &mut probe);
            probe["status"].take()
        };
        if status.is_null() {
            status = json!({});
        }
        if obj["status"] == status {
            return Some(Self::present(res, obj));
        }
        obj["status"] = status;
        self.rv += 1;
        let rv = self.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let shown = Self::present(res, obj);
        self.watchers.emit(WatchEvent {
            rv,
            group: k.0.clone(),
            plural: k.1.clone(),
            namespace: k.2.clone(),
            kind: "MODIFIED".into(),
            object: shown.clone(),
        });
        Some(shown)
    }
}
