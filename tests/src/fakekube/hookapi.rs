//! The HTTP side of the test hooks: the `/fake/` endpoints (error rules, request log and
//! counts, rollout modes, CRD delay, status writes, the stored objects, aggregated APIs
//! with their OpenAPI: `POST /fake/apis {group, version, kind, plural, namespaced,
//! statusSubresource, openapi}`), for tests that run the `fake-apiserver` binary.

use super::hooks::ErrorRule;
use super::reply::{error_response, json_response};
use super::rollout::RolloutMode;
use super::routes::{route, Route};
use super::shared::Shared;
use super::status::ApiError;
use axum::http::Method;
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Serves the `/fake/` hook endpoints.
pub(crate) fn fake_hook(
    shared: &Arc<Shared>,
    method: &Method,
    path: &str,
    bytes: &[u8],
) -> Response {
    let body = || {
        serde_json::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("hook body is not JSON: {e}")))
    };
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let result: Result<Value, ApiError> = (|| match (method.as_str(), &segs[1..]) {
        ("GET", ["requests"]) => Ok(serde_json::to_value(&shared.hooks().log).unwrap_or_default()),
        ("DELETE", ["requests"]) => {
            shared.hooks().log.clear();
            Ok(json!({}))
        }
        ("GET", ["request-counts"]) => {
            Ok(serde_json::to_value(shared.hooks().counts.rows()).unwrap_or_default())
        }
        ("DELETE", ["request-counts"]) => {
            shared.hooks().counts.reset();
            Ok(json!({}))
        }
        ("POST", ["apis"]) => {
            let b = body()?;
            let text = |k: &str| b[k].as_str().map(str::to_string).ok_or_else(|| ApiError::bad_request(format!("an aggregated API needs {k:?}")));
            let res = super::resources::ResourceInfo {
                group: text("group")?,
                version: text("version")?,
                kind: text("kind")?,
                plural: text("plural")?,
                singular: text("kind")?.to_lowercase(),
                namespaced: b["namespaced"].as_bool().unwrap_or(true),
                short_names: Vec::new(),
                status_subresource: b["statusSubresource"].as_bool().unwrap_or(false),
                custom: false,
            };
            shared.state().apis.push((res, b["openapi"].clone()));
            Ok(json!({}))
        }
        ("GET", ["errors"]) => Ok(serde_json::to_value(&shared.hooks().rules).unwrap_or_default()),
        ("POST", ["errors"]) => {
            let rule: ErrorRule = serde_json::from_value(body()?)
                .map_err(|e| ApiError::bad_request(format!("bad error rule: {e}")))?;
            shared.hooks().rules.push(rule);
            Ok(json!({}))
        }
        ("DELETE", ["errors"]) => {
            shared.hooks().rules.clear();
            Ok(json!({}))
        }
        ("PUT", ["rollout"]) | ("PUT", ["rollout", _, _]) => {
            let b = body()?;
            let mode = b["mode"]
                .as_str()
                .map(|m| {
                    RolloutMode::parse(m).ok_or_else(|| {
                        ApiError::bad_request(format!("mode {m:?} is not ready, stuck or none"))
                    })
                })
                .transpose()?;
            let mut st = shared.state();
            match (&segs[1..], mode) {
                ([_, ns, name], Some(m)) => {
                    st.settings
                        .rollout_overrides
                        .insert((ns.to_string(), name.to_string()), m);
                }
                (_, Some(m)) => st.settings.rollout_default = m,
                _ => {}
            }
            if let Some(ms) = b["delayMs"].as_u64() {
                st.settings.rollout_delay = Duration::from_millis(ms);
            }
            Ok(json!({}))
        }
        ("PUT", ["crd-delay"]) => {
            let ms = body()?["delayMs"]
                .as_u64()
                .ok_or_else(|| ApiError::bad_request("delayMs (a number) is required"))?;
            shared.state().settings.crd_delay = Duration::from_millis(ms);
            Ok(json!({}))
        }
        ("GET", ["objects"]) => Ok(Value::Array(
            shared.state().objects.values().cloned().collect(),
        )),
        ("PUT", ["status", rest @ ..]) => {
            let status = body()?;
            let mut st = shared.state();
            let Route::Resource(t) = route(&st, rest, "")? else {
                return Err(ApiError::no_route());
            };
            let name = t.name.ok_or_else(ApiError::no_route)?;
            let k = super::store::key(&t.res, t.ns.as_deref(), &name);
            st.write_status(&t.res, &k, status)
                .ok_or_else(|| ApiError::not_found(&t.res, &name))
        }
        _ => Err(ApiError::new(
            404,
            "NotFound",
            format!("no fake hook {method} {path}; see docs/fake-apiserver.md"),
        )),
    })();
    match result {
        Ok(v) => json_response(200, &v),
        Err(e) => error_response(&e),
    }
}
