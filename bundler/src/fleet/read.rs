//! Reading the fleet's reports ([`load`]) into what every reader needs ([`Reading`]), and
//! no more: a report is judged as it arrives — against the declared membership of a Fleet
//! file (`--fleet`), or else against the signed roster of its own reports repository — and
//! only reports that count are kept whole, one per cluster (the newest: a cluster counts
//! once, however many repositories or archive entries carry its report). A report that
//! does not count is kept as its tag and the group it claims; why, for the first
//! [`NAMED`] only. Unusable tags are counted, the first [`NAMED`] named. So a reader's
//! memory and the page grow with the clusters that count, not with what a registry writer
//! can add.

use std::collections::{BTreeMap, HashMap};

use drover_proto::report::roster::{self, Standing};
use drover_proto::report::store::{self as report_store, Received, Unreadable};
use drover_proto::report::Report;
use drover_proto::trust::TrustPolicy;
use drover_proto::{Reference, RegistryClient, Repo};
use futures::StreamExt;

use super::members::{Group, Membership};
use super::FleetError;

/// Manifests read at once from a reports repository.
pub const CONCURRENCY: usize = 32;
/// Reports that do not count (and unusable tags) named at most; the rest are counted.
pub const NAMED: usize = 100;

/// How reports are judged.
pub enum Judge<'a> {
    /// Against the clusters a reviewed Fleet file declares.
    Declared(&'a Membership),
    /// Against the signed roster of each reports repository, verified with the policy
    /// (membership a registry writer can roll back: every reader warns).
    Roster(&'a TrustPolicy),
}

/// What the readers keep of the reports.
#[derive(Debug, Default)]
pub struct Reading {
    /// The report that counts of each cluster (by tag `TYPE.NAME`): the newest, of its
    /// declared group when a Fleet file declares it.
    pub trusted: BTreeMap<String, Report>,
    /// Declared clusters without a report that counts: why their reports do not count.
    pub declared_untrusted: BTreeMap<String, String>,
    /// Declared clusters whose tag holds something unusable (another cluster's report, a
    /// broken one): why.
    pub declared_unusable: BTreeMap<String, String>,
    /// Every other cluster whose reports do not count (by tag), with the group its report
    /// claims: never counted with `--fleet`; without it, one of its group's clusters.
    pub untrusted: BTreeMap<String, Group>,
    /// Why, for the first [`NAMED`] of [`Reading::untrusted`] (by tag).
    pub why: BTreeMap<String, String>,
    /// Unusable tags in all.
    pub unreadable: usize,
    /// The first [`NAMED`] of them (by name): why each was skipped.
    pub unreadable_named: BTreeMap<String, String>,
}

/// Inserts into a map that keeps the first [`NAMED`] keys.
fn keep_first(map: &mut BTreeMap<String, String>, key: String, value: String) {
    if map.len() < NAMED || map.last_key_value().is_some_and(|(k, _)| *k > key) {
        map.entry(key).or_insert(value);
        if map.len() > NAMED {
            map.pop_last();
        }
    }
}

fn newer(a: &Report, b: &Report) -> bool {
    let t = |r: &Report| drover_proto::time::parse_rfc3339(&r.reported_at).ok();
    t(a) > t(b)
}

/// Does `report` speak of the group its cluster is declared in? An agent with several
/// sources writes a report per source, each into its source's reports repository, all
/// under the cluster's one tag and key: read together with a Fleet file, the report of
/// the declared channel is the cluster's, however recent another source's is. Without a
/// Fleet file every report fits (the newest wins).
fn fits(judge: &Judge, tag: &str, report: &Report) -> bool {
    match judge {
        Judge::Declared(m) => m.get(tag).is_some_and(|member| Group::of(report) == member.group),
        Judge::Roster(_) => true,
    }
}

impl Reading {
    /// Adds one report, judged `standing`: of a cluster's reports that count, the one of
    /// its declared group ([`fits`]), then the newest, is kept.
    fn add(&mut self, received: Received, standing: Standing, judge: &Judge) {
        let tag = received.report.tag();
        match standing {
            Standing::Trusted => {
                let replaces = match self.trusted.get(&tag) {
                    None => true,
                    Some(held) => {
                        let (new_fits, held_fits) = (fits(judge, &tag, &received.report), fits(judge, &tag, held));
                        (new_fits && !held_fits) || (new_fits == held_fits && newer(&received.report, held))
                    }
                };
                if replaces {
                    self.trusted.insert(tag, received.report);
                }
            }
            Standing::Untrusted(why) => match judge {
                Judge::Declared(m) if m.get(&tag).is_some() => {
                    self.declared_untrusted.entry(tag).or_insert(why);
                }
                _ => {
                    self.untrusted.entry(tag.clone()).or_insert_with(|| Group::of(&received.report));
                    keep_first(&mut self.why, tag, why);
                }
            },
        }
    }

    /// Once everything is read: a cluster with a report that counts is not also listed
    /// as untrusted (another copy of its report was forged or old).
    fn settle(&mut self) {
        let trusted = &self.trusted;
        self.declared_untrusted.retain(|t, _| !trusted.contains_key(t));
        self.declared_unusable.retain(|t, _| !trusted.contains_key(t));
        self.untrusted.retain(|t, _| !trusted.contains_key(t));
        self.why.retain(|t, _| !trusted.contains_key(t));
    }
}

/// Reads every report of each of `sources` (`HOST/REPO`, `oci:DIR[:REPOSITORY]`,
/// `oci-archive:FILE`), judging each as `judge` says: with a roster, each report against
/// the roster of its own repository (an archive may hold several).
pub async fn load(sources: &[String], client: &RegistryClient, judge: &Judge<'_>) -> Result<Reading, FleetError> {
    let mut reading = Reading::default();
    scan(sources, client, judge, |s, outcome| match outcome {
        Ok((received, standing)) => reading.add(received, standing, judge),
        Err(u) => {
            if let Judge::Declared(m) = judge {
                let tag = u.name.rsplit(':').next().unwrap_or(&u.name);
                if m.get(tag).is_some() {
                    reading.declared_unusable.entry(tag.to_string()).or_insert_with(|| u.reason.clone());
                }
            }
            reading.unreadable += 1;
            keep_first(&mut reading.unreadable_named, format!("{s}: {}", u.name), u.reason);
        }
    })
    .await?;
    reading.settle();
    Ok(reading)
}

/// The one reading of the reports: hands `each` every report of `sources` as it arrives,
/// judged as `judge` says, or why its tag is unusable (with the source it came from).
/// Keeps nothing itself: what a reader keeps is its own choice ([`load`]).
pub async fn scan(
    sources: &[String],
    client: &RegistryClient,
    judge: &Judge<'_>,
    mut each: impl FnMut(&str, Result<(Received, Standing), Unreadable>),
) -> Result<(), FleetError> {
    let now = drover_proto::time::now_unix();
    let store = |what: String| move |source| FleetError::Store { what, source };
    for s in sources {
        let parsed = Reference::parse(s).map_err(|e| FleetError::Usage(format!("{s}: {e}")))?;
        if let Reference::Registry(r) = &parsed {
            if r.lookup().is_some() {
                return Err(FleetError::Usage(format!("{s}: give the reports repository without a tag or digest, e.g. {}", r.repository_url())));
            }
        }
        let (repo, _) = Repo::open(&parsed, client, false).map_err(store(format!("opening the reports repository {s}")))?;
        let names = report_store::candidates(&repo).await.map_err(store(format!("reading reports from {s}")))?;
        let mut rosters: HashMap<Option<String>, roster::Held> = HashMap::new();
        let mut reports = std::pin::pin!(report_store::read_each(&repo, names, CONCURRENCY));
        while let Some(outcome) = reports.next().await {
            let received = match outcome {
                Ok(r) => r,
                Err(u) => {
                    each(s, Err(u));
                    continue;
                }
            };
            let standing = match judge {
                Judge::Declared(m) => m.judge(&received, now),
                Judge::Roster(policy) => {
                    let repository = received.name.rsplit_once(':').map(|(repository, _)| repository.to_string());
                    if !rosters.contains_key(&repository) {
                        let within = repository.as_deref().map(|x| repo.within(x)).unwrap_or_else(|| repo.clone());
                        let held = roster::read(&within, policy).await.map_err(store(format!("reading the fleet roster of {s}")))?;
                        rosters.insert(repository.clone(), held);
                    }
                    rosters[&repository].judge(&received, now)
                }
            };
            each(s, Ok((received, standing)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::keys::PrivateKey;
    use drover_proto::report::store::Signer;
    use drover_proto::report::{ReportHealth, SCHEMA_VERSION};

    use crate::fleet::members::Member;

    pub(crate) fn report(name: &str, at: &str) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            cluster_name: name.into(),
            cluster_type: "edge".into(),
            environment: "prod".into(),
            channel: "prod-ring0".into(),
            applied_digest: None,
            applied_sequence: None,
            health: ReportHealth::Healthy,
            health_since: None,
            last_attempt: None,
            objects: Default::default(),
            failing: vec![],
            held: None,
            drifted_objects: None,
            rolled_back: None,
            agent_version: "t".into(),
            reported_at: at.into(),
        }
    }

    #[test]
    fn a_cluster_counts_once_and_the_newest_report_wins() {
        let key = PrivateKey::generate().unwrap();
        let group = Group { environment: "prod".into(), cluster_type: "edge".into(), channel: "prod-ring0".into() };
        let m = Membership::new(
            "fleet.yaml",
            vec![Member { tag: "edge.a".into(), cluster_name: "a".into(), group, report_key: key.public_key().fingerprint().into() }],
        );
        let judge = Judge::Declared(&m);
        let now = drover_proto::time::now_unix();
        let t = |ago: i64| drover_proto::time::format_rfc3339(now - ago).unwrap();
        let signed = |name: &str, at: String| Received { name: name.into(), report: report(name, &at), signer: Signer::Key(key.public_key().clone()), cut: vec![] };
        let mut reading = Reading::default();
        for (r, ago) in [("a", 60), ("a", 10), ("a", 30), ("b", 5)] {
            let rec = signed(r, t(ago));
            let standing = m.judge(&rec, now);
            reading.add(rec, standing, &judge);
        }
        // Its tenant source's newer report (another channel, same key) is not its report.
        let mut tenant = signed("a", t(1));
        tenant.report.channel = "tenant-prod".into();
        let standing = m.judge(&tenant, now);
        reading.add(tenant, standing, &judge);
        let forged = Received { signer: Signer::Unsigned, ..signed("a", t(0)) };
        let standing = m.judge(&forged, now);
        reading.add(forged, standing, &judge);
        reading.settle();
        assert_eq!(reading.trusted.len(), 1);
        assert_eq!((reading.trusted["edge.a"].reported_at.as_str(), reading.trusted["edge.a"].channel.as_str()), (t(10).as_str(), "prod-ring0"));
        assert!(reading.declared_untrusted.is_empty(), "a's forged copy does not list it as untrusted");
        assert_eq!(reading.untrusted.len(), 1, "b is not declared");
        assert!(reading.why["edge.b"].starts_with("not declared in fleet.yaml"), "{:?}", reading.why);
    }

    #[test]
    fn only_the_first_names_are_kept() {
        let mut m = BTreeMap::new();
        for i in (0..250).rev() {
            keep_first(&mut m, format!("t{i:03}"), String::new());
        }
        assert_eq!(m.len(), NAMED);
        assert_eq!(m.keys().next().unwrap(), "t000");
        assert_eq!(m.keys().last().unwrap(), "t099");
    }
}
