//! The object store of the FAKE API server: every object keyed by (group, plural,
//! namespace, name), one global resourceVersion counter, and the write paths (create,
//! update, merge patch, server-side apply, delete) with their Kubernetes semantics.

use super::managed;
use super::resources::{self, ResourceInfo};
use super::rollout::{self, RolloutMode};
use super::selector::Selector;
use super::status::ApiError;
use super::util::{new_uid, now_rfc3339};
use super::validate;
use super::watch::{WatchEvent, Watchers};
use serde_json::{json, Map, Value};
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
    /// Test knobs.
    pub settings: Settings,
    /// Deferred work queued by the last operations.
    pub pending: Vec<(Duration, Deferred)>,
    /// Watch history and subscribers.
    pub watchers: Watchers,
}

fn crd_res() -> ResourceInfo {
    resources::builtin()
        .into_iter()
        .find(|r| r.plural == "customresourcedefinitions")
        .expect("crd resource")
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

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj["metadata"][field].as_str()
}

/// Everything but metadata and status: what bumps `generation` when it changes.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["metadata", "status", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    v
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        let t = target.as_object_mut().expect("map");
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    } else {
        *target = patch.clone();
    }
}

impl State {
    /// A fresh store with the `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease` namespaces.
    pub fn new(settings: Settings) -> State {
        let mut s = State {
            rv: 0,
            objects: BTreeMap::new(),
            builtin: resources::builtin(),
            custom: Vec::new(),
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
            };
            let _ = s.create(&ns, None, body, &opts);
        }
        s
    }

    /// Every served resource (built-in, then custom).
    pub fn all_resources(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.builtin.iter().chain(self.custom.iter())
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

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn present(res: &ResourceInfo, obj: &Value) -> Value {
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
            .objects
            .iter()
            .filter(|(k, _)| {
                k.0 == res.group
                    && k.1 == res.plural
                    && (ns.is_none() || !res.namespaced || Some(k.2.as_str()) == ns)
            })
            .map(|(_, o)| o)
            .filter(|o| {
                labels.is_none_or(|s| s.matches_labels(o))
                    && fields_sel.is_none_or(|s| s.matches_fields(o))
            })
            .map(|o| Self::present(res, o))
            .collect();
        json!({"apiVersion": res.api_version(), "kind": format!("{}List", res.kind), "metadata": {"resourceVersion": self.rv.to_string()}, "items": items})
    }

    fn check_identity(
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
        validate::object(res, &name, body)?;
        if res.plural == "customresourcedefinitions" {
            validate_crd(res, &name, body)?;
        }
        Ok(name)
    }

    /// Fills identity and server-set metadata for a new object.
    fn new_object(&self, res: &ResourceInfo, ns: Option<&str>, name: &str, body: Value) -> Value {
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
    fn commit(&mut self, res: &ResourceInfo, obj: Value, event: &str, opts: &WriteOpts) -> Value {
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
        if rollout::is_workload(res) && opts.subresource.is_none() {
            self.start_rollout(res, &k);
        }
        Self::present(res, &obj)
    }

    fn refresh_custom(&mut self) {
        let crd = crd_res();
        self.custom = self
            .objects
            .iter()
            .filter(|(k, o)| k.0 == crd.group && k.1 == crd.plural && crd_established(o))
            .flat_map(|(_, o)| resources::from_crd(o))
            .collect();
    }

    /// Writes a workload's status as its controller would, per the rollout mode.
    fn start_rollout(&mut self, res: &ResourceInfo, k: &Key) {
        let Some(obj) = self.objects.get(k) else {
            return;
        };
        let mode = self
            .settings
            .rollout_overrides
            .get(&(k.2.clone(), k.3.clone()))
            .copied()
            .unwrap_or(self.settings.rollout_default);
        let mode = if mode == RolloutMode::Ready && rollout::unpullable(obj) {
            RolloutMode::Stuck
        } else {
            mode
        };
        let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
        let status = match mode {
            RolloutMode::None => return,
            RolloutMode::Stuck => rollout::progressing_status(res, obj),
            RolloutMode::Ready if !self.settings.rollout_delay.is_zero() => {
                self.pending.push((
                    self.settings.rollout_delay,
                    Deferred::Rollout(k.clone(), generation),
                ));
                rollout::progressing_status(res, obj)
            }
            RolloutMode::Ready => rollout::ready_status(res, obj),
        };
        if let Some(st) = status {
            self.write_status(res, k, st);
        }
    }

    /// Replaces an object's status (a controller's write): bumps resourceVersion only
    /// when the status changes.
    pub fn write_status(&mut self, res: &ResourceInfo, k: &Key, status: Value) -> Option<Value> {
        let obj = self.objects.get_mut(k)?;
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

    /// Runs deferred work whose time has come.
    pub fn run_deferred(&mut self, d: Deferred) {
        match d {
            Deferred::Establish(k) => {
                if let Some(mut obj) = self.objects.get(&k).cloned() {
                    set_crd_established(&mut obj);
                    let res = crd_res();
                    self.write_status(&res, &k, obj["status"].clone());
                    self.refresh_custom();
                }
            }
            Deferred::Rollout(k, generation) => {
                let Some(obj) = self.objects.get(&k) else {
                    return;
                };
                if obj["metadata"]["generation"].as_i64() != Some(generation) {
                    return;
                }
                let Some(res) = self
                    .all_resources()
                    .find(|r| r.group == k.0 && r.plural == k.1)
                    .cloned()
                else {
                    return;
                };
                if let Some(st) = rollout::ready_status(&res, obj) {
                    self.write_status(&res, &k, st);
                }
            }
        }
    }

    /// POST: create (409 AlreadyExists when present).
    pub fn create(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        let name = self.check_identity(res, ns, None, &body)?;
        if self.objects.contains_key(&key(res, ns, &name)) {
            return Err(ApiError::already_exists(res, &name));
        }
        let mut obj = self.new_object(res, ns, &name, body);
        managed::record_update(
            None,
            &mut obj,
            &opts.manager,
            &res.api_version(),
            None,
            &now_rfc3339(),
        );
        Ok(self.commit(res, obj, "ADDED", opts))
    }

    /// Finishes a write of `new` over `live`: status handling, generation, managed
    /// fields; returns `live` unchanged when nothing changed.
    fn finish_update(
        &mut self,
        res: &ResourceInfo,
        live: &Value,
        mut new: Value,
        opts: &WriteOpts,
        apply: bool,
    ) -> Value {
        let meta_keep = [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "resourceVersion",
        ];
        if !new["metadata"].is_object() {
            new["metadata"] = json!({});
        }
        for k in meta_keep {
            match live["metadata"].get(k) {
                Some(v) => new["metadata"][k] = v.clone(),
                None => {
                    new["metadata"].as_object_mut().expect("map").remove(k);
                }
            }
        }
        new["apiVersion"] = json!(res.api_version());
        new["kind"] = json!(res.kind);
        if opts.subresource.as_deref() == Some("status") {
            let st = new.get("status").cloned();
            new = live.clone();
            match st {
                Some(s) => new["status"] = s,
                None => {
                    new.as_object_mut().expect("map").remove("status");
                }
            }
        } else if res.status_subresource || res.plural == "namespaces" {
            match live.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    new.as_object_mut().expect("map").remove("status");
                }
            }
        }
        if !apply {
            new["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
            managed::record_update(
                Some(live),
                &mut new,
                &opts.manager,
                &res.api_version(),
                opts.subresource.as_deref(),
                &now_rfc3339(),
            );
        }
        if new == *live {
            return Self::present(res, live);
        }
        if spec_part(&new) != spec_part(live) {
            let g = live["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = json!(g);
        }
        self.commit(res, new, "MODIFIED", opts)
    }

    fn live(&self, res: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&key(res, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, name))
    }

    /// PUT: replace (409 when the body's resourceVersion is stale).
    pub fn update(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        self.check_identity(res, ns, Some(name), &body)?;
        let live = self.live(res, ns, name)?;
        if let Some(rv) = meta_str(&body, "resourceVersion").filter(|r| !r.is_empty()) {
            if Some(rv) != meta_str(&live, "resourceVersion") {
                return Err(ApiError::stale(res, name));
            }
        }
        Ok(self.finish_update(res, &live, body, opts, false))
    }

    /// PATCH with a JSON merge patch (strategic merge patches are treated the same).
    pub fn patch_merge(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        if !patch.is_object() {
            return Err(ApiError::bad_request("a merge patch must be a JSON object"));
        }
        let live = self.live(res, ns, name)?;
        if let Some(rv) = meta_str(patch, "resourceVersion").filter(|r| !r.is_empty()) {
            if Some(rv) != meta_str(&live, "resourceVersion") {
                return Err(ApiError::stale(res, name));
            }
        }
        let mut new = live.clone();
        merge_patch(&mut new, patch);
        self.check_identity(res, ns, Some(name), &new)?;
        Ok(self.finish_update(res, &live, new, opts, false))
    }

    /// PATCH with an RFC 6902 JSON patch.
    pub fn patch_json(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        ops: &Value,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        let live = self.live(res, ns, name)?;
        let mut new = live.clone();
        super::jsonpatch::apply(&mut new, ops).map_err(|e| {
            ApiError::new(
                422,
                "Invalid",
                format!("the server rejected our request due to an error in our request: {e}"),
            )
        })?;
        self.check_identity(res, ns, Some(name), &new)?;
        Ok(self.finish_update(res, &live, new, opts, false))
    }

    /// PATCH with `application/apply-patch+yaml`: server-side apply. Returns the object
    /// and whether it was created.
    pub fn apply(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<(Value, bool), ApiError> {
        if opts.manager.is_empty() {
            return Err(ApiError::bad_request(
                "PATCH request: fieldManager: Required value: is required for apply patch",
            ));
        }
        if body["apiVersion"].as_str().is_none() || body["kind"].as_str().is_none() {
            return Err(ApiError::bad_request(
                "apiVersion and kind must be set in an apply patch",
            ));
        }
        self.check_identity(res, ns, Some(name), &body)?;
        let now = now_rfc3339();
        let mut applied = body.clone();
        if let Some(m) = applied["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        if opts.subresource.as_deref() == Some("status") {
            let live = self.live(res, ns, name)?;
            let mut new = live.clone();
            merge_patch(
                &mut new,
                &json!({"status": applied.get("status").cloned().unwrap_or(Value::Null)}),
            );
            return Ok((self.finish_update(res, &live, new, opts, false), false));
        }
        match self.objects.get(&key(res, ns, name)).cloned() {
            None => {
                let base = self.new_object(res, ns, name, json!({}));
                let mut obj = managed::apply(
                    &base,
                    &applied,
                    &opts.manager,
                    &res.api_version(),
                    opts.force,
                    &now,
                )?;
                if !res.status_subresource {
                    if let Some(s) = applied.get("status") {
                        obj["status"] = s.clone();
                    }
                }
                if res.plural == "customresourcedefinitions" {
                    validate_crd(res, name, &obj)?;
                }
                Ok((self.commit(res, obj, "ADDED", opts), true))
            }
            Some(live) => {
                let new = managed::apply(
                    &live,
                    &applied,
                    &opts.manager,
                    &res.api_version(),
                    opts.force,
                    &now,
                )?;
                if res.plural == "customresourcedefinitions" {
                    validate_crd(res, name, &new)?;
                }
                Ok((self.finish_update(res, &live, new, opts, true), false))
            }
        }
    }

    /// The DeleteOptions `preconditions` check (uid and resourceVersion must match).
    pub fn check_preconditions(
        &self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        pre: &Value,
    ) -> Result<(), ApiError> {
        let live = self.live(res, ns, name)?;
        for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            if let Some(want) = pre[field].as_str() {
                let have = meta_str(&live, field).unwrap_or("");
                if want != have {
                    let msg = format!("Operation cannot be fulfilled on {} \"{name}\": Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}", res.qualified());
                    return Err(ApiError::new(409, "Conflict", msg));
                }
            }
        }
        Ok(())
    }

    /// DELETE one object (namespaces take their contents with them; CRDs their objects).
    pub fn delete(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        let k = key(res, ns, name);
        let obj = self
            .objects
            .get(&k)
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, name))?;
        if res.plural == "namespaces" && ["default", "kube-system", "kube-public"].contains(&name) {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
            ));
        }
        let shown = Self::present(res, &obj);
        if opts.dry_run {
            return Ok(shown);
        }
        let mut doomed = vec![k.clone()];
        if res.plural == "namespaces" {
            doomed.extend(
                self.objects
                    .keys()
                    .filter(|o| !o.2.is_empty() && o.2 == name)
                    .cloned(),
            );
        }
        if res.plural == "customresourcedefinitions" {
            let (g, p) = (
                obj["spec"]["group"].as_str().unwrap_or_default(),
                obj["spec"]["names"]["plural"].as_str().unwrap_or_default(),
            );
            doomed.extend(
                self.objects
                    .keys()
                    .filter(|o| o.0 == g && o.1 == p)
                    .cloned(),
            );
        }
        for d in doomed {
            if let Some(o) = self.objects.remove(&d) {
                let rv = self.next_rv();
                let r = self
                    .all_resources()
                    .find(|r| r.group == d.0 && r.plural == d.1)
                    .cloned();
                let shown = r.map(|r| Self::present(&r, &o)).unwrap_or(o);
                self.watchers.emit(WatchEvent {
                    rv,
                    group: d.0.clone(),
                    plural: d.1.clone(),
                    namespace: d.2.clone(),
                    kind: "DELETED".into(),
                    object: shown,
                });
            }
        }
        if res.plural == "customresourcedefinitions" {
            self.refresh_custom();
        }
        Ok(shown)
    }
}

fn crd_established(obj: &Value) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

fn set_crd_names_accepted(obj: &mut Value) {
    let now = now_rfc3339();
    obj["status"] = json!({
        "conditions": [{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now}],
        "acceptedNames": obj["spec"]["names"].clone(),
        "storedVersions": stored_versions(obj),
    });
}

fn set_crd_established(obj: &mut Value) {
    set_crd_names_accepted(obj);
    let now = now_rfc3339();
    if let Some(cs) = obj["status"]["conditions"].as_array_mut() {
        cs.push(json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}));
    }
}

fn stored_versions(crd: &Value) -> Value {
    let v: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    Value::Array(v)
}

/// The checks the real server makes on a CRD that matter to clients.
fn validate_crd(res: &ResourceInfo, name: &str, crd: &Value) -> Result<(), ApiError> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    if group.is_empty() {
        return Err(ApiError::invalid(res, name, "spec.group", "Required value"));
    }
    if plural.is_empty()
        || spec["names"]["kind"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    {
        return Err(ApiError::invalid(
            res,
            name,
            "spec.names",
            "Required value: plural and kind are required",
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(ApiError::invalid(
            res,
            name,
            "metadata.name",
            &format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !matches!(spec["scope"].as_str(), Some("Namespaced" | "Cluster")) {
        return Err(ApiError::invalid(
            res,
            name,
            "spec.scope",
            "Unsupported value: must be \"Cluster\" or \"Namespaced\"",
        ));
    }
    let versions = spec["versions"].as_array().map(Vec::len).unwrap_or(0);
    let storage = spec["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .count()
        })
        .unwrap_or(0);
    if versions == 0 || storage != 1 {
        return Err(ApiError::invalid(
            res,
            name,
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    Ok(())
}
