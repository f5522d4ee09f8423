//! The status document (`/status`, `drover-agent status -o json`).

use serde::{Deserialize, Serialize};

use crate::drift::DriftedObject;
use crate::hold::Held;
use crate::record::{AttemptSummary, SourceState};
use crate::targets::{Health, KindSchema};

/// What `status` reports. Field names are part of the interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    /// The polled source.
    pub source: String,
    /// The agent's state directory (absolute): which agent this is.
    pub state_dir: String,
    /// The endpoint that answered (`drover-agent status` only; absent when read from the
    /// state directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Why the answer was read from the state directory although an agent answered at
    /// the endpoint (it serves another state directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
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
    /// Set while the agent is held (`drover-agent hold`, or the kube target's
    /// `drover.dev/hold` annotation): why, since when, and the verified bundle waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
    /// Objects that differ from the applied bundle and were left as they are
    /// (`--drift report`): object, changed or missing, the drifted fields, since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<DriftedObject>,
    /// Where the schema of each kind the kube target compared came from, as of the last
    /// recorded attempt (docs/kubernetes.md, "Which schema").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemas: Vec<KindSchema>,
}

/// One line per schema source: the source, then its kinds.
fn schema_lines(schemas: &[KindSchema]) -> Vec<String> {
    let mut by: Vec<(String, Vec<String>)> = Vec::new();
    for k in schemas {
        let source = k.source.to_string();
        let kind = format!("{}/{}", k.api_version, k.kind);
        match by.iter_mut().find(|(s, _)| *s == source) {
            Some((_, kinds)) => kinds.push(kind),
            None => by.push((source, vec![kind])),
        }
    }
    by.into_iter().map(|(s, kinds)| format!("{s}: {}", kinds.join(", "))).collect()
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
        self.drifted = s.drifted.clone();
        self.schemas = s.schemas.clone();
    }

    /// Human-readable rendering.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let or_none = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
        out += &format!("source:        {}\n", self.source);
        out += &format!("state dir:     {}\n", if self.state_dir.is_empty() { "-" } else { &self.state_dir });
        if !self.target.is_empty() {
            out += &format!("target:        {}\n", self.target);
        }
        let agent = match (&self.endpoint, self.agent_running) {
            (Some(e), true) => format!("running at {e} ({}, {})", self.role, if self.ready { "ready" } else { "not ready" }),
            (None, true) => format!("running ({}, {})", self.role, if self.ready { "ready" } else { "not ready" }),
            (_, false) => "not running (read from the state directory)".into(),
        };
        out += &format!("agent:         {agent}\n");
        if let Some(n) = &self.notice {
            out += &format!("note:          {n}\n");
        }
        out += &format!(
            "applied:       {} sequence {} at {}\n",
            or_none(&self.applied_digest),
            self.applied_sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            or_none(&self.applied_at)
        );
        if let Some(h) = &self.held {
            out += &format!("held:          since {} by {}: {}\n", h.since, h.by, h.reason);
            if let Some(d) = &h.waiting_digest {
                let seq = h.waiting_sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
                let when = if h.by == crate::hold::HoldOrigin::Window { "in the next apply window" } else { "on release" };
                out += &format!("waiting:       {d} sequence {seq} (verified; applied {when})\n");
            }
            if let Some(n) = &h.next_window {
                out += &format!("next window:   {n}\n");
            }
        }
        if !self.drifted.is_empty() {
            out += &format!("drifted:       {} object(s), reported and left as they are (--drift report)\n", self.drifted.len());
            for d in &self.drifted {
                out += &format!("  {} (since {})\n", crate::drift::one(d), d.since);
            }
        }
        out += &format!("health:        {}\n", self.health.map(|h| h.to_string()).unwrap_or_else(|| "-".into()));
        if !self.schemas.is_empty() {
            out += &format!("schemas:       {}\n", schema_lines(&self.schemas).join("\n               "));
        }
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
            if let Some(w) = a.writes {
                out += &format!("writes:        {} (create {}, update {}, patch {}, delete {})\n", w.total(), w.create, w.update, w.patch, w.delete);
            }
        }
        out
    }
}
