//! The write paths of the store: create, update, merge and JSON patch, server-side
//! apply, delete, each with the real server's errors and no-op detection.

use super::managed;
use super::patch::merge_patch;
use super::resources::ResourceInfo;
use super::status::ApiError;
use super::store::{key, meta_str, spec_part, State, WriteOpts};
use super::util::now_rfc3339;
use super::validate;
use super::watch::WatchEvent;
use serde_json::{json, Value};

impl State {
    /// POST: create (409 AlreadyExists when present).
    pub fn create(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        let name = self.check_identity(res, ns, None, &body)?;
        validate::object(res, &name, &body)?;
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
    pub(crate) fn finish_update(
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

    pub(crate) fn live(&self, res: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
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
        validate::object(res, name, &body)?;
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
        validate::object(res, name, &new)?;
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
        super::patch::apply_json_patch(&mut new, ops).map_err(|e| {
            ApiError::new(
                422,
                "Invalid",
                format!("the server rejected our request due to an error in our request: {e}"),
            )
        })?;
        self.check_identity(res, ns, Some(name), &new)?;
        validate::object(res, name, &new)?;
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
                validate::object(res, name, &obj)?;
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
                validate::object(res, name, &new)?;
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
