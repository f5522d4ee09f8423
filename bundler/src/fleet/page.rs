//! The fleet page of `drover fleet view`: one self-contained HTML file (inline CSS, no
//! scripts, fonts or images) for the on-call engineer, drawn from the same status as
//! `drover fleet status` (every cluster classified by the one rule, [`super::classify`]).
//! Environments are rows, cluster types columns; each cell lists its channels with the
//! sequences they run and one dot per cluster, coloured (and marked) by health; stale
//! clusters are hollow, untrusted ones crossed out, declared clusters that never reported
//! are shown MISSING; a dot's tooltip and the "needs attention" list name failing objects
//! and why. The banner says all is well only when every channel's clusters are all ready
//! (a 100% gate would pass on each). Reports that count nowhere (clusters not declared)
//! are listed apart, the first [`super::read::NAMED`] named. The template is `page.html`
//! (MiniJinja, HTML auto-escaping); every report field reaching it was bounded and cleaned
//! by the reader.

use std::collections::BTreeSet;

use drover_proto::report::Report;
use serde::Serialize;

use super::classify::Class;
use super::read::Reading;
use super::status::{ClusterRow, Status, SummaryRow};
use super::{age, environment_rank, human, short_digest, FleetError};

const TEMPLATE: &str = include_str!("page.html");

#[derive(Serialize)]
struct Dot {
    name: String,
    tag: String,
    health: String,
    class: &'static str,
    stale: bool,
    untrusted: bool,
    missing: bool,
    behind: bool,
    sequence: String,
    title: String,
}

#[derive(Serialize)]
struct SequenceCount {
    sequence: String,
    digest: String,
    clusters: usize,
    newest: bool,
}

#[derive(Serialize)]
struct Channel {
    name: String,
    sequences: Vec<SequenceCount>,
    dots: Vec<Dot>,
    ready: usize,
    total: usize,
    /// Clusters counted but not drawn (untrusted, beyond the named ones).
    hidden: usize,
    /// A cluster is Degraded, stale, untrusted or missing.
    bad: bool,
}

#[derive(Serialize)]
struct Row {
    environment: String,
    cells: Vec<Vec<Channel>>,
}

#[derive(Serialize)]
struct Attention {
    tag: String,
    environment: String,
    channel: String,
    state: &'static str,
    summary: String,
    failing: Vec<String>,
}

#[derive(Serialize, Default)]
struct Totals {
    clusters: usize,
    ready: usize,
    healthy: usize,
    progressing: usize,
    degraded: usize,
    unknown: usize,
    stale: usize,
    untrusted: usize,
    missing: usize,
    waiting: usize,
}

#[derive(Serialize)]
struct Apart {
    cluster: String,
    channel: String,
    reason: String,
}

#[derive(Serialize)]
struct Page {
    generated: String,
    sources: Vec<String>,
    fleet: Option<String>,
    stale_after: String,
    all_well: bool,
    types: Vec<String>,
    rows: Vec<Row>,
    attention: Vec<Attention>,
    totals: Totals,
    apart: Vec<Apart>,
    apart_total: usize,
    unreadable: Vec<String>,
    unreadable_total: usize,
}

fn seq_text(s: Option<u64>) -> String {
    s.map(|s| s.to_string()).unwrap_or_else(|| "-".into())
}

fn failing_lines(r: Option<&Report>) -> Vec<String> {
    r.map(|r| r.failing.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|f| {
            let name = f.object.namespace.as_ref().map(|ns| format!("{ns}/{}", f.object.name)).unwrap_or_else(|| f.object.name.clone());
            format!("{} {} ({}): {}", f.object.kind, name, f.state, f.message)
        })
        .collect()
}

fn tag(c: &ClusterRow) -> String {
    format!("{}.{}", c.cluster_type, c.cluster_name)
}

fn state(c: &ClusterRow) -> &'static str {
    match c.class {
        Class::Untrusted => "untrusted",
        Class::Missing => "missing",
        Class::Stale => "stale",
        _ => match c.health {
            drover_proto::report::ReportHealth::Healthy => "Healthy",
            drover_proto::report::ReportHealth::Progressing => "Progressing",
            drover_proto::report::ReportHealth::Degraded => "Degraded",
            drover_proto::report::ReportHealth::Unknown => "Unknown",
        },
    }
}

fn dot(c: &ClusterRow, report: Option<&Report>, now: i64) -> Dot {
    let reported = c.reported_at.as_deref().map(|at| age(at, now).map(|a| format!("{} ago", human(a))).unwrap_or_else(|| at.to_string()));
    let mut title = format!(
        "{} — {}: {}\nsequence {} ({})\nreported {}",
        c.cluster_name,
        c.class.as_str(),
        c.reason,
        seq_text(c.applied_sequence),
        c.applied_digest.as_deref().map(short_digest).unwrap_or_else(|| "-".into()),
        reported.unwrap_or_else(|| "never".into())
    );
    if let Some(result) = &c.last_result {
        let reason = c.last_reason.as_deref().filter(|r| !r.is_empty()).map(|r| format!(": {r}")).unwrap_or_default();
        title.push_str(&format!("\nlast attempt: {result}{reason}"));
    }
    for line in failing_lines(report) {
        title.push_str(&format!("\n• {line}"));
    }
    Dot {
        name: c.cluster_name.clone(),
        tag: tag(c),
        health: c.health.to_string(),
        class: c.class.as_str(),
        stale: c.stale,
        untrusted: c.class == Class::Untrusted,
        missing: c.class == Class::Missing,
        behind: c.class == Class::Behind && c.applied_sequence.is_some(),
        sequence: seq_text(c.applied_sequence),
        title,
    }
}

fn channel(s: &SummaryRow, rows: &[&ClusterRow], reading: &Reading, now: i64) -> Channel {
    let newest = s.sequences.iter().filter_map(|a| a.sequence).max();
    let sequences = s
        .sequences
        .iter()
        .map(|a| SequenceCount {
            sequence: seq_text(a.sequence),
            digest: a.digest.as_deref().map(short_digest).unwrap_or_default(),
            clusters: a.clusters,
            newest: a.sequence.is_some() && a.sequence == newest,
        })
        .collect();
    let dots: Vec<Dot> = rows.iter().map(|c| dot(c, reading.trusted.get(&tag(c)), now)).collect();
    Channel {
        name: s.channel.clone(),
        sequences,
        bad: dots.iter().any(|d| d.stale || d.untrusted || d.missing || d.health == "Degraded") || s.untrusted > rows.iter().filter(|c| c.class == Class::Untrusted).count(),
        hidden: s.clusters - rows.len(),
        dots,
        ready: s.ready,
        total: s.clusters,
    }
}

fn attention(c: &ClusterRow, reading: &Reading, now: i64) -> Option<Attention> {
    if c.class == Class::Ready {
        return None;
    }
    let report = reading.trusted.get(&tag(c));
    let mut summary = match (c.class, c.reported_at.as_deref().and_then(|at| age(at, now))) {
        (Class::Stale, Some(a)) if a >= 0 => format!("no report for {} (last said {})", human(a), c.health),
        _ => c.reason.clone(),
    };
    if let (Some(result), Some(reason)) = (&c.last_result, &c.last_reason) {
        if !matches!(result.as_str(), "Applied" | "Unchanged") && !summary.contains(reason.as_str()) {
            summary.push_str(&format!("; last attempt {result}: {reason}"));
        }
    }
    Some(Attention { tag: tag(c), environment: c.environment.clone(), channel: c.channel.clone(), state: state(c), summary, failing: failing_lines(report) })
}

fn totals(st: &Status) -> Totals {
    let mut t = Totals::default();
    for s in &st.summary {
        t.clusters += s.clusters;
        t.ready += s.ready;
        t.healthy += s.healthy;
        t.progressing += s.progressing;
        t.degraded += s.degraded;
        t.unknown += s.unknown;
        t.stale += s.stale;
        t.untrusted += s.untrusted;
        t.missing += s.missing;
    }
    t.waiting = t.clusters - t.ready;
    t
}

/// Renders the page for the status `st` (built from `reading`) read from `sources` at `now`.
pub fn render(st: &Status, reading: &Reading, sources: &[String], now: i64, stale_secs: i64) -> Result<String, FleetError> {
    let types: Vec<String> = st.summary.iter().map(|s| s.cluster_type.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let mut envs: Vec<String> = st.summary.iter().map(|s| s.environment.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    envs.sort_by_key(|e| environment_rank(e));
    let rows = envs
        .iter()
        .map(|env| Row {
            environment: env.clone(),
            cells: types
                .iter()
                .map(|t| {
                    st.summary
                        .iter()
                        .filter(|s| &s.environment == env && &s.cluster_type == t)
                        .map(|s| {
                            let here: Vec<&ClusterRow> =
                                st.clusters.iter().filter(|c| (&c.environment, &c.cluster_type, &c.channel) == (&s.environment, &s.cluster_type, &s.channel)).collect();
                            channel(s, &here, reading, now)
                        })
                        .collect()
                })
                .collect(),
        })
        .collect();
    let page = Page {
        generated: drover_proto::time::format_rfc3339(now).unwrap_or_default(),
        sources: sources.to_vec(),
        fleet: st.fleet.clone(),
        stale_after: human(stale_secs),
        all_well: st.all_well(),
        types,
        rows,
        attention: st.clusters.iter().filter_map(|c| attention(c, reading, now)).collect(),
        totals: totals(st),
        apart: st.untrusted.named.iter().map(|n| Apart { cluster: n.cluster.clone(), channel: n.channel.clone(), reason: n.reason.clone() }).collect(),
        apart_total: st.untrusted.reports,
        unreadable: st.unreadable.named.iter().map(|u| format!("{}: {}", u.name, u.reason)).collect(),
        unreadable_total: st.unreadable.tags,
    };
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template("fleet.html", TEMPLATE)?;
    let html = env.get_template("fleet.html")?.render(minijinja::Value::from(minijinja::value::Serde(&page)))?;
    // Report text is untrusted: no control character reaches the page (one rule, `clean`).
    Ok(drover_proto::text::clean::lines(&html).into_owned())
}
