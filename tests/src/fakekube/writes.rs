//! The write paths of the store: create, update, merge and JSON patch, server-side
//! apply, delete, each with the real server's errors and no-op detection. Field
//! management, defaulting and the Go round trip are the API server's, from `drover-ssa`
//! ([`drover_ssa::server`]); this file only routes requests to it and keeps the store.

use super::patch::merge_patch;
use super::resources::ResourceInfo;
use super::status::ApiError;
use super::store::{key, meta_str, spec_part, State, WriteOpts};
use super::util::now_rfc3339;
use super::validate;
use super::watch::WatchEvent;
use drover_ssa::server::{self as ssa, WriteError};
use drover_ssa::Schema;
use serde_json::{json, Value};

impl State {
    /// The schema objects of `res` are managed with: the built-in table, or the CRD.
    pub(crate) fn schema(&self, res: &ResourceInfo) -> Schema {
        if !res.custom {
            if let Some(s) = Schema::builtin_at(self.settings.minor, &res.api_version(), &res.kind) {
                return s;
            }
        }
        if let Some(mut s) = self.aggregated_openapi(res).and_then(|doc| drover_ssa::openapi::schema_for(doc, &res.api_version(), &res.kind, self.settings.minor)) {
            // What the server serves decides (the `…/status` paths of the document it
            // publishes are made from the same registration).
            s.status_subresource = res.status_subresource;
            return s;
        }
        let crd = self.objects.iter().find(|(k, o)| {
            k.0 == "apiextensions.k8s.io" && k.1 == "customresourcedefinitions" && o["spec"]["group"] == res.group.as_str() && o["spec"]["names"]["plural"] == res.plural.as_str()
        });
        let mut schema = crd.and_then(|(_, o)| drover_ssa::crd::schema_for(o, &res.version)).unwrap_or_else(Schema::deduced);
        schema.status_subresource = res.status_subresource;
        schema
    }

    /// Undeclared fields of a create or update body, handled as `fieldValidation` says:
    /// `Strict` refuses them (400), `Warn` (the default) and `Ignore` let the server
    /// drop them.
    fn check_fields(&self, res: &ResourceInfo, body: &Value, opts: &WriteOpts) -> Result<(), ApiError> {
        if opts.field_validation.as_deref() != Some("Strict") {
            return Ok(());
        }
        let unknown = ssa::unknown_fields(&self.schema(res), body);
        match unknown.as_slice() {
            [] => Ok(()),
            [one] => Err(ApiError::bad_request(format!("strict decoding error: unknown field \"{}\"", one.trim_start_matches('.')))),
            many => Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                many.iter().map(|u| format!("unknown field \"{}\"", u.trim_start_matches('.'))).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// A create into a namespace that is being deleted is refused, as the real
    /// server's NamespaceLifecycle admission refuses it.
    fn check_namespace_alive(&self, res: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<(), ApiError> {
        let Some(ns) = ns.filter(|_| res.namespaced) else { return Ok(()) };
        let ns_res = &self.builtin[0];
        let terminating = self.objects.get(&key(ns_res, None, ns)).is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some());
        if terminating {
            let msg = format!("{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated", res.qualified());
            let mut e = ApiError::new(403, "Forbidden", msg);
            e.details = Some(json!({"name": name, "group": res.group, "kind": res.plural, "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}));
            return Err(e);
        }
        Ok(())
    }

    fn write<'a>(opts: &'a WriteOpts, now: &'a str, api_version: &'a str) -> ssa::Write<'a> {
        ssa::Write { manager: &opts.manager, api_version, subresource: opts.subresource.as_deref(), now }
    }

    /// POST: create (409 AlreadyExists when present).
    pub fn create(&mut self, res: &ResourceInfo, ns: Option<&str>, body: Value, opts: &WriteOpts) -> Result<Value, ApiError> {
        let name = self.check_identity(res, ns, None, &body)?;
        validate::object(res, &name, &body)?;
        if self.objects.contains_key(&key(res, ns, &name)) {
            return Err(ApiError::already_exists(res, &name));
        }
        self.check_namespace_alive(res, ns, &name)?;
        self.check_fields(res, &body, opts)?;
        let requested = body.pointer("/metadata/managedFields").cloned();
        let mut obj = self.new_object(res, ns, &name, body);
        if let Some(m) = requested {
            obj["metadata"]["managedFields"] = m;
        }
        let (now, av) = (now_rfc3339(), res.api_version());
        let stored = ssa::update(&self.schema(res), None, &obj, &Self::write(opts, &now, &av)).map_err(write_error)?;
        validate::object(res, &name, &stored)?;
        if !opts.dry_run {
            validate::size(&stored)?;
        }
        Ok(self.commit(res, stored, "ADDED", opts))
    }

    /// Finishes a write of `new` over `live`: identity kept, status or spec kept as the
    /// subresource says, defaults and managed fields as the server computes them;
    /// returns `live` unchanged when nothing changed. `stored` is the object an apply
    /// already computed (None for other writes).
    pub(crate) fn finish_update(&mut self, res: &ResourceInfo, live: &Value, mut new: Value, opts: &WriteOpts, stored: Option<Value>) -> Result<Value, ApiError> {
        let mut new = match stored {
            Some(s) => s,
            None => {
                keep_identity(res, live, &mut new);
                let (now, av) = (now_rfc3339(), res.api_version());
                ssa::update(&self.schema(res), Some(live), &new, &Self::write(opts, &now, &av)).map_err(write_error)?
            }
        };
        keep_identity(res, live, &mut new);
        let name = meta_str(live, "name").unwrap_or_default().to_string();
        validate::object(res, &name, &new)?;
        if new == *live {
            return Ok(Self::present(res, live));
        }
        validate::update(res, &name, live, &new)?;
        if !opts.dry_run {
            validate::size(&new)?;
        }
        if spec_part(&new) != spec_part(live) {
            let g = live["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = json!(g);
        }
        if finalized(live, &new) {
            let ns = meta_str(live, "namespace").map(str::to_string);
            return self.remove_now(res, ns.as_deref(), &name, opts);
        }
        Ok(self.commit(res, new, "MODIFIED", opts))
    }

    pub(crate) fn live(&self, res: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.objects.get(&key(res, ns, name)).cloned().ok_or_else(|| ApiError::not_found(res, name))
    }

    /// PUT: replace (409 when the body's resourceVersion is stale).
    pub fn update(&mut self, res: &ResourceInfo, ns: Option<&str>, name: &str, body: Value, opts: &WriteOpts) -> Result<Value, ApiError> {
        self.check_identity(res, ns, Some(name), &body)?;
        validate::object(res, name, &body)?;
        let live = self.live(res, ns, name)?;
        if let Some(rv) = meta_str(&body, "resourceVersion").filter(|r| !r.is_empty()) {
            if Some(rv) != meta_str(&live, "resourceVersion") {
                return Err(ApiError::stale(res, name));
            }
        }
        self.check_fields(res, &body, opts)?;
        self.finish_update(res, &live, body, opts, None)
    }

    /// PATCH with a JSON merge patch (strategic merge patches are treated the same).
    pub fn patch_merge(&mut self, res: &ResourceInfo, ns: Option<&str>, name: &str, patch: &Value, opts: &WriteOpts) -> Result<Value, ApiError> {
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
        validate::object(res, name, &new)?;
        self.check_fields(res, &new, opts)?;
        self.finish_update(res, &live, new, opts, None)
    }

    /// PATCH with a strategic merge patch (built-in kinds; a custom resource gets the
    /// real server's 415).
    pub fn patch_strategic(&mut self, res: &ResourceInfo, ns: Option<&str>, name: &str, patch: &Value, opts: &WriteOpts) -> Result<Value, ApiError> {
        if res.custom {
            return Err(ApiError::new(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"));
        }
        let live = self.live(res, ns, name)?;
        let mut new = live.clone();
        super::strategic::apply(&mut new, patch, &self.schema(res).root).map_err(ApiError::bad_request)?;
        self.check_identity(res, ns, Some(name), &new)?;
        validate::object(res, name, &new)?;
        self.check_fields(res, &new, opts)?;
        self.finish_update(res, &live, new, opts, None)
    }

    /// PATCH with an RFC 6902 JSON patch.
    pub fn patch_json(&mut self, res: &ResourceInfo, ns: Option<&str>, name: &str, ops: &Value, opts: &WriteOpts) -> Result<Value, ApiError> {
        let live = self.live(res, ns, name)?;
        let mut new = live.clone();
        super::patch::apply_json_patch(&mut new, ops)
            .map_err(|e| ApiError::new(422, "Invalid", format!("the server rejected our request due to an error in our request: {e}")))?;
        self.check_identity(res, ns, Some(name), &new)?;
        validate::object(res, name, &new)?;
        self.check_fields(res, &new, opts)?;
        self.finish_update(res, &live, new, opts, None)
    }

    /// PATCH with `application/apply-patch+yaml`: server-side apply. Returns the object
    /// and whether it was created.
    pub fn apply(&mut self, res: &ResourceInfo, ns: Option<&str>, name: &str, body: Value, opts: &WriteOpts) -> Result<(Value, bool), ApiError> {
        if opts.manager.is_empty() {
            return Err(ApiError::bad_request("PATCH request: fieldManager: Required value: is required for apply patch"));
        }
        if body["apiVersion"].as_str().is_none() || body["kind"].as_str().is_none() {
            return Err(ApiError::bad_request("apiVersion and kind must be set in an apply patch"));
        }
        self.check_identity(res, ns, Some(name), &body)?;
        let (now, av) = (now_rfc3339(), res.api_version());
        let w = Self::write(opts, &now, &av);
        let schema = self.schema(res);
        let typed_err = |e: WriteError| match e {
            WriteError::Unknown(m) => ApiError::bad_request(format!("failed to create typed patch object ({}, Kind={}) {name}: {m}", res.api_version(), res.kind)),
            e => write_error(e),
        };
        match self.objects.get(&key(res, ns, name)).cloned() {
            None => {
                if opts.subresource.is_some() {
                    return Err(ApiError::not_found(res, name));
                }
                self.check_namespace_alive(res, ns, name)?;
                let applied = ssa::apply(&schema, None, &body, &w, opts.force).map_err(typed_err)?;
                let mf = applied.pointer("/metadata/managedFields").cloned();
                let mut obj = self.new_object(res, ns, name, applied);
                if let Some(m) = mf {
                    obj["metadata"]["managedFields"] = m;
                }
                validate::object(res, name, &obj)?;
                Ok((self.commit(res, obj, "ADDED", opts), true))
            }
            Some(live) => {
                let stored = ssa::apply(&schema, Some(&live), &body, &w, opts.force).map_err(typed_err)?;
                Ok((self.finish_update(res, &live, Value::Null, opts, Some(stored))?, false))
            }
        }
    }

    /// The DeleteOptions `preconditions` check (uid and resourceVersion must match).
    pub fn check_preconditions(&self, res: &ResourceInfo, ns: Option<&str>, name: &str, pre: &Value) -> Result<(), ApiError> {
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

    /// DELETE one object. An object with finalizers is only marked (`deletionTimestamp`)
    /// and stays, Terminating, until the last finalizer is removed; a namespace deletes
    /// its contents and goes when they are gone; a CRD takes its objects with it.
    pub fn delete(&mut self, res: &ResourceInfo, ns: Option<&str>, name: &str, opts: &WriteOpts) -> Result<Value, ApiError> {
        let obj = self.live(res, ns, name)?;
        if res.plural == "namespaces" && ["default", "kube-system", "kube-public"].contains(&name) {
            return Err(ApiError::new(403, "Forbidden", format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")));
        }
        if opts.dry_run {
            return Ok(Self::present(res, &obj));
        }
        if res.plural == "namespaces" {
            return self.delete_namespace(res, name, obj, opts);
        }
        if has_finalizers(&obj) {
            return Ok(self.mark_deleted(res, obj, opts));
        }
        self.remove_now(res, ns, name, opts)
    }

    fn mark_deleted(&mut self, res: &ResourceInfo, mut obj: Value, opts: &WriteOpts) -> Value {
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            return Self::present(res, &obj);
        }
        obj["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
        obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        self.commit(res, obj, "MODIFIED", opts)
    }

    fn delete_namespace(&mut self, res: &ResourceInfo, name: &str, mut obj: Value, opts: &WriteOpts) -> Result<Value, ApiError> {
        let contents: Vec<(ResourceInfo, Option<String>, String)> = self
            .objects
            .keys()
            .filter(|k| k.2 == name)
            .filter_map(|k| self.all_resources().find(|r| r.group == k.0 && r.plural == k.1).cloned().map(|r| (r, Some(k.2.clone()), k.3.clone())))
            .collect();
        for (r, ns, n) in contents {
            let _ = self.delete(&r, ns.as_deref(), &n, opts);
        }
        obj["status"]["phase"] = json!("Terminating");
        let shown = self.mark_deleted(res, obj, opts);
        self.finish_namespaces(opts);
        Ok(self.objects.get(&key(res, None, name)).map(|o| Self::present(res, o)).unwrap_or(shown))
    }

    /// The namespace controller's last step: a Terminating namespace with nothing left
    /// in it and no finalizers of its own goes.
    pub(crate) fn finish_namespaces(&mut self, opts: &WriteOpts) {
        let ns_res = self.builtin[0].clone();
        let done: Vec<String> = self
            .objects
            .iter()
            .filter(|(k, o)| k.1 == "namespaces" && k.0.is_empty() && o.pointer("/metadata/deletionTimestamp").is_some() && !has_finalizers(o))
            .map(|(k, _)| k.3.clone())
            .filter(|n| !self.objects.keys().any(|k| &k.2 == n))
            .collect();
        for n in done {
            let _ = self.remove_now(&ns_res, None, &n, opts);
        }
    }

    /// Removes an object from the store (and a CRD's objects), with the watch events.
    fn remove_now(&mut self, res: &ResourceInfo, ns: Option<&str>, name: &str, opts: &WriteOpts) -> Result<Value, ApiError> {
        let k = key(res, ns, name);
        let obj = self.objects.get(&k).cloned().ok_or_else(|| ApiError::not_found(res, name))?;
        let shown = Self::present(res, &obj);
        let mut doomed = vec![k.clone()];
        if res.plural == "customresourcedefinitions" {
            let (g, p) = (obj["spec"]["group"].as_str().unwrap_or_default(), obj["spec"]["names"]["plural"].as_str().unwrap_or_default());
            doomed.extend(self.objects.keys().filter(|o| o.0 == g && o.1 == p).cloned());
        }
        for d in doomed {
            if let Some(o) = self.objects.remove(&d) {
                let rv = self.next_rv();
                let r = self.all_resources().find(|r| r.group == d.0 && r.plural == d.1).cloned();
                let shown = r.map(|r| Self::present(&r, &o)).unwrap_or(o);
                self.watchers.emit(WatchEvent { rv, group: d.0.clone(), plural: d.1.clone(), namespace: d.2.clone(), kind: "DELETED".into(), object: shown });
            }
        }
        if res.plural == "customresourcedefinitions" {
            self.refresh_custom();
        }
        if ns.is_some() {
            self.finish_namespaces(opts);
        }
        Ok(shown)
    }
}

fn has_finalizers(o: &Value) -> bool {
    o.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty())
}

/// A write that removed the last finalizer of an object being deleted: it goes now.
fn finalized(live: &Value, new: &Value) -> bool {
    live.pointer("/metadata/deletionTimestamp").is_some() && !has_finalizers(new)
}

/// Identity and server-set metadata are the live object's whatever a write says.
fn keep_identity(res: &ResourceInfo, live: &Value, new: &mut Value) {
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    for k in ["name", "namespace", "uid", "creationTimestamp", "generation", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"] {
        match live["metadata"].get(k) {
            Some(v) => new["metadata"][k] = v.clone(),
            None => {
                new["metadata"].as_object_mut().expect("map").remove(k);
            }
        }
    }
    new["apiVersion"] = json!(res.api_version());
    new["kind"] = json!(res.kind);
}

/// The API error for a refused write (409 for conflicts, with the real causes).
fn write_error(e: WriteError) -> ApiError {
    match e {
        WriteError::Conflict { ref conflicts, .. } => {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|(m, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": p}))
                .collect();
            let mut err = ApiError::new(409, "Conflict", e.to_string());
            err.details = Some(json!({"causes": causes}));
            err
        }
        WriteError::Unknown(m) => ApiError::bad_request(m),
        WriteError::Invalid(m) => ApiError::bad_request(m),
    }
}
