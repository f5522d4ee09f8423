//! The fleet as its reports show it (docs/fleet.md): reading reports from one or more
//! reports repositories and judging each against that repository's signed roster
//! ([`load`]: a report counts only when its cluster is enrolled with the key that signed
//! it), the per-cluster rows and per-channel summary of `drover fleet status`
//! ([`status`]), the health gate of `drover promote --require-healthy` and `drover fleet
//! wait` ([`gate`]), and the page of `drover fleet view` ([`page`]).

pub mod agents;
pub mod enroll;
pub mod gate;
pub mod page;
pub mod status;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use drover_proto::report::roster::{self, Standing};
use drover_proto::report::store::{self as report_store, Unreadable};
use drover_proto::report::{self, Report};
use drover_proto::trust::TrustPolicy;
use drover_proto::{Reference, RegistryClient, Repo};

/// Manifests read at once from a reports repository.
pub const CONCURRENCY: usize = 32;

/// A report as read, and whether it counts.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The report (cleaned, bounded).
    pub report: Report,
    /// Whether it counts (signed by its cluster's enrolled key, in time, within the limits).
    pub standing: Standing,
}

impl Seen {
    /// Why it does not count (`None` when it does).
    pub fn untrusted(&self) -> Option<&str> {
        self.standing.reason()
    }
}

/// Reads every report from each of `sources` (`HOST/REPO`, `oci:DIR[:REPOSITORY]`,
/// `oci-archive:FILE`) and judges each against the roster of its own source, verified with
/// `policy`. Unreadable tags are returned with the source they came from.
pub async fn load(sources: &[String], client: &RegistryClient, policy: &TrustPolicy) -> anyhow::Result<(Vec<Seen>, Vec<Unreadable>)> {
    let mut reports = Vec::new();
    let mut unreadable = Vec::new();
    let now = drover_proto::time::now_unix();
    for s in sources {
        let parsed = Reference::parse(s)?;
        if let Reference::Registry(r) = &parsed {
            anyhow::ensure!(r.lookup().is_none(), "{s}: give the reports repository without a tag or digest, e.g. {}", r.repository_url());
        }
        let (repo, _) = Repo::open(&parsed, client, false).with_context(|| format!("opening the reports repository {s}"))?;
        let loaded = report_store::read_all(&repo, CONCURRENCY).await.with_context(|| format!("reading reports from {s}"))?;
        // Each report is judged by the roster of its own repository: an archive opened
        // without a name may hold several (`<repository>:<tag>` ref names).
        let mut rosters: BTreeMap<Option<String>, roster::Held> = BTreeMap::new();
        for r in loaded.reports {
            let repository = r.name.rsplit_once(':').map(|(repository, _)| repository.to_string());
            if !rosters.contains_key(&repository) {
                let within = repository.as_deref().map(|x| repo.within(x)).unwrap_or_else(|| repo.clone());
                let held = roster::read(&within, policy).await.with_context(|| format!("reading the fleet roster of {s}"))?;
                rosters.insert(repository.clone(), held);
            }
            reports.push(Seen { standing: rosters[&repository].judge(&r, now), report: r.report });
        }
        unreadable.extend(loaded.unreadable.into_iter().map(|u| Unreadable { name: format!("{s}: {}", u.name), ..u }));
    }
    Ok((reports, unreadable))
}

/// The reports repositories named by `--registry PREFIX` (each `PREFIX/drover-reports`)
/// and `--reports REF` (as given). At least one is required.
pub fn sources(prefixes: &[String], reports: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for p in prefixes {
        out.push(report::prefix_repository(p).map_err(anyhow::Error::msg)?.to_string());
    }
    out.extend(reports.iter().cloned());
    anyhow::ensure!(!out.is_empty(), "name the reports: --registry PREFIX (reads PREFIX/drover-reports) or --reports HOST/REPO|oci:DIR|oci-archive:FILE");
    Ok(out)
}

/// Parses a duration flag (`15m`, `30s`, `0s`).
pub fn parse_duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text.trim())
        .map_err(|_| crate::output::UsageError(format!("{flag} {text:?} is not a duration like 30s, 15m or 1h")).into())
}

/// Seconds as a short human duration: the two largest units (`45s`, `4m 10s`, `3h 5m`, `2d 4h`).
pub fn human(secs: i64) -> String {
    let s = secs.max(0);
    let units = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let Some(i) = units.iter().position(|(n, _)| s >= *n) else { return "0s".into() };
    let (big, b) = units[i];
    let mut out = format!("{}{b}", s / big);
    if let Some((small, u)) = units.get(i + 1) {
        let rest = (s % big) / small;
        if rest > 0 {
            out.push_str(&format!(" {rest}{u}"));
        }
    }
    out
}

/// Seconds since `rfc3339` at `now` (`None` when it does not parse).
pub fn age(rfc3339: &str, now: i64) -> Option<i64> {
    drover_proto::time::parse_rfc3339(rfc3339).ok().map(|t| now - t)
}

/// The first 12 hex digits of a digest (for tables and the page).
pub fn short_digest(d: &str) -> String {
    d.strip_prefix("sha256:").unwrap_or(d).chars().take(12).collect()
}

/// Environments in promotion order when the names are the usual ones (dev, test, qa,
/// staging, preprod, prod), others after them alphabetically.
pub fn environment_rank(env: &str) -> (usize, String) {
    const ORDER: [&str; 9] = ["dev", "development", "test", "qa", "int", "staging", "stage", "preprod", "prod"];
    let rank = ORDER.iter().position(|e| *e == env).unwrap_or(ORDER.len());
    let rank = if rank == ORDER.len() && env.starts_with("prod") { ORDER.len() - 1 } else { rank };
    (rank, env.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_durations() {
        assert_eq!(super::human(0), "0s");
        assert_eq!(super::human(59), "59s");
        assert_eq!(super::human(250), "4m 10s");
        assert_eq!(super::human(3600), "1h");
        assert_eq!(super::human(3 * 86_400 + 5 * 3600 + 7), "3d 5h");
    }
}
