//! The one classification of a cluster for a channel (docs/fleet.md, "How a cluster is
//! classified"), used by `drover promote --require-healthy` and `drover fleet wait` (the
//! gate), `drover fleet status` (table and JSON) and the fleet page: the same cluster is
//! never ready on one surface and not on another. In order, a cluster is
//!
//! - `missing`: declared, and no report of it was found;
//! - `untrusted`: its reports do not count (unsigned, signed by another key than its
//!   cluster's, not declared or enrolled, over the format's limits, dated in the future);
//! - `stale`: its report is older than `--stale` (or its time unreadable);
//! - `elsewhere`: its report says another environment or channel than it is declared
//!   for, or it runs another bundle of the same or a higher sequence than the target;
//! - `behind`: it runs a lower sequence than the target, or nothing yet;
//! - `unhealthy`: it runs the target but is not `Healthy`, or its last attempt on the
//!   target failed or was refused;
//! - `soaking`: `Healthy` on the target for less than the soak;
//! - `ready`: `Healthy` on the target for at least the soak.
//!
//! Every classification carries the last recorded attempt's result and reason, whatever
//! the class.

use std::time::Duration;

use drover_proto::report::roster::MAX_SKEW_SECS;
use drover_proto::report::{FailingObject, Report, ReportHealth};
use serde::Serialize;

use super::members::Group;
use super::{age, human, short_digest};

/// Where a cluster stands for a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Class {
    /// Counts toward the gate.
    Ready,
    /// Healthy on the target, not yet for the soak.
    Soaking,
    /// On the target, not Healthy (or its last attempt on it failed).
    Unhealthy,
    /// On a lower sequence, or nothing applied.
    Behind,
    /// Another channel or environment than declared, or another bundle at or above the target.
    Elsewhere,
    /// No fresh report.
    Stale,
    /// Its reports do not count.
    Untrusted,
    /// Declared, never reported.
    Missing,
}

impl Class {
    /// The class as written in tables and JSON (`ready`, `behind`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Ready => "ready",
            Class::Soaking => "soaking",
            Class::Unhealthy => "unhealthy",
            Class::Behind => "behind",
            Class::Elsewhere => "elsewhere",
            Class::Stale => "stale",
            Class::Untrusted => "untrusted",
            Class::Missing => "missing",
        }
    }
}

/// What is known of one cluster.
#[derive(Debug, Clone, Copy)]
pub enum Known<'a> {
    /// A report that counts.
    Report(&'a Report),
    /// Reports that do not count, and why (`None`: one of many, not named).
    Untrusted(Option<&'a str>),
    /// No usable report (a declared cluster); what its tag holds instead, if anything.
    Missing(Option<&'a str>),
}

/// The bundle the clusters of a channel should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its digest.
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
}

/// How strict: how long a cluster must have been Healthy, and when a report is stale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    /// How long each must have been Healthy on the target.
    pub soak: Duration,
    /// Reports older than this are stale.
    pub stale: Duration,
}

/// One cluster's classification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Classification {
    /// The class.
    pub class: Class,
    /// Why, in words (what holds it back, or how long it has been Healthy).
    pub reason: String,
    /// The last recorded attempt's result (`Applied`, `Unchanged`, `Rejected`, `Failed`, `Held`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_result: Option<String>,
    /// Its reason (empty on plain success).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
}

impl Classification {
    /// True when the cluster counts toward a gate.
    pub fn ready(&self) -> bool {
        self.class == Class::Ready
    }

    fn new(class: Class, reason: String, r: Option<&Report>) -> Classification {
        let last = r.and_then(|r| r.last_attempt.as_ref());
        Classification { class, reason, last_result: last.map(|a| a.result.clone()), last_reason: last.map(|a| a.reason.clone()) }
    }
}

/// True when `r` was written more than `stale_secs` before `now`, or is dated more than
/// the allowed clock skew after it, or its time is unreadable.
pub fn is_stale(r: &Report, now: i64, stale_secs: i64) -> bool {
    age(&r.reported_at, now).is_none_or(|a| a > stale_secs || a < -MAX_SKEW_SECS)
}

fn object_name(f: &FailingObject) -> String {
    match &f.object.namespace {
        Some(ns) => format!("{ns}/{}", f.object.name),
        None => f.object.name.clone(),
    }
}

/// Classifies a cluster of `group` (declared in `declared_in`, when membership is
/// declared) for `target` (`None`: no cluster of the group runs anything yet) at `now`.
pub fn classify(known: Known, group: &Group, declared_in: Option<&str>, target: Option<&Target>, bar: &Bar, now: i64) -> Classification {
    let r = match known {
        Known::Missing(unusable) => {
            let file = declared_in.unwrap_or("the Fleet file");
            let reason = match unusable {
                Some(why) => format!("missing: no usable report (its tag {why})"),
                None => format!("missing: no report (declared in {file}; does its agent run with --cluster-name and write to the reports repository read here?)"),
            };
            return Classification::new(Class::Missing, reason, None);
        }
        Known::Untrusted(Some(why)) => return Classification::new(Class::Untrusted, format!("untrusted report, not counted: {why}"), None),
        Known::Untrusted(None) => return Classification::new(Class::Untrusted, "untrusted report, not counted".into(), None),
        Known::Report(r) => r,
    };
    let done = |class, reason| Classification::new(class, reason, Some(r));
    let stale = bar.stale.as_secs() as i64;
    if is_stale(r, now, stale) {
        let ago = age(&r.reported_at, now).map(|a| if a < 0 { format!("{} in the future", human(-a)) } else { format!("{} ago", human(a)) });
        let ago = ago.unwrap_or_else(|| "at an unreadable time".into());
        return done(Class::Stale, format!("stale: last report {ago} (reports older than {} are stale; is its agent running?)", human(stale)));
    }
    if r.environment != group.environment || r.channel != group.channel {
        let file = declared_in.unwrap_or("the Fleet file");
        return done(
            Class::Elsewhere,
            format!(
                "elsewhere: its report says environment {}, channel {}; {file} declares {}, {}: fix its agent's configuration or the file",
                r.environment, r.channel, group.environment, group.channel
            ),
        );
    }
    let Some(target) = target else {
        return done(Class::Behind, "behind: nothing applied yet".into());
    };
    let on_target = |a: &&drover_proto::report::LastAttempt| a.digest.as_deref() == Some(target.digest.as_str());
    if r.applied_digest.as_deref() != Some(target.digest.as_str()) {
        let failed = r.last_attempt.as_ref().filter(on_target).filter(|a| a.result != "Applied");
        let why = failed.map(|a| format!("; its last attempt on it: {} {}", a.result, a.reason)).unwrap_or_default();
        return match (r.applied_sequence, &r.applied_digest) {
            (Some(s), Some(d)) if s < target.sequence => {
                done(Class::Behind, format!("behind: runs sequence {s} ({}), not {}{why}", short_digest(d), target.sequence))
            }
            (Some(s), Some(d)) => done(
                Class::Elsewhere,
                format!("elsewhere: runs sequence {s} ({}), not {} ({}){why}", short_digest(d), target.sequence, short_digest(&target.digest)),
            ),
            _ => done(Class::Behind, format!("behind: nothing applied yet{why}")),
        };
    }
    if let Some(a) = r.last_attempt.as_ref().filter(on_target).filter(|a| matches!(a.result.as_str(), "Failed" | "Rejected")) {
        return done(Class::Unhealthy, format!("last attempt {}: {}", a.result, a.reason));
    }
    let since = r.health_since.as_deref().and_then(|s| age(s, now));
    if r.health != ReportHealth::Healthy {
        let mut why = format!("{}{}", r.health, since.map(|s| format!(" for {}", human(s))).unwrap_or_default());
        let failing: Vec<String> = r.failing.iter().take(3).map(|f| format!("{} {}: {}", f.object.kind, object_name(f), f.message)).collect();
        if !failing.is_empty() {
            why.push_str(&format!(": {}", failing.join("; ")));
        }
        return done(Class::Unhealthy, why);
    }
    let soak = bar.soak.as_secs() as i64;
    match since {
        Some(s) if s >= soak => done(Class::Ready, format!("Healthy for {}", human(s))),
        Some(s) => done(Class::Soaking, format!("soaking: Healthy for {} of the {} soak", human(s), human(soak))),
        None => done(Class::Unhealthy, "Healthy, but the report says since when (healthSince) nowhere".into()),
    }
}
