//! The status document (`/status`, `drover-agent status -o json`).

use serde::{Deserialize, Serialize};

use crate::record::{AttemptSummary, SourceState};
use crate::targets::Health;

/// What `status` reports. Field names are part of the interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The polled source.
    pub source: String,
    /// The target (`dir:/path`, `kube`).
    pub target: String,
    /// `single` (no leader election), `leader` or `standby`.
    pub role: String,
    /// True when the answer comes from a running agent (false: read from the state dir).
    pub agent_running: bool,
    /// True once the applied state is in place in this run (`/readyz`).
    pub ready: bool,
    /// Applied manifest digest.
    pub applied_digest: Option<String>,
    /// Applied sequence.
    pub applied_sequence: Option<u64>,
    /// When it was applied.
    pub applied_at: Option<String>,
    /// Fingerprint of the trust policy the applied digest was verified under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_fingerprint: Option<String>,
    /// Health after the last apply.
    pub health: Option<Health>,
    /// Number of objects in the inventory.
    pub inventory: usize,
    /// The last attempt.
    pub last_attempt: Option<AttemptSummary>,
    /// Last time the source was polled.
    pub last_poll_at: Option<String>,
    /// Registry errors in a row (backoff).
    pub consecutive_failures: u32,
}

impl Status {
    /// Fills the recorded fields from a source's state.
    pub fn set_state(&mut self, s: &SourceState) {
        self.source = s.source.clone();
        self.applied_digest = s.applied_digest.clone();
        self.applied_sequence = s.applied_sequence;
        self.applied_at = s.applied_at.clone();
        self.policy_fingerprint = s.policy_fingerprint.clone();
        self.health = s.health;
        self.inventory = s.inventory.len();
        self.last_attempt = s.last_attempt.clone();
    }

    /// Human-readable rendering.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let or_none = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
        out += &format!("source:        {}\n", self.source);
        if !self.target.is_empty() {
            out += &format!("target:        {}\n", self.target);
        }
        out += &format!(
            "agent:         {}\n",
            if self.agent_running { format!("running ({}, {})", self.role, if self.ready { "ready" } else { "not ready" }) } else { "not running (read from the state directory)".into() }
        );
        out += &format!(
            "applied:       {} sequence {} at {}\n",
            or_none(&self.applied_digest),
            self.applied_sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            or_none(&self.applied_at)
        );
        out += &format!("health:        {}\n", self.health.map(|h| h.to_string()).unwrap_or_else(|| "-".into()));
        out += &format!("inventory:     {} objects\n", self.inventory);
        if let Some(a) = &self.last_attempt {
            out += &format!(
                "last attempt:  {} {} sequence {} at {}\n",
                a.result,
                a.digest.as_deref().unwrap_or("-"),
                a.sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
                a.at
            );
            if !a.reason.is_empty() {
                out += &format!("reason:        {}\n", a.reason);
            }
        }
        out
    }
}
