//! The HTTP side of the FAKE API server: parses Kubernetes API paths, applies injected
//! errors, dispatches to the store, logs each request, and serves `/fake/` hooks.

use super::discovery;
use super::hooks::{Hooks, RequestRecord};
use super::openapi;
use super::resources::ResourceInfo;
use super::selector::Selector;
use super::status::ApiError;
use super::store::{Deferred, State, WriteOpts};
use super::util::parse_query;
use super::watch::WatchFilter;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The request log keeps at most this many entries (oldest dropped first).
pub const LOG_CAP: usize = 100_000;

/// Everything the server shares between requests.
pub struct Shared {
    /// Objects and settings.
    pub state: Mutex<State>,
    /// Error rules and the request log.
    pub hooks: Mutex<Hooks>,
}

impl Shared {
    /// Locks the store (a poisoned lock is still used: tests want answers, not panics).
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the hooks.
    pub fn hooks(&self) -> MutexGuard<'_, Hooks> {
        self.hooks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The router: every path goes through [`handle`].
pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(shared)
}

pub(crate) fn json_response(code: u16, v: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .expect("response")
}

pub(crate) fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

/// Query parameters of one request.
struct Query(Vec<(String, String)>);

impl Query {
    fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
    }
}

/// Where a resource request points.
pub(crate) struct Target {
    pub(crate) res: ResourceInfo,
    pub(crate) ns: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
}

pub(crate) enum Route {
    Doc(Value),
    Aggregated(Value),
    Resource(Target),
}

pub(crate) fn route(state: &State, segs: &[&str], accept: &str) -> Result<Route, ApiError> {
    let all: Vec<&ResourceInfo> = state.all_resources().collect();
    let (group, version, rest) = match segs {
        ["version"] => return Ok(Route::Doc(discovery::version())),
        ["openapi", "v3"] => return Ok(Route::Doc(openapi::root(&all))),
        ["openapi", "v3", "api", v] => {
            return openapi::group_version(&all, "", v)
                .map(Route::Doc)
                .ok_or_else(ApiError::no_route)
        }
        ["openapi", "v3", "apis", g, v] => {
            return openapi::group_version(&all, g, v)
                .map(Route::Doc)
                .ok_or_else(ApiError::no_route)
        }
        ["api"] if discovery::wants_aggregated(accept) => {
            return Ok(Route::Aggregated(discovery::aggregated(&all, true)))
        }
        ["apis"] if discovery::wants_aggregated(accept) => {
            return Ok(Route::Aggregated(discovery::aggregated(&all, false)))
        }
        ["api"] => return Ok(Route::Doc(discovery::core_versions())),
        ["apis"] => return Ok(Route::Doc(discovery::group_list(&all))),
        ["apis", g] => {
            return discovery::group(&all, g)
                .map(Route::Doc)
                .ok_or_else(ApiError::no_route)
        }
        ["api", v] => {
            return discovery::resource_list(&all, "", v)
                .map(Route::Doc)
                .ok_or_else(ApiError::no_route)
        }
        ["apis", g, v] => {
            return discovery::resource_list(&all, g, v)
                .map(Route::Doc)
                .ok_or_else(ApiError::no_route)
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    let namespaced_path = rest.len() >= 3
        && rest[0] == "namespaces"
        && state
            .resolve(group, version, rest[2])
            .is_some_and(|r| r.namespaced);
    let (ns, rest) = if namespaced_path {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 {
        return Err(ApiError::no_route());
    }
    let res = state
        .resolve(group, version, rest[0])
        .ok_or_else(ApiError::no_route)?;
    let name = rest.get(1).map(|s| s.to_string());
    let sub = rest.get(2).map(|s| s.to_string());
    if (!res.namespaced && ns.is_some())
        || (res.namespaced && ns.is_none() && name.is_some())
        || sub.as_deref().is_some_and(|s| s != "status")
    {
        return Err(ApiError::no_route());
    }
    Ok(Route::Resource(Target { res, ns, name, sub }))
}

fn parse_body(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") || content_type.contains("cbor") {
        return Err(ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (this FAKE API server does not decode {content_type})")));
    }
    if content_type.contains("yaml") {
        serde_yaml_ng::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    } else {
        serde_json::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON: {e}")))
    }
}

fn default_manager(headers: &HeaderMap) -> String {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    ua.split('/')
        .next()
        .unwrap_or(ua)
        .chars()
        .take(128)
        .collect()
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Serves one request.
async fn handle(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let query = Query(parse_query(Some(&raw_query)));
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    if path == "/fake" || path.starts_with("/fake/") {
        return super::hooks::fake_hook(&shared, &parts.method, &path, &bytes);
    }
    let rule = shared.hooks().take(parts.method.as_str(), &path);
    let mut injected = None;
    if let Some(r) = &rule {
        if r.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(r.delay_ms)).await;
        }
        if r.code != 0 {
            let reason = r
                .reason
                .clone()
                .unwrap_or_else(|| ApiError::reason_for(r.code).to_string());
            injected = Some(error_response(&ApiError::new(
                r.code,
                &reason,
                r.message
                    .clone()
                    .unwrap_or_else(|| format!("injected {} for {path}", r.code)),
            )));
        }
    }
    let resp = match injected {
        Some(resp) => resp,
        None => dispatch(
            &shared,
            &parts.method,
            &parts.headers,
            &path,
            &query,
            &bytes,
        ),
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut hooks = shared.hooks();
    if hooks.log.len() >= LOG_CAP {
        hooks.log.drain(..LOG_CAP / 10);
    }
    hooks.log.push(RequestRecord {
        method: parts.method.to_string(),
        path,
        query: raw_query,
        content_type,
        field_manager: query.get("fieldManager").map(str::to_string),
        user_agent: parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        status: resp.status().as_u16(),
        injected: rule.is_some(),
    });
    resp
}

/// Runs deferred work on the runtime after its delay.
fn spawn_deferred(shared: &Arc<Shared>, pending: Vec<(Duration, Deferred)>) {
    for (after, d) in pending {
        let s = shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            s.state().run_deferred(d);
        });
    }
}

fn dispatch(
    shared: &Arc<Shared>,
    method: &Method,
    headers: &HeaderMap,
    path: &str,
    query: &Query,
    bytes: &[u8],
) -> Response {
    if matches!(path, "/healthz" | "/readyz" | "/livez") {
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from("ok"))
            .expect("response");
    }
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let mut state = shared.state();
    let route = match route(&state, &segs, header_str(headers, header::ACCEPT)) {
        Ok(r) => r,
        Err(e) => return error_response(&e),
    };
    let t = match route {
        Route::Doc(v) => return json_response(200, &v),
        Route::Aggregated(v) => {
            return Response::builder()
                .header(header::CONTENT_TYPE, discovery::AGGREGATED_CONTENT_TYPE)
                .body(Body::from(v.to_string()))
                .expect("response");
        }
        Route::Resource(t) => t,
    };
    let watch = matches!(query.get("watch"), Some("true" | "1"));
    let apply = method == Method::PATCH
        && header_str(headers, header::CONTENT_TYPE).starts_with("application/apply-patch");
    if let Err(e) = super::rbac::check(&state, headers, method, &t, watch, apply) {
        return error_response(&e);
    }
    let result = resource_op(&mut state, method, headers, &t, query, bytes);
    let pending = std::mem::take(&mut state.pending);
    drop(state);
    spawn_deferred(shared, pending);
    match result {
        Ok(Reply::Json(code, v)) => json_response(code, &v),
        Ok(Reply::Watch(filter, initial, rx, timeout)) => {
            super::watch::watch_response(filter, initial, rx, timeout)
        }
        Err(e) => error_response(&e),
    }
}

// One reply per request, moved once: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum Reply {
    Json(u16, Value),
    Watch(
        WatchFilter,
        Vec<String>,
        tokio::sync::broadcast::Receiver<Arc<super::watch::WatchEvent>>,
        Duration,
    ),
}

fn selectors(query: &Query) -> Result<(Option<Selector>, Option<Selector>), ApiError> {
    let l = query
        .get("labelSelector")
        .filter(|s| !s.is_empty())
        .map(Selector::parse)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))?;
    let f = query
        .get("fieldSelector")
        .filter(|s| !s.is_empty())
        .map(Selector::parse)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("unable to parse fieldSelector: {e}")))?;
    Ok((l, f))
}

fn resource_op(
    state: &mut State,
    method: &Method,
    headers: &HeaderMap,
    t: &Target,
    query: &Query,
    bytes: &[u8],
) -> Result<Reply, ApiError> {
    let ns = t.ns.as_deref();
    let ct = header_str(headers, header::CONTENT_TYPE);
    let opts = WriteOpts {
        manager: query
            .get("fieldManager")
            .map(str::to_string)
            .unwrap_or_else(|| default_manager(headers)),
        dry_run: query.get("dryRun") == Some("All"),
        force: query.get("force") == Some("true"),
        subresource: t.sub.clone(),
    };
    match (method, &t.name) {
        (&Method::GET, Some(name)) => Ok(Reply::Json(200, state.get(&t.res, ns, name)?)),
        (&Method::GET, None) => {
            let (l, f) = selectors(query)?;
            if matches!(query.get("watch"), Some("true" | "1")) {
                let filter = WatchFilter {
                    res: t.res.clone(),
                    namespace: t.ns.clone(),
                    labels: l,
                    fields: f,
                };
                let timeout = Duration::from_secs(
                    query
                        .get("timeoutSeconds")
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(1800),
                );
                let initial_events = query.get("sendInitialEvents") == Some("true");
                let mut initial: Vec<String> = match query
                    .get("resourceVersion")
                    .filter(|r| !r.is_empty() && *r != "0" && !initial_events)
                    .map(|r| r.parse::<u64>())
                {
                    Some(Ok(rv)) => match state.watchers.since(rv) {
                        Some(evs) => evs
                            .iter()
                            .filter(|e| filter.matches(e))
                            .map(|e| filter.line(&e.kind, &e.object))
                            .collect(),
                        None => vec![format!(
                            "{}\n",
                            json!({"type": "ERROR", "object": ApiError::new(410, "Expired", format!("too old resource version: {rv}")).to_status()})
                        )],
                    },
                    Some(Err(_)) => {
                        return Err(ApiError::bad_request("resourceVersion must be a number"))
                    }
                    None => state.list(&t.res, ns, filter.labels.as_ref(), filter.fields.as_ref())
                        ["items"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .iter()
                        .map(|o| filter.line("ADDED", o))
                        .collect(),
                };
                if initial_events {
                    // Streaming list (WatchList): the initial state ends with this bookmark.
                    let mark = json!({"kind": t.res.kind, "apiVersion": t.res.api_version(), "metadata": {"resourceVersion": state.rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}});
                    initial.push(format!("{}\n", json!({"type": "BOOKMARK", "object": mark})));
                }
                return Ok(Reply::Watch(
                    filter,
                    initial,
                    state.watchers.subscribe(),
                    timeout,
                ));
            }
            Ok(Reply::Json(
                200,
                state.list(&t.res, ns, l.as_ref(), f.as_ref()),
            ))
        }
        (&Method::POST, None) => {
            let body = parse_body(bytes, ct)?;
            Ok(Reply::Json(201, state.create(&t.res, ns, body, &opts)?))
        }
        (&Method::PUT, Some(name)) => {
            let body = parse_body(bytes, ct)?;
            Ok(Reply::Json(
                200,
                state.update(&t.res, ns, name, body, &opts)?,
            ))
        }
        (&Method::PATCH, Some(name)) => {
            let media = ct.split(';').next().unwrap_or("").trim();
            match media {
                "application/apply-patch+yaml" | "application/apply-patch+json" => {
                    let body = parse_body(bytes, "yaml")?;
                    let mut opts = opts;
                    opts.manager = query.get("fieldManager").unwrap_or("").to_string();
                    let (obj, created) = state.apply(&t.res, ns, name, body, &opts)?;
                    Ok(Reply::Json(if created { 201 } else { 200 }, obj))
                }
                "application/json-patch+json" => {
                    let ops = parse_body(bytes, "json")?;
                    Ok(Reply::Json(200, state.patch_json(&t.res, ns, name, &ops, &opts)?))
                }
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    let patch = parse_body(bytes, "json")?;
                    Ok(Reply::Json(200, state.patch_merge(&t.res, ns, name, &patch, &opts)?))
                }
                other => Err(ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json, application/json-patch+json, application/apply-patch+yaml (got {other:?})"))),
            }
        }
        (&Method::DELETE, Some(name)) => {
            if !bytes.is_empty() {
                let options = parse_body(bytes, "json")?;
                state.check_preconditions(&t.res, ns, name, &options["preconditions"])?;
            }
            Ok(Reply::Json(200, state.delete(&t.res, ns, name, &opts)?))
        }
        (&Method::DELETE, None) => {
            let (l, f) = selectors(query)?;
            let list = state.list(&t.res, ns, l.as_ref(), f.as_ref());
            for o in list["items"].as_array().cloned().unwrap_or_default() {
                let n = o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let ons = o["metadata"]["namespace"].as_str().map(str::to_string);
                state.delete(&t.res, ons.as_deref(), &n, &opts)?;
            }
            Ok(Reply::Json(200, list))
        }
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )),
    }
}
