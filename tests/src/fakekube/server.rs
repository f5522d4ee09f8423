//! The HTTP side of the FAKE API server: parses Kubernetes API paths, applies injected
//! errors, dispatches to the store, logs each request, and serves `/fake/` hooks.

use super::counts::Verb;
use super::discovery;
use super::hooks::{RequestRecord, LOG_CAP};
use super::reply::{error_response, json_response};
use super::routes::{route, Route, Target};
use super::selector::Selector;
use super::shared::Shared;
use super::status::ApiError;
use super::store::{Deferred, State, WriteOpts};
use super::util::parse_query;
use super::watch::WatchFilter;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The router: every path goes through [`handle`].
pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(shared)
}

/// Query parameters of one request.
struct Query(Vec<(String, String)>);

impl Query {
    fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
    }
}

/// The most a request body may hold (the real server's `MaxRequestBodyBytes`, 3 MiB).
pub const MAX_BODY: usize = 3 << 20;

/// Nesting the real server's JSON decoder takes (Go's `encoding/json`, 10,000 levels).
pub const MAX_JSON_DEPTH: usize = 10_000;

/// How deep `bytes` nests (brackets outside strings): one pass, no recursion.
fn json_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

fn parse_body(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") || content_type.contains("cbor") {
        return Err(ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (this FAKE API server does not decode {content_type})")));
    }
    if content_type.contains("yaml") {
        serde_yaml_ng::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    } else {
        // As deep as the real decoder goes, on a stack that grows (the store's own deep
        // values are handled on the runtime's large worker stacks).
        if json_depth(bytes) > MAX_JSON_DEPTH {
            return Err(ApiError::bad_request("error decoding JSON: exceeded max depth".to_string()));
        }
        let mut de = serde_json::Deserializer::from_slice(bytes);
        de.disable_recursion_limit();
        let v = <Value as serde::Deserialize>::deserialize(serde_stacker::Deserializer::new(&mut de))
            .and_then(|v| de.end().map(|()| v))
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON: {e}")))?;
        Ok(v)
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
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(&ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_BODY}"),
            ))
        }
    };
    if path == "/fake" || path.starts_with("/fake/") {
        return super::hookapi::fake_hook(&shared, &parts.method, &path, &bytes);
    }
    let counted = counted_as(&shared, &parts.method, &path, &query);
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
    if let Some((verb, resource)) = counted {
        hooks.counts.add(verb, &resource);
    }
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

/// The verb and resource a request is counted as, when it addresses a resource.
fn counted_as(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: &Query,
) -> Option<(Verb, String)> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Ok(Route::Resource(t)) = route(&shared.state(), &segs, "") else {
        return None;
    };
    let watch = matches!(query.get("watch"), Some("true" | "1"));
    let verb = Verb::of(method.as_str(), t.name.is_some(), watch)?;
    let resource = match &t.sub {
        Some(sub) => format!("{}/{sub}", t.res.qualified()),
        None => t.res.qualified(),
    };
    Some((verb, resource))
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
        Ok(Reply::Json(200, v)) if method == Method::GET && t.res.group.is_empty() && t.res.plural == "events" && super::table::wants_table(header_str(headers, header::ACCEPT)) => {
            json_response(200, &super::table::events(&v, query.get("includeObject"), drover_proto::time::now_unix()))
        }
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
        field_validation: query.get("fieldValidation").map(str::to_string),
    };
    if t.res.group == super::events::GROUP {
        let media = ct.split(';').next().unwrap_or("").trim();
        let body = || parse_body(bytes, ct);
        let req = super::events::Request { method, v1: &t.res, ns, name: t.name.as_deref(), query: &query.0, media, opts: &opts };
        return super::events::op(state, req, body).map(|(c, v)| Reply::Json(c, v));
    }
    if let (Some("scale"), Some(name)) = (t.sub.as_deref(), &t.name) {
        return scale_op(state, method, t, name, ct, bytes, &opts).map(|v| Reply::Json(200, v));
    }
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
            let matching = state.matching(&t.res, ns, l.as_ref(), f.as_ref());
            let list = super::paging::page(state, &t.res, matching, query.get("limit"), query.get("continue"))?;
            Ok(Reply::Json(200, list))
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
                "application/merge-patch+json" => {
                    let patch = parse_body(bytes, "json")?;
                    Ok(Reply::Json(200, state.patch_merge(&t.res, ns, name, &patch, &opts)?))
                }
                "application/strategic-merge-patch+json" => {
                    let patch = parse_body(bytes, "json")?;
                    Ok(Reply::Json(200, state.patch_strategic(&t.res, ns, name, &patch, &opts)?))
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

/// The `scale` subresource: GET, PUT of a Scale, merge or JSON patch of it.
fn scale_op(
    state: &mut State,
    method: &Method,
    t: &Target,
    name: &str,
    ct: &str,
    bytes: &[u8],
    opts: &WriteOpts,
) -> Result<Value, ApiError> {
    let ns = t.ns.as_deref();
    let media = ct.split(';').next().unwrap_or("").trim();
    match *method {
        Method::GET => state.get_scale(&t.res, ns, name),
        Method::PUT => {
            let body = parse_body(bytes, ct)?;
            state.write_scale(&t.res, ns, name, |_| Ok(body), opts)
        }
        Method::PATCH if media == "application/json-patch+json" => {
            let ops = parse_body(bytes, "json")?;
            state.write_scale(&t.res, ns, name, |mut s| {
                super::patch::apply_json_patch(&mut s, &ops).map_err(|e| ApiError::new(422, "Invalid", format!("the server rejected our request due to an error in our request: {e}")))?;
                Ok(s)
            }, opts)
        }
        Method::PATCH if matches!(media, "application/merge-patch+json" | "application/strategic-merge-patch+json") => {
            let patch = parse_body(bytes, "json")?;
            state.write_scale(&t.res, ns, name, |mut s| {
                super::patch::merge_patch(&mut s, &patch);
                Ok(s)
            }, opts)
        }
        Method::PATCH => Err(ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json, application/json-patch+json (this FAKE API server does not apply {media:?} to a scale subresource)"))),
        _ => Err(ApiError::new(405, "MethodNotAllowed", format!("the server does not allow this method on the requested resource ({method})"))),
    }
}
