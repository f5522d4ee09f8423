//! The fleet roster (docs/fleet.md, "Who can write a report"): which cluster reports with
//! which key. Every agent signs its reports with a key of its own, made at its first
//! start and never leaving the cluster; `drover fleet enroll` approves a cluster's key
//! into the roster, a signed document ([`crate::signed`]) in the reports repository under
//! tag [`TAG`], signed by the release key(s) like any bundle or channel statement. A
//! reader (`drover fleet status|view|wait`, `drover promote --require-healthy`) verifies
//! the roster against its trust policy and every report against the roster
//! ([`Roster::judge`]): an unsigned, unenrolled or badly signed report, one cut to the
//! format's limits, or one dated in the future is untrusted — shown, named, never counted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::keys::PrivateKey;
use crate::media;
use crate::repo::Repo;
use crate::signed::{self, Found, Kind};
use crate::trust::sign::SignatureInfo;
use crate::trust::TrustPolicy;

use super::store::{Received, Signer};

/// The roster's tag in the reports repository (no `.`: it can never be a report's tag).
pub const TAG: &str = super::ROSTER_TAG;
/// The schema version this code writes and reads.
pub const SCHEMA_VERSION: u32 = 1;
/// Most clusters a roster holds.
pub const MAX_CLUSTERS: usize = 100_000;
/// A report time this far ahead of the reader's clock is still believed (clock skew).
pub const MAX_SKEW_SECS: i64 = 300;
/// What the roster is, as a signed document.
pub const KIND: Kind = Kind { name: "fleet roster", artifact_type: media::ROSTER_ARTIFACT_TYPE, media_type: media::ROSTER, max: 16 << 20 };

/// The enrolled clusters and their report keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Roster {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Raised by every change (the newest roster is the one written last).
    pub sequence: u64,
    /// When it was written (RFC 3339).
    pub time: String,
    /// Report tag (`<cluster-type>.<cluster-name>`) → fingerprint of its report key.
    pub clusters: BTreeMap<String, String>,
}

impl Default for Roster {
    fn default() -> Self {
        Roster { schema_version: SCHEMA_VERSION, sequence: 0, time: String::new(), clusters: BTreeMap::new() }
    }
}

/// Whether a report counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Standing {
    /// Signed by the key the roster enrolls for its cluster, within the limits, in time.
    Trusted,
    /// Shown, never counted; why.
    Untrusted(String),
}

impl Standing {
    /// True when the report counts.
    pub fn trusted(&self) -> bool {
        matches!(self, Standing::Trusted)
    }

    /// Why it does not count (`None` when it does).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Standing::Trusted => None,
            Standing::Untrusted(r) => Some(r),
        }
    }
}

/// Why a report's times are impossible at `now` (Unix seconds), if they are.
pub fn time_problem(r: &super::Report, now: i64) -> Option<String> {
    let ahead = |field: &str, at: &str| {
        let t = crate::time::parse_rfc3339(at).ok()?;
        (t - now > MAX_SKEW_SECS).then(|| {
            format!("{field} {at} is in the future (clocks may differ by at most {MAX_SKEW_SECS} s): invalid, not fresh")
        })
    };
    ahead("reportedAt", &r.reported_at).or_else(|| r.health_since.as_deref().and_then(|s| ahead("healthSince", s)))
}

impl Roster {
    /// Parses and checks a roster document.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, String> {
        let r: Roster = serde_json::from_slice(bytes).map_err(|e| format!("not a fleet roster: {e}"))?;
        if r.schema_version != SCHEMA_VERSION {
            return Err(format!("schemaVersion {} is not {SCHEMA_VERSION}", r.schema_version));
        }
        if r.clusters.len() > MAX_CLUSTERS {
            return Err(format!("{} clusters, more than the {MAX_CLUSTERS} a roster holds", r.clusters.len()));
        }
        let bad = r.clusters.iter().find(|(tag, fp)| tag.len() > 128 || fp.len() != 64 || !fp.bytes().all(|b| b.is_ascii_hexdigit()));
        if let Some((tag, _)) = bad {
            return Err(format!("entry {:?} is not a report tag with a key fingerprint", crate::text::clean::bounded(tag, 140)));
        }
        Ok(r)
    }

    /// The document bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("roster serializes")
    }

    /// Does `received` count, read at `now` (Unix seconds)?
    pub fn judge(&self, received: &Received, now: i64) -> Standing {
        if let Some(why) = prejudge(received, now) {
            return Standing::Untrusted(why);
        }
        let tag = received.report.tag();
        let Signer::Key(key) = &received.signer else { unreachable!("prejudge sends every other signer away") };
        match self.clusters.get(&tag) {
            Some(fp) if fp == key.fingerprint() => Standing::Trusted,
            Some(fp) => Standing::Untrusted(format!(
                "signed with report key {}, but the roster enrolls {fp} for {tag}: if its agent's key really changed, {} again",
                key.fingerprint(),
                crate::hint::enroll(crate::hint::PREFIX, &format!("{tag}={}", key.fingerprint()))
            )),
            None => Standing::Untrusted(format!(
                "not enrolled: its report key is {}; compare it with its agent's log, then {}",
                key.fingerprint(),
                crate::hint::enroll(crate::hint::PREFIX, &format!("{tag}={}", key.fingerprint()))
            )),
        }
    }

    /// The clusters among `received` whose signed report carries a key the roster does
    /// not enroll for them: (tag, key fingerprint, the enrolled fingerprint if another).
    pub fn pending(&self, received: &[Received]) -> Vec<(String, String, Option<String>)> {
        received
            .iter()
            .filter_map(|r| match &r.signer {
                Signer::Key(k) => {
                    let tag = r.report.tag();
                    let enrolled = self.clusters.get(&tag);
                    (enrolled.map(String::as_str) != Some(k.fingerprint())).then(|| (tag, k.fingerprint().to_string(), enrolled.cloned()))
                }
                _ => None,
            })
            .collect()
    }
}

/// Why `received` cannot count whatever a roster (or a declared membership) says
/// (`None`: it is signed, within the limits and in time; whether its key is the cluster's
/// is the roster's, or the Fleet file's, question).
pub fn prejudge(received: &Received, now: i64) -> Option<String> {
    if let Some(why) = time_problem(&received.report, now) {
        return Some(why);
    }
    if !received.cut.is_empty() {
        return Some(format!("over the report format's limits ({}); no agent writes that", received.cut.join("; ")));
    }
    match &received.signer {
        Signer::Unsigned => Some("unsigned: an agent signs every report with its cluster's report key".into()),
        Signer::Invalid(why) => Some(format!("badly signed: {why}")),
        Signer::Key(_) => None,
    }
}

/// What a reports repository's roster is, read against a trust policy.
#[derive(Debug, Clone)]
pub enum Held {
    /// A roster signed by the trusted keys.
    Trusted(Roster),
    /// No roster that counts, and why (missing, unsigned, malformed).
    Untrusted(String),
}

impl Held {
    /// Does `received` count at `now`? Without a trusted roster nothing does.
    pub fn judge(&self, received: &Received, now: i64) -> Standing {
        match self {
            Held::Trusted(roster) => roster.judge(received, now),
            Held::Untrusted(why) => Standing::Untrusted(prejudge(received, now).unwrap_or_else(|| format!("no fleet roster counts: {why}"))),
        }
    }
}

/// Reads the roster of the reports repository `repo` against `policy`.
pub async fn read(repo: &Repo, policy: &TrustPolicy) -> Result<Held, StoreError> {
    let reference = repo.describe(TAG);
    Ok(match signed::read(repo, &KIND, TAG, policy).await? {
        Found::Missing => Held::Untrusted(format!("{reference} does not exist; enroll the clusters with `drover fleet enroll`")),
        Found::Untrusted { reason, .. } | Found::Foreign { reason, .. } => Held::Untrusted(format!("{reference}: {reason}")),
        Found::Trusted(doc) => match Roster::from_slice(&doc.bytes) {
            Ok(r) => Held::Trusted(r),
            Err(why) => Held::Untrusted(format!("{reference} is signed, but {why}")),
        },
    })
}

/// Writes `roster` into the reports repository `repo`, signed with `key`: document,
/// signature, tag ([`signed::write`]). Returns the roster manifest's digest and the
/// signature made.
pub async fn write(repo: &Repo, roster: &Roster, key: &PrivateKey) -> Result<(String, SignatureInfo), StoreError> {
    let written = signed::write(repo, &KIND, roster.to_bytes(), &roster.time, key, TAG, false).await?;
    Ok((written.digest, written.signature))
}

#[cfg(test)]
mod tests {
    use super::super::{LastAttempt, Report, ReportHealth, SCHEMA_VERSION as REPORT_SCHEMA};
    use super::*;
    use crate::keys::PrivateKey;

    const NOW: i64 = 1_800_000_000;

    fn report(at: i64) -> Report {
        let t = crate::time::format_rfc3339(at).unwrap();
        Report {
            schema_version: REPORT_SCHEMA,
            cluster_name: "c1".into(),
            cluster_type: "edge".into(),
            environment: "prod".into(),
            channel: "prod".into(),
            applied_digest: None,
            applied_sequence: None,
            health: ReportHealth::Healthy,
            health_since: Some(t.clone()),
            last_attempt: Some(LastAttempt { result: "Applied".into(), reason: String::new(), digest: None, at: t.clone() }),
            objects: Default::default(),
            failing: vec![],
            held: None,
            drifted_objects: None,
            rolled_back: None,
            agent_version: "t".into(),
            reported_at: t,
        }
    }

    #[test]
    fn a_report_counts_only_signed_by_its_enrolled_key_and_in_time() {
        let (key, other) = (PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap());
        let signed = |k: &PrivateKey, at: i64| Received { name: "edge.c1".into(), report: report(at), signer: Signer::Key(k.public_key().clone()), cut: vec![] };
        let mut roster = Roster::default();
        assert!(roster.judge(&signed(&key, NOW), NOW).reason().unwrap().starts_with("not enrolled"));
        assert_eq!(roster.pending(&[signed(&key, NOW)]).len(), 1);
        roster.clusters.insert("edge.c1".into(), key.public_key().fingerprint().into());
        assert!(roster.pending(&[signed(&key, NOW)]).is_empty());
        assert_eq!(roster.judge(&signed(&key, NOW), NOW), Standing::Trusted);
        assert!(roster.judge(&signed(&other, NOW), NOW).reason().unwrap().contains("but the roster enrolls"));
        let unsigned = Received { signer: Signer::Unsigned, ..signed(&key, NOW) };
        assert!(roster.judge(&unsigned, NOW).reason().unwrap().starts_with("unsigned"));
        let from_2099 = signed(&key, 4_102_444_800);
        assert!(roster.judge(&from_2099, NOW).reason().unwrap().contains("in the future"));
        assert_eq!(roster.judge(&signed(&key, NOW + 60), NOW), Standing::Trusted, "a minute of clock skew is fine");
        let cut = Received { cut: vec!["failing: 500 objects".into()], ..signed(&key, NOW) };
        assert!(roster.judge(&cut, NOW).reason().unwrap().contains("limits"));
        let none = Held::Untrusted("missing".into());
        assert!(none.judge(&signed(&key, NOW), NOW).reason().unwrap().contains("no fleet roster counts"));
        assert_eq!(Roster::from_slice(&roster.to_bytes()).unwrap(), roster);
    }
}
