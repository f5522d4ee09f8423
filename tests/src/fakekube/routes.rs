//! Kubernetes API paths as the FAKE API server reads them: discovery and OpenAPI
//! documents, or a resource request (resource, namespace, name, subresource), with names
//! percent-decoded.

use super::discovery;
use super::openapi;
use super::resources::ResourceInfo;
use super::status::ApiError;
use super::store::State;
use super::util::path_decode;
use serde_json::Value;

/// Where a resource request points.
pub(crate) struct Target {
    pub(crate) res: ResourceInfo,
    pub(crate) ns: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
}

/// What a path names.
pub(crate) enum Route {
    Doc(Value),
    Aggregated(Value),
    Resource(Target),
}

/// Resolves the path segments `segs` (discovery answers depend on `accept`).
pub(crate) fn route(state: &State, segs: &[&str], accept: &str) -> Result<Route, ApiError> {
    let all: Vec<&ResourceInfo> = state.all_resources().collect();
    let (group, version, rest) = match segs {
        ["version"] => return Ok(Route::Doc(discovery::version(state.settings.minor))),
        ["openapi", "v3"] => return Ok(Route::Doc(openapi::root(&all))),
        ["openapi", "v3", "api", v] => {
            return openapi::group_version(state, "", v)
                .map(Route::Doc)
                .ok_or_else(ApiError::no_route)
        }
        ["openapi", "v3", "apis", g, v] => {
            return openapi::group_version(state, g, v)
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
        (Some(path_decode(rest[1])), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 {
        return Err(ApiError::no_route());
    }
    let res = state
        .resolve(group, version, rest[0])
        .ok_or_else(ApiError::no_route)?;
    let name = rest.get(1).map(|s| path_decode(s));
    let sub = rest.get(2).map(|s| s.to_string());
    if (!res.namespaced && ns.is_some())
        || (res.namespaced && ns.is_none() && name.is_some())
        || sub.as_deref().is_some_and(|s| s != "status" && !(s == "scale" && res.scalable()))
    {
        return Err(ApiError::no_route());
    }
    Ok(Route::Resource(Target { res, ns, name, sub }))
}
