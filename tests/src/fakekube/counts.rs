//! Request counting of the FAKE API server: every request that addresses a resource is
//! counted per verb (as the real server's `apiserver_request_total` names them) and per
//! resource (`configmaps`, `deployments.apps`, `deployments.apps/status`). Discovery,
//! OpenAPI, health and `/fake/` hook requests address no resource and are not counted.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The verb of a resource request, as the real API server derives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (server-side apply included; the request log tells the content types apart).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    #[serde(rename = "DELETECOLLECTION")]
    DeleteCollection,
}

impl Verb {
    /// The verb of `method` on a path with or without an object name.
    pub fn of(method: &str, named: bool, watch: bool) -> Option<Verb> {
        Some(match (method, named) {
            ("GET", true) => Verb::Get,
            ("GET", false) if watch => Verb::Watch,
            ("GET", false) => Verb::List,
            ("POST", _) => Verb::Create,
            ("PUT", _) => Verb::Update,
            ("PATCH", _) => Verb::Patch,
            ("DELETE", true) => Verb::Delete,
            ("DELETE", false) => Verb::DeleteCollection,
            _ => return None,
        })
    }
}

/// One row of [`RequestCounts`], as `GET /fake/request-counts` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountRow {
    /// The verb.
    pub verb: Verb,
    /// The resource (`configmaps`, `deployments.apps`, `deployments.apps/status`).
    pub resource: String,
    /// How many requests.
    pub count: u64,
}

/// Request counts per (verb, resource) since the server started or the last reset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    counts: BTreeMap<(Verb, String), u64>,
}

impl RequestCounts {
    /// Counts one request.
    pub fn add(&mut self, verb: Verb, resource: &str) {
        *self.counts.entry((verb, resource.to_string())).or_default() += 1;
    }

    /// Requests with `verb` on `resource`.
    pub fn get(&self, verb: Verb, resource: &str) -> u64 {
        self.counts
            .get(&(verb, resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Requests with `verb`, any resource.
    pub fn verb(&self, verb: Verb) -> u64 {
        self.counts
            .iter()
            .filter(|((v, _), _)| *v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests on `resource`, any verb.
    pub fn resource(&self, resource: &str) -> u64 {
        self.counts
            .iter()
            .filter(|((_, r), _)| r == resource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every counted request.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Every (verb, resource) with its count, sorted by verb then resource.
    pub fn rows(&self) -> Vec<CountRow> {
        self.counts
            .iter()
            .map(|((verb, resource), count)| CountRow {
                verb: *verb,
                resource: resource.clone(),
                count: *count,
            })
            .collect()
    }

    /// Forgets every count.
    pub fn reset(&mut self) {
        self.counts.clear();
    }
}
