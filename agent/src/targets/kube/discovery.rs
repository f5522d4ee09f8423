//! GVK → API resource resolution through the server's discovery documents, one
//! group-version at a time (`/api/v1`, `/apis/GROUP/VERSION`), cached. The cache of a
//! group is dropped after its CRDs are applied and Established, and a kind missing from a
//! cached group-version is looked up once more before it is reported unknown.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::core::GroupVersion;
use kube::Client;
use tokio::sync::Mutex;

use super::retry::{with_retry, ApiFailure, RetryPolicy};

/// A resolved kind: how to reach its objects.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The resource (group, version, plural).
    pub resource: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

impl Resolved {
    /// The dynamic API for one object of this kind (`namespace` ignored when cluster-scoped).
    pub fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &self.resource),
            _ => Api::all_with(client.clone(), &self.resource),
        }
    }
}

/// Why a kind cannot be resolved.
#[derive(Debug, Clone)]
pub enum ResolveError {
    /// The server does not serve this apiVersion/kind.
    Unknown(String),
    /// Discovery itself failed.
    Api(ApiFailure),
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResolveError::Unknown(m) => f.write_str(m),
            ResolveError::Api(a) => write!(f, "discovery failed: {a}"),
        }
    }
}

type GvResources = Arc<Vec<(ApiResource, ApiCapabilities)>>;

/// The discovery cache.
pub struct Resolver {
    client: Client,
    retry: RetryPolicy,
    cache: Mutex<HashMap<String, GvResources>>,
}

impl Resolver {
    /// An empty cache.
    pub fn new(client: Client, retry: RetryPolicy) -> Self {
        Resolver { client, retry, cache: Mutex::new(HashMap::new()) }
    }

    /// Resolves `apiVersion` + `kind`.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<Resolved, ResolveError> {
        let mut cache = self.cache.lock().await;
        if let Some(found) = cache.get(api_version).and_then(|list| find(list, kind)) {
            return Ok(found);
        }
        // Not cached, or the kind is missing from a cached list (a CRD may have appeared).
        let list = self.fetch(api_version).await?;
        cache.insert(api_version.to_string(), list.clone());
        find(&list, kind).ok_or_else(|| unknown(api_version, kind))
    }

    /// Forgets every cached group-version of `group` (after its CRDs were established).
    pub async fn invalidate_group(&self, group: &str) {
        let mut cache = self.cache.lock().await;
        cache.retain(|gv, _| gv_group(gv) != group);
    }

    async fn fetch(&self, api_version: &str) -> Result<GvResources, ResolveError> {
        let gv: GroupVersion = api_version.parse().map_err(|_| ResolveError::Unknown(format!("{api_version:?} is not a valid apiVersion")))?;
        let group = match with_retry(&self.retry, || discovery::pinned_group(&self.client, &gv)).await {
            Ok(g) => g,
            Err(f) if f.not_found() => return Ok(Arc::new(Vec::new())),
            Err(f) => return Err(ResolveError::Api(f)),
        };
        Ok(Arc::new(group.versioned_resources(&gv.version)))
    }
}

fn gv_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

fn unknown(api_version: &str, kind: &str) -> ResolveError {
    let hint = if gv_group(api_version).contains('.') && !gv_group(api_version).ends_with(".k8s.io") {
        " (is its CustomResourceDefinition installed and Established?)"
    } else {
        ""
    };
    ResolveError::Unknown(format!("the server does not serve kind {kind} in {api_version}{hint}"))
}

fn find(list: &[(ApiResource, ApiCapabilities)], kind: &str) -> Option<Resolved> {
    list.iter()
        .find(|(ar, _)| ar.kind == kind)
        .map(|(ar, caps)| Resolved { resource: ar.clone(), namespaced: caps.scope == Scope::Namespaced })
}
