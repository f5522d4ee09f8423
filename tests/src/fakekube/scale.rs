//! The `scale` subresource of Deployments, StatefulSets and ReplicaSets (what `kubectl
//! scale` and autoscalers write): an `autoscaling/v1` Scale whose `spec.replicas` is the
//! object's. A write is an `Update` recorded with subresource `scale`: the writer owns
//! `spec.replicas` from then on and every other manager loses it, as on the real server.

use super::resources::ResourceInfo;
use super::status::ApiError;
use super::store::{meta_str, State, WriteOpts};
use serde_json::{json, Value};

/// The Scale of a stored object.
pub fn scale_of(obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let selector: Vec<String> = obj["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect())
        .unwrap_or_default();
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"], "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector.join(",")},
    })
}

impl State {
    /// GET `.../NAME/scale`.
    pub fn get_scale(&self, res: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        Ok(scale_of(&self.live(res, ns, name)?))
    }

    /// Writes the Scale `edit` makes of the current one (PUT: the new Scale; PATCH: the
    /// patched one): the object's `spec.replicas`, recorded as an `Update` with
    /// subresource `scale`. Returns the new Scale.
    pub fn write_scale(
        &mut self,
        res: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        edit: impl FnOnce(Value) -> Result<Value, ApiError>,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        let live = self.live(res, ns, name)?;
        let scale = edit(scale_of(&live))?;
        if let Some(rv) = meta_str(&scale, "resourceVersion").filter(|r| !r.is_empty()) {
            if Some(rv) != meta_str(&live, "resourceVersion") {
                return Err(ApiError::stale(res, name));
            }
        }
        let replicas = match &scale["spec"]["replicas"] {
            Value::Number(n) if n.as_i64().is_some_and(|r| r >= 0) => n.as_i64().expect("checked"),
            other => {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!("Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {other}: must be greater than or equal to 0"),
                ))
            }
        };
        let mut new = live.clone();
        new["spec"]["replicas"] = json!(replicas);
        let stored = self.finish_update(res, &live, new, opts, None)?;
        Ok(scale_of(&stored))
    }
}
