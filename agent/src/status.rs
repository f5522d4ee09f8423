//! The status document (`/status`, `drover-agent status -o json`): the agent (state
//! directory, target, role, readiness) and one [`SourceStatus`] per source under
//! `sources`. With exactly one source its fields are also at the top level, as before
//! sources could be several (`appliedDigest`, `lastAttempt`, ...).

use serde::{Deserialize, Serialize};

use crate::drift::DriftedObject;
use crate::hold::Held;
use crate::record::{AttemptSummary, SourceState};
use crate::targets::{Health, KindSchema};

/// What `status` reports about one source. Field names are part of the interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SourceStatus {
    /// The source's name ([`crate::config::DEFAULT_NAME`] for the single unnamed one).
    pub name: String,
    /// The polled reference.
    pub source: String,
    /// The sources it depends on (`dependsOn`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// True once its applied state is in place in this run.
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
    /// Set while the source is held (`drover-agent hold`, or the kube target's
    /// `drover.dev/hold` annotation): why, since when, and the verified bundle waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
    /// Set while a verified new bundle waits for the sources it depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::depends::Waiting>,
    /// Objects that differ from the applied bundle and were left as they are
    /// (`--drift report`): object, changed or missing, the drifted fields, since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<DriftedObject>,
    /// Where the schema of each kind the kube target compared came from, as of the last
    /// recorded attempt (docs/kubernetes.md, "Which schema").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemas: Vec<KindSchema>,
    /// A rollback in force (`--on-degraded rollback`): the Degraded bundle refused (`from`),
    /// the one put back (`to`), when and why; `released` once an operator lifted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<crate::rollback::RolledBack>,
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

/// What `status` reports. Field names are part of the interface.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    /// The agent's state directory (absolute): which agent this is.
    pub state_dir: String,
    /// The endpoint that answered (`drover-agent status` only; absent when read from the
    /// state directory).
    pub endpoint: Option<String>,
    /// Why the answer was read from the state directory although an agent answered at
    /// the endpoint (it serves another state directory).
    pub notice: Option<String>,
    /// The target (`dir:/path`, `kube`).
    pub target: String,
    /// `single` (no leader election), `leader` or `standby`.
    pub role: String,
    /// True when the answer comes from a running agent (false: read from the state dir).
    pub agent_running: bool,
    /// True once every source's applied state is in place in this run (`/readyz`).
    pub ready: bool,
    /// Every source, in the order configured.
    pub sources: Vec<SourceStatus>,
}

/// The agent's own fields, as serialized.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentFields<'a> {
    state_dir: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: &'a Option<String>,
    target: &'a str,
    role: &'a str,
    agent_running: bool,
    ready: bool,
    sources: &'a [SourceStatus],
}

impl Serialize for Status {
    /// The agent's fields and `sources`; with one source, its fields at the top level too
    /// (the agent's own `ready` wins over the source's: they are the same then).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let agent = AgentFields {
            state_dir: &self.state_dir,
            endpoint: &self.endpoint,
            notice: &self.notice,
            target: &self.target,
            role: &self.role,
            agent_running: self.agent_running,
            ready: self.ready,
            sources: &self.sources,
        };
        let mut doc = match serde_json::to_value(&agent).map_err(S::Error::custom)? {
            serde_json::Value::Object(m) => m,
            _ => unreachable!("a struct serializes to an object"),
        };
        if let [one] = self.sources.as_slice() {
            if let serde_json::Value::Object(fields) = serde_json::to_value(one).map_err(S::Error::custom)? {
                for (k, v) in fields {
                    doc.entry(k).or_insert(v);
                }
            }
        }
        doc.serialize(s)
    }
}

impl SourceStatus {
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
        self.rolled_back = s.rolled_back.clone();
        self.waiting = s.waiting.clone();
    }

    /// Human-readable rendering of the source's fields.
    fn to_text(&self, out: &mut String) {
        let or_none = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "applied:       {} sequence {} at {}\n",
            or_none(&self.applied_digest),
            self.applied_sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            or_none(&self.applied_at)
        ));
        if !self.depends_on.is_empty() {
            out.push_str(&format!("depends on:    {}\n", self.depends_on.join(", ")));
        }
        if let Some(w) = &self.waiting {
            out.push_str(&format!("waiting:       {} (verified; applied once {} applied and Healthy)\n", w.reason, w.on.join(", ")));
        }
        if let Some(h) = &self.held {
            out.push_str(&format!("held:          since {} by {}: {}\n", h.since, h.by, h.reason));
            if let Some(d) = &h.waiting_digest {
                let seq = h.waiting_sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
                let when = if h.by == crate::hold::HoldOrigin::Window { "in the next apply window" } else { "on release" };
                out.push_str(&format!("waiting:       {d} sequence {seq} (verified; applied {when})\n"));
            }
            if let Some(n) = &h.next_window {
                out.push_str(&format!("next window:   {n}\n"));
            }
        }
        if !self.drifted.is_empty() {
            out.push_str(&format!("drifted:       {} object(s), reported and left as they are (--drift report)\n", self.drifted.len()));
            for d in &self.drifted {
                out.push_str(&format!("  {} (since {})\n", crate::drift::one(d), d.since));
            }
        }
        if let Some(r) = &self.rolled_back {
            out.push_str(&format!("rolled back:   from {} (sequence {}) to {} (sequence {}) at {}\n", r.from.digest, r.from.sequence, r.to.digest, r.to.sequence, r.at));
            out.push_str(&format!("               {}\n", r.reason));
            if r.released {
                out.push_str("               released by the operator: the channel's bundle is applied again\n");
            } else {
                out.push_str(&format!("               {} is refused until a newer bundle arrives or `drover-agent release --rollback`\n", r.from.digest));
            }
        }
        if let Some(r) = &self.report {
            out.push_str(&r.to_text());
        }
        out.push_str(&format!("health:        {}\n", self.health.map(|h| h.to_string()).unwrap_or_else(|| "-".into())));
        if !self.schemas.is_empty() {
            out.push_str(&format!("schemas:       {}\n", schema_lines(&self.schemas).join("\n               ")));
        }
        out.push_str(&format!("inventory:     {} objects\n", self.inventory));
        if let Some(a) = &self.last_attempt {
            out.push_str(&format!(
                "last attempt:  {} {} sequence {} at {}\n",
                a.result,
                a.digest.as_deref().unwrap_or("-"),
                a.sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
                a.at
            ));
            if !a.reason.is_empty() {
                out.push_str(&format!("reason:        {}\n", a.reason));
            }
            if let Some(w) = a.writes {
                out.push_str(&format!("writes:        {} (create {}, update {}, patch {}, delete {})\n", w.total(), w.create, w.update, w.patch, w.delete));
            }
        }
    }
}

impl Status {
    /// Keeps only the source named `name`; the error lists the names there are.
    pub fn only(mut self, name: &str) -> Result<Status, String> {
        let names: Vec<String> = self.sources.iter().map(|s| s.name.clone()).collect();
        self.sources.retain(|s| s.name == name);
        if self.sources.is_empty() {
            return Err(format!("no source is named {name:?}; this agent's sources are: {}", names.join(", ")));
        }
        Ok(self)
    }

    /// The one source, when there is exactly one.
    pub fn single(&self) -> Option<&SourceStatus> {
        match self.sources.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Human-readable rendering: the agent, then each source (one source: as one block).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(one) = self.single() {
            if one.name != crate::config::DEFAULT_NAME {
                out += &format!("name:          {}\n", one.name);
            }
            out += &format!("source:        {}\n", one.source);
        }
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
        if let Some(one) = self.single() {
            one.to_text(&mut out);
            return out;
        }
        for s in &self.sources {
            let ready = if !self.agent_running {
                ""
            } else if s.ready {
                ", ready"
            } else {
                ", not ready"
            };
            out += &format!("\n[{}] {}{ready}\n", s.name, s.source);
            s.to_text(&mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_source_is_also_at_the_top_level_and_no_key_is_given_twice() {
        let one = SourceStatus { name: "default".into(), source: "r.example/a:prod".into(), ready: true, inventory: 3, ..Default::default() };
        let st = Status { state_dir: "/s".into(), ready: false, agent_running: true, sources: vec![one.clone()], ..Default::default() };
        let text = serde_json::to_string(&st).unwrap();
        assert_eq!(text.matches("\"ready\"").count(), 2, "the agent's and the source's in `sources`: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!((v["source"].as_str(), v["inventory"].as_u64(), v["ready"].as_bool()), (Some("r.example/a:prod"), Some(3), Some(false)));
        let two = Status { sources: vec![one.clone(), SourceStatus { name: "b".into(), ..one }], ..st };
        let v = serde_json::to_value(&two).unwrap();
        assert!(v.get("source").is_none() && v["sources"].as_array().unwrap().len() == 2, "{v}");
        let back: Status = serde_json::from_value(v).unwrap();
        assert_eq!(back.only("b").unwrap().sources[0].name, "b");
        assert!(two.only("c").unwrap_err().contains("default, b"));
    }
}
