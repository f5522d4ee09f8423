//! The health gate (docs/fleet.md), the one rule `drover promote --require-healthy` and
//! `drover fleet wait` both apply. The clusters that must be ready for a channel are, with
//! a Fleet file (`--fleet`), the clusters it declares for the bundle's cluster type and
//! environment and that channel — whatever the registry holds; without one, the clusters
//! whose reports claim them (a registry writer can make a lagging cluster's report vanish:
//! every reader warns). Each is classified by the one rule
//! ([`super::classify::classify`]): only `ready` counts. A report of a cluster that is not
//! declared never counts and is listed apart.
//!
//! The gate passes when at least `max(--min-clusters, ceil(--require-healthy % × clusters))`
//! clusters are ready. Otherwise every cluster that holds it back is named with why.

use std::time::Duration;

use serde::Serialize;

use super::classify::{classify, Bar, Classification, Known, Target};
use super::groups::slots;
use super::members::{Group, Membership};
use super::read::Reading;
use super::short_digest;

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

impl Candidate {
    /// The clusters it is about.
    pub fn group(&self) -> Group {
        Group { environment: self.environment.clone(), cluster_type: self.cluster_type.clone(), channel: self.channel.clone() }
    }
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

impl Rule {
    /// What a cluster must meet to be ready.
    pub fn bar(&self) -> Bar {
        Bar { soak: self.soak, stale: self.stale }
    }
}

/// One cluster's part in the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVerdict {
    /// Cluster name.
    pub cluster_name: String,
    /// True when it counts toward the gate.
    pub ready: bool,
    /// Its classification: class, why, and its last attempt's result and reason.
    #[serde(flatten)]
    pub classification: Classification,
}

/// A report the gate did not count and lists apart: its cluster is not declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotCounted {
    /// `TYPE.NAME`.
    pub cluster: String,
    /// Why it does not count.
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
    /// The Fleet file the clusters are declared in (absent: membership from the reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_in: Option<String>,
    /// Clusters following the channel.
    pub clusters: usize,
    /// Of those, ready.
    pub ready: usize,
    /// Ready clusters needed.
    pub required: usize,
    /// Each cluster, those holding the gate back first (a cluster whose untrusted report
    /// is not named is counted, not listed).
    pub details: Vec<ClusterVerdict>,
    /// Reports claiming the channel that are never counted (clusters not declared), named.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_counted: Vec<NotCounted>,
}

impl Verdict {
    /// A human account: one line, then one line per cluster holding the gate back, then
    /// the reports not counted.
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
        if let Some(file) = &self.declared_in {
            s.push_str(&format!(" (the clusters {file} declares)"));
        }
        if self.clusters == 0 {
            match &self.declared_in {
                Some(file) => s.push_str(&format!("\n  {file} declares no cluster of {}/{} following {}", c.cluster_type, c.environment, c.channel)),
                None => s.push_str(&format!(
                    "\n  no cluster following {} has reported (is --reports the repository the agents write to, and do they run with `drover-agent run --cluster-name NAME`?)",
                    c.channel
                )),
            }
        }
        for d in self.details.iter().filter(|d| !d.ready) {
            s.push_str(&format!("\n  {}.{}: {}", c.cluster_type, d.cluster_name, d.classification.reason));
        }
        let unnamed = self.clusters - self.details.len();
        if unnamed > 0 {
            s.push_str(&format!("\n  and {unnamed} more cluster(s) whose reports do not count (not named)"));
        }
        for n in &self.not_counted {
            s.push_str(&format!("\n  not counted: {}: {}", n.cluster, n.reason));
        }
        s
    }
}

/// Evaluates the gate for `cand` over what was read (`membership`: the declared clusters)
/// at `now` (Unix seconds).
pub fn evaluate(reading: &Reading, membership: Option<&Membership>, cand: &Candidate, rule: &Rule, now: i64) -> Verdict {
    let group = cand.group();
    let target = Target { digest: cand.digest.clone(), sequence: cand.sequence };
    let declared_in = membership.map(|m| m.file.clone());
    let all = slots(reading, membership, &group);
    let clusters = all.len();
    let mut details: Vec<ClusterVerdict> = all
        .iter()
        .filter(|s| !matches!(s.known, Known::Untrusted(None)))
        .map(|s| {
            let classification = classify(s.known, &group, declared_in.as_deref(), Some(&target), &rule.bar(), now);
            ClusterVerdict { cluster_name: s.cluster_name.to_string(), ready: classification.ready(), classification }
        })
        .collect();
    details.sort_by(|a, b| a.ready.cmp(&b.ready).then_with(|| a.cluster_name.cmp(&b.cluster_name)));
    let ready = details.iter().filter(|d| d.ready).count();
    let by_percent = ((rule.percent / 100.0) * clusters as f64 - 1e-9).ceil().max(0.0) as usize;
    let required = by_percent.max(rule.min_clusters);
    let not_counted = match membership {
        Some(_) => reading
            .untrusted
            .iter()
            .filter(|(_, g)| **g == group)
            .filter_map(|(tag, _)| reading.why.get(tag).map(|why| NotCounted { cluster: tag.clone(), reason: why.clone() }))
            .collect(),
        None => Vec::new(),
    };
    Verdict { passed: ready >= required, candidate: cand.clone(), declared_in, clusters, ready, required, details, not_counted }
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
    use crate::fleet::classify::Class;
    use crate::fleet::members::Member;
    use drover_proto::report::{LastAttempt, Report, ReportHealth, SCHEMA_VERSION};

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
            rolled_back: None,
            agent_version: "t".into(),
            reported_at: at(10),
        }
    }

    /// What was read: `rs` all trusted.
    fn reading(rs: &[Report]) -> Reading {
        let mut r = Reading::default();
        for x in rs {
            r.trusted.insert(x.tag(), x.clone());
        }
        r
    }

    /// The gate over `rs`, every report trusted, membership from the reports.
    fn ev(rs: &[Report], cand: &Candidate, rule: &Rule, now: i64) -> Verdict {
        evaluate(&reading(rs), None, cand, rule, now)
    }

    fn cand() -> Candidate {
        Candidate { channel: "prod-ring0".into(), cluster_type: "edge".into(), environment: "prod".into(), digest: "sha256:d2".into(), sequence: 2 }
    }

    fn rule(percent: f64, min: usize, soak: u64) -> Rule {
        Rule { percent, min_clusters: min, soak: Duration::from_secs(soak), stale: Duration::from_secs(900) }
    }

    fn reason(v: &Verdict) -> &str {
        &v.details[0].classification.reason
    }

    #[test]
    fn every_cluster_must_be_ready_at_100_percent() {
        let mut rs = vec![report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600), report("b", "sha256:d2", 2, ReportHealth::Healthy, 3600)];
        assert!(ev(&rs, &cand(), &rule(100.0, 1, 900), NOW).passed);
        rs.push(report("c", "sha256:d1", 1, ReportHealth::Healthy, 3600));
        let v = ev(&rs, &cand(), &rule(100.0, 1, 900), NOW);
        assert!(!v.passed);
        assert_eq!((v.ready, v.required, v.details[0].cluster_name.as_str()), (2, 3, "c"));
        assert!(reason(&v).starts_with("behind: runs sequence 1"), "{}", reason(&v));
        assert_eq!(v.details[0].classification.class, Class::Behind);
        assert!(ev(&rs, &cand(), &rule(66.0, 1, 900), NOW).passed, "2 of 3 is enough at 66%");
        assert!(!ev(&rs, &cand(), &rule(66.0, 3, 900), NOW).passed, "--min-clusters 3");
    }

    #[test]
    fn soak_staleness_health_and_failures_hold_back() {
        let young = report("a", "sha256:d2", 2, ReportHealth::Healthy, 60);
        let v = ev(&[young], &cand(), &rule(100.0, 1, 900), NOW);
        assert!(!v.passed && reason(&v).starts_with("soaking: Healthy for 1m"), "{:?}", v.details);
        let mut old = report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600);
        old.reported_at = at(3600);
        assert!(reason(&ev(&[old], &cand(), &rule(100.0, 1, 900), NOW)).starts_with("stale"));
        let sick = report("a", "sha256:d2", 2, ReportHealth::Degraded, 3600);
        assert!(reason(&ev(&[sick], &cand(), &rule(100.0, 1, 0), NOW)).starts_with("Degraded for 1h"));
        let mut failed = report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600);
        failed.last_attempt.as_mut().unwrap().result = "Failed".into();
        failed.last_attempt.as_mut().unwrap().reason = "boom".into();
        let v = ev(&[failed], &cand(), &rule(100.0, 1, 0), NOW);
        assert!(reason(&v).starts_with("last attempt Failed"));
        assert_eq!((v.details[0].classification.last_result.as_deref(), v.details[0].classification.last_reason.as_deref()), (Some("Failed"), Some("boom")));
        let v = ev(&[], &cand(), &rule(100.0, 1, 0), NOW);
        assert!(!v.passed && v.describe().contains("no cluster following prod-ring0 has reported"));
        let other = Report { channel: "prod-ring1".into(), ..report("z", "sha256:d2", 2, ReportHealth::Healthy, 3600) };
        assert_eq!(ev(&[other], &cand(), &rule(100.0, 1, 0), NOW).clusters, 0, "another channel's clusters do not count");
    }

    #[test]
    fn an_untrusted_report_holds_the_gate_back_by_name() {
        let mut r = reading(&[report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600)]);
        r.untrusted.insert("edge.x".into(), cand().group());
        r.why.insert("edge.x".into(), "unsigned".into());
        let v = evaluate(&r, None, &cand(), &rule(100.0, 1, 0), NOW);
        assert!(!v.passed && v.ready == 1 && v.clusters == 2, "{v:?}");
        assert!(v.describe().contains("edge.x: untrusted report, not counted: unsigned"), "{}", v.describe());
    }

    #[test]
    fn with_declared_membership_the_declared_set_decides() {
        let member = |n: &str, ch: &str| Member {
            tag: format!("edge.{n}"),
            cluster_name: n.into(),
            group: Group { environment: "prod".into(), cluster_type: "edge".into(), channel: ch.into() },
            report_key: "k".repeat(64),
        };
        let m = Membership::new("fleet.yaml", vec![member("a", "prod-ring0"), member("b", "prod-ring0"), member("c", "prod-ring0"), member("z", "prod-ring1")]);
        let mut r = reading(&[report("a", "sha256:d2", 2, ReportHealth::Healthy, 3600)]);
        r.declared_untrusted.insert("edge.b".into(), "unsigned".into());
        // c never reported; a relabelled report of c claims prod-ring9; x is not declared.
        r.trusted.insert("edge.z".into(), Report { channel: "prod-ring0".into(), ..report("z", "sha256:d2", 2, ReportHealth::Healthy, 3600) });
        r.untrusted.insert("edge.x".into(), cand().group());
        r.why.insert("edge.x".into(), "not declared in fleet.yaml".into());
        let v = evaluate(&r, Some(&m), &cand(), &rule(100.0, 1, 0), NOW);
        assert_eq!((v.clusters, v.ready, v.passed), (3, 1, false), "{v:#?}");
        let class = |n: &str| v.details.iter().find(|d| d.cluster_name == n).unwrap().classification.class;
        assert_eq!((class("b"), class("c")), (Class::Untrusted, Class::Missing));
        assert!(v.describe().contains("edge.c: missing: no report"), "{}", v.describe());
        assert!(v.describe().contains("not counted: edge.x: not declared"), "{}", v.describe());
        assert!(!v.describe().contains("edge.z"), "z is declared on prod-ring1: {}", v.describe());
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("100%").unwrap(), 100.0);
        assert_eq!(parse_percent(" 90 ").unwrap(), 90.0);
        assert!(parse_percent("101%").is_err());
        assert!(parse_percent("all").is_err());
    }
}
