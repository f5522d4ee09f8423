//! Test hooks of the FAKE API server: error injection rules, the request log and the
//! request counts. Reachable from Rust (methods on [`super::FakeApiServer`]) and over
//! HTTP under `/fake/` ([`super::hookapi`]; see `docs/fake-apiserver.md`).

use super::counts::RequestCounts;
use super::util::glob_match;
use serde::{Deserialize, Serialize};

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

/// The request log keeps at most this many entries (oldest dropped first).
pub const LOG_CAP: usize = 100_000;

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
