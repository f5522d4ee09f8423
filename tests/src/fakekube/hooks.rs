//! Test hooks of the FAKE API server: error injection rules, the request log and the
//! request counts.
//! Reachable from Rust (methods on [`super::FakeApiServer`]) and over HTTP under `/fake/`
//! (see `docs/fake-apiserver.md`).

use super::counts::RequestCounts;
use super::rollout::RolloutMode;
use super::server::{error_response, json_response, route, Route, Shared};
use super::status::ApiError;
use super::util::glob_match;
use axum::http::Method;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Makes the next `times` requests matching `method` + `path` fail (or wait).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ErrorRule {
    /// HTTP method to match (`PATCH`, ...); any when None.
    #[serde(default)]
    pub method: Option<String>,
    /// Glob (`*` = anything) matched against the request path without the query.
    pub path: String,
    /// How many matching requests to affect.
    #[serde(default = "one")]
    pub times: u32,
    /// HTTP status to answer with; 0 = no error (only the delay).
    #[serde(default)]
    pub code: u16,
    /// Status `reason`; derived from the code when None.
    #[serde(default)]
    pub reason: Option<String>,
    /// Status `message`.
    #[serde(default)]
    pub message: Option<String>,
    /// Delay before answering (or before serving normally when `code` is 0), in ms.
    #[serde(default)]
    pub delay_ms: u64,
}

fn one() -> u32 {
    1
}

impl ErrorRule {
    /// A rule answering `code` with `message` once for `method` + `path` (glob).
    pub fn new(method: &str, path: &str, code: u16, message: &str) -> ErrorRule {
        ErrorRule {
            method: Some(method.to_string()),
            path: path.to_string(),
            times: 1,
            code,
            reason: None,
            message: Some(message.to_string()),
            delay_ms: 0,
        }
    }

    /// A rule that only delays matching requests by `ms` milliseconds.
    pub fn delay(method: &str, path: &str, ms: u64) -> ErrorRule {
        ErrorRule {
            method: Some(method.to_string()),
            path: path.to_string(),
            times: 1,
            code: 0,
            reason: None,
            message: None,
            delay_ms: ms,
        }
    }

    /// The same rule for the next `n` matching requests.
    pub fn times(mut self, n: u32) -> ErrorRule {
        self.times = n;
        self
    }

    /// The same rule with an explicit Status `reason`.
    pub fn reason(mut self, reason: &str) -> ErrorRule {
        self.reason = Some(reason.to_string());
        self
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        self.times > 0
            && self
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && glob_match(&self.path, path)
    }
}

/// One served request, as the log records it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// Request Content-Type, if any.
    pub content_type: Option<String>,
    /// `fieldManager` query parameter, if any.
    pub field_manager: Option<String>,
    /// User-Agent header, if any.
    pub user_agent: Option<String>,
    /// HTTP status answered.
    pub status: u16,
    /// Whether an injected rule answered (or delayed) it.
    pub injected: bool,
}

/// Rules, log and counts.
#[derive(Default)]
pub struct Hooks {
    /// Active error rules, first match wins.
    pub rules: Vec<ErrorRule>,
    /// Every request served (hooks under `/fake/` excluded).
    pub log: Vec<RequestRecord>,
    /// Resource requests per verb and resource.
    pub counts: RequestCounts,
}

impl Hooks {
    /// Takes one use of the first rule matching the request.
    pub fn take(&mut self, method: &str, path: &str) -> Option<ErrorRule> {
        let i = self.rules.iter().position(|r| r.matches(method, path))?;
        self.rules[i].times -= 1;
        let r = self.rules[i].clone();
        if self.rules[i].times == 0 {
            self.rules.remove(i);
        }
        Some(r)
    }
}

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
