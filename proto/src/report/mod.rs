//! Fleet reports (docs/fleet.md): the small document an agent publishes about its cluster,
//! how it is stored as an OCI artifact, where, and how it is read back.
//!
//! - **Document**: [`Report`], JSON, camelCase, schemaVersion 1. Identity, what is applied,
//!   health and since when, the last attempt, object counts, the first failing objects.
//!   No object content, no secrets ([`MAX_FAILING`], [`MAX_MESSAGE`] bound it).
//! - **Artifact** ([`store`]): an OCI image manifest with `artifactType`
//!   [`media::REPORT_ARTIFACT_TYPE`], config = the report ([`media::REPORT_CONFIG`]), no
//!   layers. The config descriptor also embeds the report (`data`, OCI 1.1), so a reader
//!   needs one request per cluster; the blob is pushed too (registries check it exists).
//!   Signed by the cluster's own report key (two manifest annotations).
//! - **Limits** ([`limits`]): the reader refuses or cuts what no agent writes, and cleans
//!   every text field.
//! - **Roster** ([`roster`]): the enrolled clusters' report keys, signed by the release
//!   key; a report counts only when its cluster is enrolled with the key that signed it,
//!   and its times are not in the future ([`roster::Roster::judge`]).
//! - **Tag**: `<cluster-type>.<cluster-name>` ([`report_tag`]); cluster types cannot hold
//!   a `.`, so the tag names one cluster.
//! - **Repository**: `<parent of the source repository>/drover-reports` on the source's
//!   registry unless configured ([`default_repository`]).

pub mod limits;
pub mod roster;
pub mod store;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::object::ObjectRef;
use crate::reference::RegistryRef;

/// The report schema version this code writes and reads.
pub const SCHEMA_VERSION: u32 = 1;
/// The repository name (under the source repository's parent) reports go to by default.
pub const REPORTS_REPOSITORY: &str = "drover-reports";
/// At most this many failing objects are listed.
pub const MAX_FAILING: usize = 10;
/// Messages (per object, and the attempt's reason) are cut to this many characters.
pub const MAX_MESSAGE: usize = 300;
/// The fleet roster's tag in a reports repository (no `.`: never a report's tag; see
/// [`roster`]).
pub const ROSTER_TAG: &str = "drover-roster";
/// Largest report (and report manifest) read or written.
pub const MAX_REPORT_BYTES: u64 = 64 << 10;

/// Health of a cluster's applied state as a report states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub enum ReportHealth {
    /// Every applied object is ready.
    Healthy,
    /// Still rolling out when the agent's health wait ended.
    Progressing,
    /// An object failed (rollout failed, not ready in time, ...).
    Degraded,
    /// Nothing applied yet.
    #[default]
    Unknown,
}

impl std::fmt::Display for ReportHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The last attempt the agent recorded (not the unchanged polls in between).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastAttempt {
    /// `Applied`, `Unchanged`, `Rejected` or `Failed`.
    pub result: String,
    /// Why (empty on plain success), at most [`MAX_MESSAGE`] characters.
    #[serde(default)]
    pub reason: String,
    /// The bundle digest attempted, when it was resolved.
    #[serde(default)]
    pub digest: Option<String>,
    /// When (RFC 3339).
    pub at: String,
}

/// One object that failed to apply or is not healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailingObject {
    /// The object's identity (never its content).
    #[serde(flatten)]
    pub object: ObjectRef,
    /// `failed` (apply), `Degraded` or `Progressing` (health).
    pub state: String,
    /// Why, at most [`MAX_MESSAGE`] characters; withheld for Secrets.
    #[serde(default)]
    pub message: String,
}

impl FailingObject {
    /// A failing object with its message made fit for a report: cut to [`MAX_MESSAGE`]
    /// characters, and withheld for `Secret`s (an API server's message may quote a value).
    pub fn new(object: ObjectRef, state: &str, message: &str) -> Self {
        let message = if object.kind == "Secret" { "(message withheld for Secret objects)".to_string() } else { clip(message) };
        FailingObject { object, state: state.to_string(), message }
    }
}

/// Cuts `s` to [`MAX_MESSAGE`] characters (marking the cut with `…`).
pub fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_MESSAGE {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_MESSAGE - 1).collect();
    out.push('…');
    out
}

/// A hold on the agent (`drover-agent hold`, or the `drover.dev/hold` annotation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportHold {
    /// The operator's reason, at most [`MAX_MESSAGE`] characters.
    pub reason: String,
    /// Since when (RFC 3339).
    pub since: String,
    /// The newest verified digest waiting for the release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_digest: Option<String>,
    /// When the next apply window opens (RFC 3339), while the agent's apply windows are
    /// closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<String>,
}

/// A rollback in force on the cluster (`--on-degraded rollback`): the Degraded bundle it
/// refuses, the one it put back. The report's `appliedDigest` is the one put back, so no
/// gate passes on the refused digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportRollback {
    /// The Degraded bundle rolled back from.
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
    /// The bundle put back (the last one Healthy on the cluster).
    pub to_digest: String,
    /// When (RFC 3339).
    pub at: String,
}

/// What an agent says about its cluster. Field names are part of the interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The cluster's name (unique within its cluster type).
    pub cluster_name: String,
    /// The cluster type the agent expects.
    pub cluster_type: String,
    /// The environment the agent expects.
    pub environment: String,
    /// The channel followed: the source's tag (or digest).
    pub channel: String,
    /// The applied bundle's digest.
    #[serde(default)]
    pub applied_digest: Option<String>,
    /// The applied bundle's sequence.
    #[serde(default)]
    pub applied_sequence: Option<u64>,
    /// Health of the applied state.
    #[serde(default)]
    pub health: ReportHealth,
    /// Since when (RFC 3339) this digest has had this health, as observed by the agent(s).
    #[serde(default)]
    pub health_since: Option<String>,
    /// The last recorded attempt.
    #[serde(default)]
    pub last_attempt: Option<LastAttempt>,
    /// Objects of the last apply by outcome (`created`, `unchanged`, `failed`, ...).
    #[serde(default)]
    pub objects: BTreeMap<String, u64>,
    /// The first failing or unhealthy objects (at most [`MAX_FAILING`]).
    #[serde(default)]
    pub failing: Vec<FailingObject>,
    /// Set while the agent is held by its cluster's operator (it applies nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<ReportHold>,
    /// Objects that differ from the applied bundle and were left as they are (the agent
    /// runs with `--drift report`); absent when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drifted_objects: Option<u64>,
    /// Set while a rollback's refusal stands on the cluster (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<ReportRollback>,
    /// The agent's version.
    #[serde(default)]
    pub agent_version: String,
    /// When this report was written (RFC 3339).
    pub reported_at: String,
}

impl Report {
    /// The tag this report is stored under: `<cluster-type>.<cluster-name>`.
    pub fn tag(&self) -> String {
        report_tag(&self.cluster_type, &self.cluster_name)
    }

    /// The report without its times (`reportedAt`, `lastAttempt.at`): two reports with
    /// the same fingerprint say the same thing, and only a change is worth a write.
    pub fn fingerprint(&self) -> String {
        let mut r = self.clone();
        r.reported_at = String::new();
        if let Some(a) = r.last_attempt.as_mut() {
            a.at = String::new();
        }
        serde_json::to_string(&r).expect("report serializes")
    }

    /// The document bytes (the config blob).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("report serializes")
    }

    /// Parses and checks a report document: size, schema version, identity, digests and
    /// times ([`limits`]); a reader of untrusted reports uses [`Report::read_bounded`].
    pub fn from_slice(data: &[u8]) -> Result<Self, String> {
        if data.len() as u64 > MAX_REPORT_BYTES {
            return Err(format!("the report is {} bytes, over the limit of {MAX_REPORT_BYTES}", data.len()));
        }
        let r: Report = serde_json::from_slice(data).map_err(|e| format!("not a drover report: {e}"))?;
        if r.schema_version != SCHEMA_VERSION {
            return Err(format!("schemaVersion {} is not {SCHEMA_VERSION} (written by a newer agent?)", r.schema_version));
        }
        r.check_fields()?;
        Ok(r)
    }
}

/// `<cluster-type>.<cluster-name>`.
pub fn report_tag(cluster_type: &str, cluster_name: &str) -> String {
    format!("{cluster_type}.{cluster_name}")
}

/// A cluster type a report can name: a DNS-1123 label (what the platform model allows),
/// so it holds no `.` and `<cluster-type>.<cluster-name>` is unambiguous.
pub fn check_cluster_type(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!("cluster type {s:?} cannot be reported: it must be a DNS-1123 label (lowercase letters, digits, '-'; at most 63)"))
    }
}

/// A cluster name: 1-63 letters, digits, `-`, `_` or `.`, starting with a letter or digit.
pub fn check_cluster_name(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cluster name {s:?} is not usable in a report tag: use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit"
        ))
    }
}

/// The default reports repository for a source: `<parent of the source repository>/drover-reports`
/// on the same registry (`reg/fleet/edge` → `reg/fleet/drover-reports`, `reg/edge` →
/// `reg/drover-reports`). No tag, no digest.
pub fn default_repository(source: &RegistryRef) -> RegistryRef {
    let repository = match source.repository.rsplit_once('/') {
        Some((parent, _)) => format!("{parent}/{REPORTS_REPOSITORY}"),
        None => REPORTS_REPOSITORY.to_string(),
    };
    RegistryRef { registry: source.registry.clone(), repository, tag: None, digest: None }
}

/// The reports repository under a publish prefix (`drover publish --registry PREFIX`):
/// `PREFIX/drover-reports`, the default of every agent following `PREFIX/<cluster-type>:…`.
pub fn prefix_repository(prefix: &str) -> Result<RegistryRef, String> {
    let prefix = prefix.trim_end_matches('/');
    RegistryRef::parse(&format!("{prefix}/{REPORTS_REPOSITORY}")).map_err(|e| format!("--registry {prefix}: {e}"))
}

/// A report as an agent writes it, for the unit tests of this module's parts.
#[cfg(test)]
pub(crate) fn sample() -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        cluster_name: "aks-weu-01".into(),
        cluster_type: "edge".into(),
        environment: "prod".into(),
        channel: "prod-ring0".into(),
        applied_digest: Some(format!("sha256:{}", "a".repeat(64))),
        applied_sequence: Some(7),
        health: ReportHealth::Healthy,
        health_since: Some("2026-01-02T03:04:05Z".into()),
        last_attempt: Some(LastAttempt { result: "Applied".into(), reason: String::new(), digest: None, at: "2026-01-02T03:04:05Z".into() }),
        objects: BTreeMap::from([("created".into(), 3)]),
        failing: vec![],
        held: None,
        drifted_objects: None,
        rolled_back: None,
        agent_version: "0.2.0".into(),
        reported_at: "2026-01-02T03:09:05Z".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_fingerprint() {
        let r = sample();
        assert_eq!(r.tag(), "edge.aks-weu-01");
        let back = Report::from_slice(&r.to_bytes()).unwrap();
        assert_eq!(back, r);
        let mut later = r.clone();
        later.reported_at = "2026-01-02T04:00:00Z".into();
        later.last_attempt.as_mut().unwrap().at = "2026-01-02T04:00:00Z".into();
        assert_eq!(later.fingerprint(), r.fingerprint(), "times alone are no change");
        later.health = ReportHealth::Degraded;
        assert_ne!(later.fingerprint(), r.fingerprint());
    }

    #[test]
    fn names_and_repositories() {
        assert!(check_cluster_type("edge.small").is_err(), "a dot would make tags ambiguous");
        assert!(check_cluster_type("edge-small").is_ok());
        assert!(check_cluster_name("aks.weu_01-b").is_ok());
        assert!(check_cluster_name("-x").is_err());
        assert!(check_cluster_name(&"x".repeat(64)).is_err());
        let src = RegistryRef::parse("reg.example/fleet/edge:prod").unwrap();
        assert_eq!(default_repository(&src).to_string(), "reg.example/fleet/drover-reports");
        let src = RegistryRef::parse("reg.example/edge:prod").unwrap();
        assert_eq!(default_repository(&src).to_string(), "reg.example/drover-reports");
        assert_eq!(prefix_repository("reg.example/fleet/").unwrap().to_string(), "reg.example/fleet/drover-reports");
    }

    #[test]
    fn secrets_keep_their_messages_and_long_ones_are_cut() {
        let id = |kind: &str| ObjectRef { api_version: "v1".into(), kind: kind.into(), namespace: Some("a".into()), name: "n".into() };
        let f = FailingObject::new(id("Secret"), "failed", "Invalid value: \"hunter2\"");
        assert!(!f.message.contains("hunter2"));
        let f = FailingObject::new(id("ConfigMap"), "failed", &"x".repeat(1000));
        assert_eq!(f.message.chars().count(), MAX_MESSAGE);
    }

    #[test]
    fn bad_documents_are_named() {
        let mut r = sample();
        r.schema_version = 2;
        assert!(Report::from_slice(&r.to_bytes()).unwrap_err().contains("schemaVersion"));
        let mut r = sample();
        r.reported_at = "yesterday".into();
        assert!(Report::from_slice(&r.to_bytes()).unwrap_err().contains("reportedAt"));
        assert!(Report::from_slice(b"{}").is_err());
    }
}
