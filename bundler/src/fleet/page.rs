//! The fleet page of `drover fleet view`: one self-contained HTML file (inline CSS, no
//! scripts, fonts or images) for the on-call engineer. Environments are rows, cluster
//! types columns; each cell lists its channels with the sequences they run and one dot
//! per cluster, coloured (and marked) by health; stale clusters are hollow, untrusted
//! reports (not counted: unsigned, not enrolled, from the future, over the limits) are
//! crossed out; a dot's tooltip and the "needs attention" list below name failing objects
//! and why a report is not trusted. The template is `page.html` (MiniJinja, HTML
//! auto-escaping); every report field reaching it was bounded and cleaned by the reader.

use std::collections::{BTreeMap, BTreeSet};

use drover_proto::report::{Report, ReportHealth};
use serde::Serialize;

use super::{age, environment_rank, human, short_digest, status::{is_stale, order_key}, Seen};

const TEMPLATE: &str = include_str!("page.html");

#[derive(Serialize)]
struct Dot {
    name: String,
    tag: String,
    health: String,
    stale: bool,
    untrusted: bool,
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
    healthy: usize,
    total: usize,
    /// A cluster is Degraded or stale.
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
    health: String,
    stale: bool,
    untrusted: bool,
    summary: String,
    failing: Vec<String>,
}

#[derive(Serialize, Default)]
struct Totals {
    clusters: usize,
    healthy: usize,
    progressing: usize,
    degraded: usize,
    unknown: usize,
    stale: usize,
    untrusted: usize,
}

#[derive(Serialize)]
struct Page {
    generated: String,
    sources: Vec<String>,
    stale_after: String,
    types: Vec<String>,
    rows: Vec<Row>,
    attention: Vec<Attention>,
    totals: Totals,
    unreadable: Vec<String>,
}

fn seq_text(s: Option<u64>) -> String {
    s.map(|s| s.to_string()).unwrap_or_else(|| "-".into())
}

fn failing_lines(r: &Report) -> Vec<String> {
    r.failing
        .iter()
        .map(|f| {
            let name = f.object.namespace.as_ref().map(|ns| format!("{ns}/{}", f.object.name)).unwrap_or_else(|| f.object.name.clone());
            format!("{} {} ({}): {}", f.object.kind, name, f.state, f.message)
        })
        .collect()
}

fn dot(s: &Seen, newest: Option<u64>, now: i64, stale_secs: i64) -> Dot {
    let r = &s.report;
    let stale = is_stale(r, now, stale_secs);
    let reported = age(&r.reported_at, now).map(|a| format!("{} ago", human(a))).unwrap_or_else(|| r.reported_at.clone());
    let mut title = format!(
        "{} — {}{}\nsequence {} ({})\nreported {}",
        r.cluster_name,
        r.health,
        if stale { " (STALE)" } else { "" },
        seq_text(r.applied_sequence),
        r.applied_digest.as_deref().map(short_digest).unwrap_or_else(|| "-".into()),
        reported
    );
    if let Some(a) = &r.last_attempt {
        title.push_str(&format!("\nlast attempt: {}{}", a.result, if a.reason.is_empty() { String::new() } else { format!(": {}", a.reason) }));
    }
    for line in failing_lines(r) {
        title.push_str(&format!("\n• {line}"));
    }
    if let Some(why) = s.untrusted() {
        title.push_str(&format!("\nUNTRUSTED, not counted: {why}"));
    }
    Dot {
        name: r.cluster_name.clone(),
        tag: r.tag(),
        health: r.health.to_string(),
        stale,
        untrusted: s.untrusted().is_some(),
        behind: r.applied_sequence < newest,
        sequence: seq_text(r.applied_sequence),
        title,
    }
}

fn channel(reports: &[&Seen], now: i64, stale_secs: i64) -> Channel {
    let mut at: BTreeMap<(Option<u64>, Option<String>), usize> = BTreeMap::new();
    for r in reports.iter().map(|s| &s.report) {
        *at.entry((r.applied_sequence, r.applied_digest.clone())).or_insert(0) += 1;
    }
    let newest = at.keys().filter_map(|(s, _)| *s).max();
    let sequences = at
        .into_iter()
        .rev()
        .map(|((s, d), clusters)| SequenceCount {
            sequence: seq_text(s),
            digest: d.as_deref().map(short_digest).unwrap_or_default(),
            clusters,
            newest: s.is_some() && s == newest,
        })
        .collect();
    let healthy = reports
        .iter()
        .filter(|s| s.untrusted().is_none() && s.report.health == ReportHealth::Healthy && !is_stale(&s.report, now, stale_secs))
        .count();
    let dots: Vec<Dot> = reports.iter().map(|s| dot(s, newest, now, stale_secs)).collect();
    Channel {
        name: reports[0].report.channel.clone(),
        sequences,
        bad: dots.iter().any(|d| d.stale || d.untrusted || d.health == "Degraded"),
        dots,
        healthy,
        total: reports.len(),
    }
}

fn attention(s: &Seen, now: i64, stale_secs: i64) -> Option<Attention> {
    let r = &s.report;
    let stale = is_stale(r, now, stale_secs);
    if let Some(why) = s.untrusted() {
        return Some(Attention {
            tag: r.tag(),
            environment: r.environment.clone(),
            channel: r.channel.clone(),
            health: r.health.to_string(),
            stale,
            untrusted: true,
            summary: format!("untrusted report, not counted: {why}"),
            failing: Vec::new(),
        });
    }
    if !stale && r.health == ReportHealth::Healthy && r.last_attempt.as_ref().is_none_or(|a| matches!(a.result.as_str(), "Applied" | "Unchanged")) {
        return None;
    }
    let mut summary = match (stale, age(&r.reported_at, now)) {
        (true, Some(a)) => format!("no report for {} (last said {})", human(a), r.health),
        (true, None) => "report time unreadable".into(),
        (false, _) => match r.health_since.as_deref().and_then(|s| age(s, now)) {
            Some(s) => format!("{} for {} on sequence {}", r.health, human(s), seq_text(r.applied_sequence)),
            None => format!("{} on sequence {}", r.health, seq_text(r.applied_sequence)),
        },
    };
    if let Some(a) = r.last_attempt.as_ref().filter(|a| !matches!(a.result.as_str(), "Applied" | "Unchanged")) {
        summary.push_str(&format!("; last attempt {}: {}", a.result, a.reason));
    }
    Some(Attention {
        tag: r.tag(),
        environment: r.environment.clone(),
        channel: r.channel.clone(),
        health: r.health.to_string(),
        stale,
        untrusted: false,
        summary,
        failing: failing_lines(r),
    })
}

fn totals(reports: &[Seen], now: i64, stale_secs: i64) -> Totals {
    let mut t = Totals { clusters: reports.len(), ..Default::default() };
    for s in reports {
        match (is_stale(&s.report, now, stale_secs), s.report.health) {
            _ if s.untrusted().is_some() => t.untrusted += 1,
            (true, _) => t.stale += 1,
            (false, ReportHealth::Healthy) => t.healthy += 1,
            (false, ReportHealth::Progressing) => t.progressing += 1,
            (false, ReportHealth::Degraded) => t.degraded += 1,
            (false, ReportHealth::Unknown) => t.unknown += 1,
        }
    }
    t
}

/// Renders the page for `reports` read from `sources` at `now`.
pub fn render(reports: &[Seen], sources: &[String], unreadable: &[String], now: i64, stale_secs: i64) -> anyhow::Result<String> {
    let mut sorted: Vec<&Seen> = reports.iter().collect();
    sorted.sort_by_key(|s| order_key(&s.report));
    let types: Vec<String> = sorted.iter().map(|s| s.report.cluster_type.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let mut envs: Vec<String> = sorted.iter().map(|s| s.report.environment.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    envs.sort_by_key(|e| environment_rank(e));
    let rows = envs
        .iter()
        .map(|env| Row {
            environment: env.clone(),
            cells: types
                .iter()
                .map(|t| {
                    let here: Vec<&Seen> = sorted.iter().copied().filter(|s| &s.report.environment == env && &s.report.cluster_type == t).collect();
                    let channels: BTreeSet<&str> = here.iter().map(|s| s.report.channel.as_str()).collect();
                    channels
                        .into_iter()
                        .map(|c| channel(&here.iter().copied().filter(|s| s.report.channel == c).collect::<Vec<_>>(), now, stale_secs))
                        .collect()
                })
                .collect(),
        })
        .collect();
    let page = Page {
        generated: drover_proto::time::format_rfc3339(now).unwrap_or_default(),
        sources: sources.to_vec(),
        stale_after: human(stale_secs),
        types,
        rows,
        attention: sorted.iter().filter_map(|r| attention(r, now, stale_secs)).collect(),
        totals: totals(reports, now, stale_secs),
        unreadable: unreadable.to_vec(),
    };
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template("fleet.html", TEMPLATE)?;
    let html = env.get_template("fleet.html")?.render(minijinja::Value::from(minijinja::value::Serde(&page)))?;
    // Report text is untrusted: no control character reaches the page (one rule, `clean`).
    Ok(drover_proto::text::clean::lines(&html).into_owned())
}
