//! The health gate (docs/fleet.md), the one rule `drover promote --require-healthy` and
//! `drover fleet wait` both apply. The clusters that follow a channel are the reports
//! with the bundle's cluster type and environment and that channel. A cluster is ready
//! when its report
//!
//! 0. counts: signed by the report key the fleet roster enrolls for its cluster, within
//!    the format's limits, not dated in the future (otherwise it is named as untrusted
//!    and holds the gate back: it is one of the channel's clusters, of unknown health),
//! 1. is fresh (not older than `--stale`),
//! 2. says the candidate digest is applied,
//! 3. says Healthy, continuously for `--soak` (its `healthSince`),
//! 4. and its last recorded attempt did not fail or get refused on that digest.
//!
//! The gate passes when at least `max(--min-clusters, ceil(--require-healthy % × clusters))`
//! clusters are ready. Otherwise every cluster that holds it back is named with why.

use std::time::Duration;

use drover_proto::report::ReportHealth;
use serde::Serialize;

use super::{age, human, short_digest, status::is_stale, Seen};

/// What is being promoted (or waited for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// The channel whose clusters must be ready.
    pub channel: String,
    /// Its cluster type (from the bundle's config).
    pub cluster_type: String,
    /// Its environment (from the bundle's config).
    pub environment: String,
    /// The bundle the channel holds.
    pub digest: String,
    /// Its sequence.
    pub sequence: u64,
}

/// The gate's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// Percentage of the channel's clusters that must be ready (0-100).
    pub percent: f64,
    /// At least this many ready clusters.
    pub min_clusters: usize,
    /// How long each must have been Healthy on the candidate.
    pub soak: Duration,
    /// Reports older than this are stale.
    pub stale: Duration,
}

/// One cluster's part in the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVerdict {
    /// Cluster name.
    pub cluster_name: String,
    /// True when it counts toward the gate.
    pub ready: bool,
    /// Why (or why not).
    pub reason: String,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// True when the gate passes.
    pub passed: bool,
    /// What was evaluated.
    pub candidate: Candidate,
    /// Clusters following the channel.
    pub clusters: usize,
    /// Of those, ready.
    pub ready: usize,
    /// Ready clusters needed.
    pub required: usize,
    /// Each cluster, those holding the gate back first.
    pub details: Vec<ClusterVerdict>,
}

impl Verdict {
    /// A human account: one line, then one line per cluster holding the gate back.
    pub fn describe(&self) -> String {
        let c = &self.candidate;
        let mut s = format!(
            "{} of {} cluster(s) of {}/{} following {} are ready on sequence {} ({}), {} required",
            self.ready,
            self.clusters,
            c.cluster_type,
            c.environment,
            c.channel,
            c.sequence,
            short_digest(&c.digest),
            self.required
        );
        if self.clusters == 0 {
            s.push_str(&format!(
                "\n  no cluster following {} has reported (is --reports the repository the agents write to, and do they run with `drover-agent run --cluster-name NAME`?)",
                c.channel
            ));
        }
        for d in self.details.iter().filter(|d| !d.ready) {
            s.push_str(&format!("\n  {}.{}: {}", c.cluster_type, d.cluster_name, d.reason));
        }
        s
    }
}

/// Why one report is (or is not) ready for `cand` at `now`.
fn judge(seen: &Seen, cand: &Candidate, rule: &Rule, now: i64) -> (bool, String) {
    let r = &seen.report;
    if let Some(why) = seen.untrusted() {
        return (false, format!("untrusted report, not counted: {why}"));
    }
    let stale = rule.stale.as_secs() as i64;
    if is_stale(r, now, stale) {
        let ago = age(&r.reported_at, now).map(human).unwrap_or_else(|| "an unreadable time".into());
        return (false, format!("stale: last report {ago} ago (reports older than {} are stale; is its agent running?)", human(stale)));
    }
    if r.applied_digest.as_deref() != Some(cand.digest.as_str()) {
        let failed = r.last_attempt.as_ref().filter(|a| a.digest.as_deref() == Some(cand.digest.as_str()) && a.result != "Applied");
        let why = failed.map(|a| format!("; its last attempt on it: {} {}", a.result, a.reason)).unwrap_or_default();
        return match (r.applied_sequence, &r.applied_digest) {
            (Some(s), Some(d)) if s < cand.sequence => (false, format!("behind: runs sequence {s} ({}), not {}{why}", short_digest(d), cand.sequence)),
            (Some(s), Some(d)) => (false, format!("runs sequence {s} ({}), not {} ({}){why}", short_digest(d), cand.sequence, short_digest(&cand.digest))),
            _ => (false, format!("nothing applied yet{why}")),
        };
    }
    if let Some(a) = r.last_attempt.as_ref().filter(|a| a.digest.as_deref() == Some(cand.digest.as_str()) && matches!(a.result.as_str(), "Failed" | "Rejected")) {
        return (false, format!("last attempt {}: {}", a.result, a.reason));
    }
    let since = r.health_since.as_deref().and_then(|s| age(s, now));
    if r.health != ReportHealth::Healthy {
        let mut why = format!("{}{}", r.health, since.map(|s| format!(" for {}", human(s))).unwrap_or_default());
        let failing: Vec<String> = r.failing.iter().take(3).map(|f| format!("{} {}: {}", f.object.kind, object_name(f), f.message)).collect();
        if !failing.is_empty() {
            why.push_str(&format!(": {}", failing.join("; ")));
        }
        return (false, why);
    }
    let soak = rule.soak.as_secs() as i64;
    match since {
        Some(s) if s >= soak => (true, format!("Healthy for {}", human(s))),
        Some(s) => (false, format!("soaking: Healthy for {} of the {} soak", human(s), human(soak))),
        None => (false, "Healthy, but the report says since when (healthSince) nowhere".into()),
    }
}

fn object_name(f: &drover_proto::report::FailingObject) -> String {
    match &f.object.namespace {
        Some(ns) => format!("{ns}/{}", f.object.name),
        None => f.object.name.clone(),
    }
}

/// Evaluates the gate for `cand` over `reports` at `now` (Unix seconds).
pub fn evaluate(reports: &[Seen], cand: &Candidate, rule: &Rule, now: i64) -> Verdict {
    let mut details: Vec<ClusterVerdict> = reports
        .iter()
        .filter(|s| s.report.cluster_type == cand.cluster_type && s.report.environment == cand.environment && s.report.channel == cand.channel)
        .map(|s| {
            let (ready, reason) = judge(s, cand, rule, now);
            ClusterVerdict { cluster_name: s.report.cluster_name.clone(), ready, reason }
        })
        .collect();
    details.sort_by(|a, b| a.ready.cmp(&b.ready).then_with(|| a.cluster_name.cmp(&b.cluster_name)));
    let clusters = details.len();
    let ready = details.iter().filter(|d| d.ready).count();
    let by_percent = ((rule.percent / 100.0) * clusters as f64 - 1e-9).ceil().max(0.0) as usize;
    let required = by_percent.max(rule.min_clusters);
    Verdict { passed: ready >= required, candidate: cand.clone(), clusters, ready, required, details }
}

/// Parses `--require-healthy`: `100%`, `90%` or `90` (percent of the channel's clusters).
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let n: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("--require-healthy {text:?} is not a percentage like 100% or 90%"))?;
    if !(0.0..=100.0).contains(&n) {
        return Err(format!("--require-healthy {text:?} must be between 0% and 100%"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::report::roster::Standing;
    use drover_proto::report::{LastAttempt, Report, SCHEMA_VERSION};

    const NOW: i64 = 1_800_000_000;

    fn at(secs_ago: i64) -> String {
        drover_proto::time::format_rfc3339(NOW - secs_ago).unwrap()
    }

    fn report(name: &str, digest: &str, seq: u64, health: ReportHealth, since_ago: i64) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            cluster_name: name.into(),
            cluster_type: "edge".into(),
            environment: "prod".into(),
            channel: "prod-ring0".into(),
            applied_digest: Some(digest.into()),
            applied_sequence: Some(seq),
            health,
            health_since: Some(at(since_ago)),
            last_attempt: Some(LastAttempt { result: "Applied".into(), reason: String::new(), digest: Some(digest.into()), at: at(since_ago) }),
            objects: Default::default(),
            failing: vec![],
            held: None,
            drifted_objects: None,
            agent_version: "t".into(),
            reported_at: at(10),
        }
    }

    /// The gate over `rs`, every report trusted.
    fn ev(rs: &[Report], cand: &Candidate, rule: &Rule, now: i64) -> Verdict {
        let seen: Vec<Seen> = rs.iter().map(|r| Seen { report: r.clone(), standing: Standing::Trusted }).collect();
        evaluate(&seen, cand, rule, now)
    }

    fn cand() -> Candidate {
        Candidate { channel: "prod-ring0".into(), cluster_type: "edge".into(), environment: "prod".into(), digest: "sha256:d2".into(), sequence: 2 }
    }

    fn rule(percent: f64, min: usize, soak: u64) -> Rule {
        Rule { percent, min_clusters: min, soak: Duration::from_secs(soak), stale: Duration::from_secs(900) }
    }

    #[test]
    fn every_cluster_must_be_ready_at_100_percent() {
        let mut rs = vec![report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600), report("b", "sha256:d2", 2, ReportHealth::Healthy, 3600)];
        assert!(ev(&rs, &cand(), &rule(100.0, 1, 900), NOW).passed);
        rs.push(report("c", "sha256:d1", 1, ReportHealth::Healthy, 3600));
        let v = ev(&rs, &cand(), &rule(100.0, 1, 900), NOW);
        assert!(!v.passed);
        assert_eq!((v.ready, v.required, v.details[0].cluster_name.as_str()), (2, 3, "c"));
        assert!(v.details[0].reason.starts_with("behind: runs sequence 1"), "{}", v.details[0].reason);
        assert!(ev(&rs, &cand(), &rule(66.0, 1, 900), NOW).passed, "2 of 3 is enough at 66%");
        assert!(!ev(&rs, &cand(), &rule(66.0, 3, 900), NOW).passed, "--min-clusters 3");
    }

    #[test]
    fn soak_staleness_health_and_failures_hold_back() {
        let young = report("a", "sha256:d2", 2, ReportHealth::Healthy, 60);
        let v = ev(&[young], &cand(), &rule(100.0, 1, 900), NOW);
        assert!(!v.passed && v.details[0].reason.starts_with("soaking: Healthy for 1m"), "{:?}", v.details);
        let mut old = report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600);
        old.reported_at = at(3600);
        assert!(ev(&[old], &cand(), &rule(100.0, 1, 900), NOW).details[0].reason.starts_with("stale"));
        let sick = report("a", "sha256:d2", 2, ReportHealth::Degraded, 3600);
        assert!(ev(&[sick], &cand(), &rule(100.0, 1, 0), NOW).details[0].reason.starts_with("Degraded for 1h"));
        let mut failed = report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600);
        failed.last_attempt.as_mut().unwrap().result = "Failed".into();
        assert!(ev(&[failed], &cand(), &rule(100.0, 1, 0), NOW).details[0].reason.starts_with("last attempt Failed"));
        let v = ev(&[], &cand(), &rule(100.0, 1, 0), NOW);
        assert!(!v.passed && v.describe().contains("no cluster following prod-ring0 has reported"));
        let other = Report { channel: "prod-ring1".into(), ..report("z", "sha256:d2", 2, ReportHealth::Healthy, 3600) };
        assert_eq!(ev(&[other], &cand(), &rule(100.0, 1, 0), NOW).clusters, 0, "another channel's clusters do not count");
    }

    #[test]
    fn an_untrusted_report_holds_the_gate_back_by_name() {
        let forged = Seen { report: report("x", "sha256:d2", 2, ReportHealth::Healthy, 3600), standing: Standing::Untrusted("unsigned".into()) };
        let good = Seen { report: report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600), standing: Standing::Trusted };
        let v = evaluate(&[forged, good], &cand(), &rule(100.0, 1, 0), NOW);
        assert!(!v.passed && v.ready == 1 && v.clusters == 2, "{v:?}");
        assert!(v.describe().contains("edge.x: untrusted report, not counted: unsigned"), "{}", v.describe());
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("100%").unwrap(), 100.0);
        assert_eq!(parse_percent(" 90 ").unwrap(), 90.0);
        assert!(parse_percent("101%").is_err());
        assert!(parse_percent("all").is_err());
    }
}
