//! The status document (`/status`, `drover-agent status -o json`).

use serde::{Deserialize, Serialize};

use crate::drift::DriftedObject;
use crate::hold::Held;
use crate::record::{AttemptSummary, SourceState};
use crate::targets::Health;

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
    /// The fleet report, when reporting is on (a running agent only: absent when read
    /// from the state directory or when reports are off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportState>,
}

/// How this agent's fleet report stands (docs/fleet.md): where it goes, the key it is
/// signed with (what `drover fleet enroll` approves), the last write and its outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReportState {
    /// Where the report goes (`HOST/REPO:TYPE.NAME`).
    pub to: String,
    /// Fingerprint of the cluster's report key (hex sha256 of its public key), once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_fingerprint: Option<String>,
    /// `written` (the last write succeeded), `failed` (it, or getting the key, failed) or
    /// `pending` (nothing written by this agent yet).
    pub result: String,
    /// When a report was last written (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_write: Option<String>,
    /// Why the last write (or getting the key) failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReportState {
    /// The `report:` lines of `status`.
    fn to_text(&self) -> String {
        let when = self.last_write.as_deref().map(|t| format!(", last written {t}")).unwrap_or_default();
        let mut out = format!("report:        {}{when} to {}\n", self.result, self.to);
        if let Some(e) = &self.error {
            out += &format!("report error:  {e}\n");
        }
        let key = self.key_fingerprint.as_deref().unwrap_or("not yet known (read after the first poll)");
        out += &format!("report key:    {key}\n");
        out
    }
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
        match (&self.report, self.agent_running) {
            (Some(r), _) => out += &r.to_text(),
            (None, true) => out += "report:        off (no --cluster-name, or --no-report)\n",
            (None, false) => {}
        }
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
            if let Some(w) = a.writes {
                out += &format!("writes:        {} (create {}, update {}, patch {}, delete {})\n", w.total(), w.create, w.update, w.patch, w.delete);
            }
        }
        out
    }
}
