//! The objects drover manages, read and written without the kube client's decoder: the
//! response text is read by [`drover_ssa::live`] (any depth an API server stores, the
//! managed fields read once into compact sets) on a blocking thread when large ([`off_thread_if_large`]), so
//! neither a hostile object nor a large one holds up the thread that serves `/healthz`,
//! and a response that cannot be read is an error naming the object, never a log line
//! quoting it (the kube client logs the whole body at WARN when its decoder fails: a
//! Secret's data with it).

use kube::api::{DeleteParams, DynamicObject, GetParams, Patch, PatchParams};
use kube::core::Request;
use kube::Resource;
use serde_json::Value;

use super::cluster::KubeTarget;
use super::discovery::{ResolveError, Resolved};
use drover_proto::object::ObjectRef;
use super::retry::{with_retry, ApiFailure};
use crate::offload::off_thread_if_large;
use drover_ssa::live::Live;

/// The request builder for objects of `res` in `namespace`.
fn requests(res: &Resolved, namespace: Option<&str>) -> Request {
    let ns = if res.namespaced { namespace } else { None };
    Request::new(DynamicObject::url_path(&res.resource, ns))
}

/// GET of one object: its text, `None` when it does not exist.
pub async fn get_text(t: &KubeTarget, res: &Resolved, namespace: Option<&str>, name: &str) -> Result<Option<String>, ApiFailure> {
    let r = requests(res, namespace);
    let call = || {
        let req = r.get(name, &GetParams::default()).map_err(kube::Error::BuildRequest);
        async move { t.client.request_text(req?).await }
    };
    match with_retry(&t.opts.retry, call).await {
        Ok(text) => Ok(Some(text)),
        Err(f) if f.not_found() => Ok(None),
        Err(f) => Err(f),
    }
}

/// The live object `id` as JSON (without `metadata.managedFields`, read within bounds);
/// `Ok(None)` when it (or its kind) does not exist.
pub async fn get_value(t: &KubeTarget, id: &ObjectRef) -> Result<Option<Value>, String> {
    let res = match t.resolver.resolve(&id.api_version, &id.kind).await {
        Ok(r) => r,
        Err(ResolveError::Unknown(_)) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    match get(t, &res, id.namespace.as_deref(), &id.name).await {
        Ok(o) => Ok(o.map(|o| o.object)),
        Err(f) => Err(f.message),
    }
}

/// GET of one object, read ([`Live::parse`], off the async thread); `None` when it does
/// not exist.
pub async fn get(t: &KubeTarget, res: &Resolved, namespace: Option<&str>, name: &str) -> Result<Option<Live>, ApiFailure> {
    match get_text(t, res, namespace, name).await? {
        Some(text) => parse(text).await.map(Some).map_err(unreadable),
        None => Ok(None),
    }
}

/// A PATCH whose body is JSON `text` as it is (written off the async thread, however
/// large or deep): a server-side apply (`apply`) or a JSON merge patch; the response's
/// `metadata.resourceVersion`.
pub async fn patch_text(t: &KubeTarget, res: &Resolved, namespace: Option<&str>, name: &str, params: &PatchParams, apply: bool, text: &str) -> Result<String, ApiFailure> {
    let r = requests(res, namespace);
    let call = || {
        let kind = if apply { Patch::Apply(Value::Null) } else { Patch::Merge(Value::Null) };
        let req = r.patch(name, params, &kind).map_err(kube::Error::BuildRequest).map(|mut req| {
            *req.body_mut() = text.as_bytes().to_vec();
            req
        });
        async move { t.client.request_text(req?).await }
    };
    let text = with_retry(&t.opts.retry, call).await?;
    off_thread_if_large(text.len(), move || drover_ssa::live::resource_version(&text)).await.map_err(unreadable)
}

/// A PATCH whose response is read whole ([`Live::parse`]): a dry run's answer.
pub async fn patch_read<P: serde::Serialize + std::fmt::Debug>(t: &KubeTarget, res: &Resolved, namespace: Option<&str>, name: &str, params: &PatchParams, patch: &Patch<P>) -> Result<Live, ApiFailure> {
    let r = requests(res, namespace);
    let call = || {
        let req = r.patch(name, params, patch).map_err(kube::Error::BuildRequest);
        async move { t.client.request_text(req?).await }
    };
    let text = with_retry(&t.opts.retry, call).await?;
    parse(text).await.map_err(unreadable)
}

/// A DELETE (the response, the object or a Status, is not read).
pub async fn delete(t: &KubeTarget, res: &Resolved, namespace: Option<&str>, name: &str, params: &DeleteParams) -> Result<(), ApiFailure> {
    let r = requests(res, namespace);
    let call = || {
        let req = r.delete(name, params).map_err(kube::Error::BuildRequest);
        async move { t.client.request_text(req?).await }
    };
    with_retry(&t.opts.retry, call).await.map(|_| ())
}

/// Reads `text`, on a blocking thread when it is large (a 1.5 MiB object takes
/// milliseconds; a deep one grows its stack on the heap wherever it runs).
pub async fn parse(text: String) -> Result<Live, String> {
    off_thread_if_large(text.len(), move || Live::parse(&text)).await
}

fn unreadable(why: String) -> ApiFailure {
    ApiFailure { code: 0, message: format!("the API server's answer cannot be read: {why}"), transient: false, retry_after: None }
}

/// `live`'s metadata as the typed form the ownership rule reads.
pub fn meta(live: &Value) -> kube::api::ObjectMeta {
    live.get("metadata").cloned().and_then(|m| serde_json::from_value(m).ok()).unwrap_or_default()
}
