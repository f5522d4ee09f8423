//! Fleet reports from the agent (docs/fleet.md). The pipeline hands every recorded attempt
//! to [`observe`]; after each poll the run loop calls [`Reporter::after_cycle`], which
//! builds the report ([`drover_proto::report::Report`]) and pushes it when it says
//! something new, or as a heartbeat every `--report-interval`. Pushes run in their own
//! task, one at a time and bounded: an unreachable or stalled registry never delays a
//! poll or an apply. A failed push is retried after a poll once [`retry_delay`] has passed
//! (30 s, doubling, at most the heartbeat interval): a fleet whose registry refuses its
//! reports does not send a write per agent on every poll.
//!
//! Every report is signed with the cluster's report key ([`crate::identity`]); no report
//! is written before the key is in hand ([`Reporter::set_key`]).
//!
//! `healthSince` is the time this agent first saw the applied digest with its health. On
//! its first report a (re)started agent — a new leader with an empty state directory
//! included — reads the report its predecessor left under the same tag and keeps its
//! `healthSince` when digest and health are the same, the time is not in the future, and
//! that report is signed with this cluster's own key: anyone else's report under the tag
//! (a registry writer's forged older `healthSince`) is ignored.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_proto::auth::{docker_config_credentials_in, HostCredentials};
use drover_proto::keys::PrivateKey;
use drover_proto::report::{self, FailingObject, LastAttempt, Report, ReportHealth, MAX_FAILING};
use drover_proto::time::now_rfc3339;
use drover_proto::{Reference, RegistryClient, RegistryOptions, Repo, StoreError};
use tokio::task::JoinHandle;

use crate::config::ReportSettings;
use crate::record::{Attempt, AttemptSummary, SourceState};
use crate::status::ReportState;
use crate::targets::{Action, Health};

/// Bound of one report push (and of the read of the previous report).
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(20);
/// Wait after the first failed push before the next try; doubled after each further one.
pub const RETRY_FIRST: Duration = Duration::from_secs(30);

/// How long to wait after the `failures`-th failed push in a row: [`RETRY_FIRST`] doubled
/// for each earlier failure, at most `interval` (the heartbeat).
pub fn retry_delay(failures: u32, interval: Duration) -> Duration {
    let doubled = RETRY_FIRST.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(interval)
}

/// What the agent last recorded, as far as a report is concerned.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Applied digest.
    pub applied_digest: Option<String>,
    /// Applied sequence.
    pub applied_sequence: Option<u64>,
    /// Health of the applied state.
    pub health: Option<Health>,
    /// The last recorded attempt.
    pub last_attempt: Option<AttemptSummary>,
    /// Objects of the last attempt that reached the target, by outcome.
    pub objects: BTreeMap<String, u64>,
    /// Its first failing or unhealthy objects.
    pub failing: Vec<FailingObject>,
    /// The hold in force, with the verified bundle waiting ([`observe_hold`]).
    pub held: Option<crate::hold::Held>,
    /// Objects reported drifted (`--drift report`).
    pub drifted: usize,
    /// A rollback's refusal in force.
    pub rolled_back: Option<crate::rollback::RolledBack>,
}

/// The hook where the hold gate is read (every poll): keeps the hold for the next report.
pub fn observe_hold(observed: &Mutex<Observed>, held: Option<&crate::hold::Held>) {
    observed.lock().expect("observed lock").held = held.cloned();
}

/// The hook where attempts are recorded: keeps what the next report will say.
pub fn observe(observed: &Mutex<Observed>, state: &SourceState, attempt: Option<&Attempt>) {
    let mut o = observed.lock().expect("observed lock");
    o.applied_digest = state.applied_digest.clone();
    o.applied_sequence = state.applied_sequence;
    o.health = state.health;
    o.last_attempt = state.last_attempt.clone();
    o.drifted = state.drifted.len();
    o.rolled_back = state.rolled_back.clone().filter(|r| !r.released);
    // Counts and failing objects change only with an attempt that reached the target.
    if let Some(a) = attempt.filter(|a| !a.objects.is_empty() || a.health.is_some()) {
        o.objects.clear();
        for obj in &a.objects {
            *o.objects.entry(obj.action.to_string()).or_insert(0) += 1;
        }
        let failed = a.objects.iter().filter(|x| x.action == Action::Failed).map(|x| FailingObject::new(x.object.clone(), "failed", &x.message));
        let unhealthy = a.unhealthy.iter().map(|x| FailingObject::new(x.object.clone(), &x.health.to_string(), &x.message));
        o.failing = failed.chain(unhealthy).take(MAX_FAILING).collect();
    }
}

fn report_health(h: Option<Health>) -> ReportHealth {
    match h {
        Some(Health::Healthy) => ReportHealth::Healthy,
        Some(Health::Progressing) => ReportHealth::Progressing,
        Some(Health::Degraded) => ReportHealth::Degraded,
        None => ReportHealth::Unknown,
    }
}

/// Opens the reports repository of `settings`: with credentials from
/// `--report-docker-config` when given (a missing file means anonymous), else through
/// `client` (the source's credentials: the Docker config).
pub fn open_repository(settings: &ReportSettings, client: &RegistryClient) -> Result<Repo, StoreError> {
    let client = match (&settings.to, &settings.docker_config) {
        (Reference::Registry(r), Some(path)) => {
            let credentials = if path.exists() {
                docker_config_credentials_in(path, &r.registry).map_err(StoreError::Config)?
            } else {
                tracing::warn!("--report-docker-config {} does not exist: pushing reports anonymously", path.display());
                None
            };
            let credentials = credentials.map(|credentials| HostCredentials { registry: r.registry.clone(), credentials });
            RegistryClient::new(RegistryOptions { credentials, ..client.options().clone() })?
        }
        _ => client.clone(),
    };
    Ok(Repo::open(&settings.to, &client, true)?.0)
}

type Push = JoinHandle<Result<Report, String>>;

/// Decides when to push the report, and pushes it.
pub struct Reporter {
    repo: Repo,
    settings: ReportSettings,
    /// (applied digest, health) and since when it holds.
    since: Option<(Option<String>, ReportHealth, String)>,
    /// Fingerprint and time of the last report written.
    pushed: Option<(String, Instant)>,
    /// Set once a report was written by this process (the predecessor's was read).
    primed: bool,
    /// Failed pushes in a row, and when the last one failed.
    failed: Option<(u32, Instant)>,
    task: Option<Push>,
    /// The cluster's report key (nothing is written without it).
    key: Option<Arc<PrivateKey>>,
    /// When getting the key last failed.
    key_failed: Option<Instant>,
    /// What `drover-agent status` shows of the reports (written by the push task too).
    state: Arc<Mutex<ReportState>>,
}

impl Reporter {
    /// A reporter writing into `repo`.
    pub fn new(repo: Repo, settings: ReportSettings) -> Self {
        let to = repo.describe(&report::report_tag(&settings.cluster_type, &settings.cluster_name));
        let state = Arc::new(Mutex::new(ReportState { to, result: "pending".into(), ..ReportState::default() }));
        Reporter { repo, settings, since: None, pushed: None, primed: false, failed: None, task: None, key: None, key_failed: None, state }
    }

    /// The reports' state as `drover-agent status` shows it (kept current by this reporter).
    pub fn state(&self) -> Arc<Mutex<ReportState>> {
        self.state.clone()
    }

    /// The cluster's report key: reports are written from now on.
    pub fn set_key(&mut self, key: PrivateKey) {
        self.set_shared_key(Arc::new(key));
    }

    /// Like [`Reporter::set_key`] with the key every source's reporter shares.
    pub fn set_shared_key(&mut self, key: Arc<PrivateKey>) {
        {
            let mut st = self.state.lock().expect("report state lock");
            st.key_fingerprint = Some(key.public_key().fingerprint().to_string());
            if st.result == "failed" && st.last_write.is_none() {
                *st = ReportState { result: "pending".into(), error: None, ..st.clone() };
            }
        }
        self.key = Some(key);
        self.key_failed = None;
    }

    /// True when the key is still needed and it is time to (try to) get it: never tried,
    /// or the last try failed at least [`RETRY_FIRST`] ago.
    pub fn key_due(&self) -> bool {
        self.key.is_none() && self.key_failed.is_none_or(|at| at.elapsed() >= RETRY_FIRST)
    }

    /// Getting the key failed (tried again after [`RETRY_FIRST`]).
    pub fn key_failed(&mut self, why: &str) {
        self.key_failed = Some(Instant::now());
        {
            let mut st = self.state.lock().expect("report state lock");
            st.result = "failed".into();
            st.error = Some(format!("the cluster's report key: {why}"));
        }
        tracing::warn!("no report written: the cluster's report key: {why} (tried again in {})", humantime::format_duration(RETRY_FIRST));
    }

    /// Where reports go, for logs.
    pub fn describe(&self) -> String {
        self.repo.describe(&report::report_tag(&self.settings.cluster_type, &self.settings.cluster_name))
    }

    /// The report for `obs`, now.
    pub fn build(&mut self, obs: &Observed) -> Report {
        let health = report_health(obs.health);
        let key = (obs.applied_digest.clone(), health);
        let since = match &self.since {
            Some((d, h, s)) if (d, h) == (&key.0, &key.1) => s.clone(),
            _ => obs.last_attempt.as_ref().map(|a| a.at.clone()).unwrap_or_else(now_rfc3339),
        };
        self.since = Some((key.0, key.1, since.clone()));
        Report {
            schema_version: report::SCHEMA_VERSION,
            cluster_name: self.settings.cluster_name.clone(),
            cluster_type: self.settings.cluster_type.clone(),
            environment: self.settings.environment.clone(),
            channel: self.settings.channel.clone(),
            applied_digest: obs.applied_digest.clone(),
            applied_sequence: obs.applied_sequence,
            health,
            health_since: (health != ReportHealth::Unknown).then_some(since),
            last_attempt: obs.last_attempt.as_ref().map(|a| LastAttempt {
                result: a.result.to_string(),
                reason: report::clip(&a.reason),
                digest: a.digest.clone(),
                at: a.at.clone(),
            }),
            objects: obs.objects.clone(),
            failing: obs.failing.clone(),
            held: obs.held.as_ref().map(|h| report::ReportHold {
                reason: report::clip(&h.reason),
                since: h.since.clone(),
                waiting_digest: h.waiting_digest.clone(),
                next_window: h.next_window.clone(),
            }),
            drifted_objects: (obs.drifted > 0).then_some(obs.drifted as u64),
            rolled_back: obs.rolled_back.as_ref().map(|r| report::ReportRollback {
                digest: r.from.digest.clone(),
                sequence: r.from.sequence,
                to_digest: r.to.digest.clone(),
                at: r.at.clone(),
            }),
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            reported_at: now_rfc3339(),
        }
    }

    /// True when `report` is worth a write: it says something new, the heartbeat is
    /// due, or nothing was written yet.
    fn due(&self, report: &Report, now: Instant) -> bool {
        match &self.pushed {
            None => true,
            Some((fp, at)) => *fp != report.fingerprint() || now.saturating_duration_since(*at) >= self.settings.interval,
        }
    }

    /// True while the last push failed less than [`retry_delay`] ago.
    fn backing_off(&self, now: Instant) -> bool {
        self.failed.is_some_and(|(n, at)| now.saturating_duration_since(at) < retry_delay(n, self.settings.interval))
    }

    /// Counts a failed push at `now`; returns the wait before the next try.
    fn failed_at(&mut self, now: Instant) -> Duration {
        let n = self.failed.map_or(1, |(n, _)| n.saturating_add(1));
        self.failed = Some((n, now));
        retry_delay(n, self.settings.interval)
    }

    /// Collects a finished push (without waiting).
    fn collect(&mut self, result: Result<Result<Report, String>, tokio::task::JoinError>) {
        match result {
            Ok(Ok(pushed)) => {
                if let Some((d, h, s)) = self.since.as_mut() {
                    if (&*d, *h) == (&pushed.applied_digest, pushed.health) {
                        if let Some(adopted) = &pushed.health_since {
                            *s = adopted.clone();
                        }
                    }
                }
                tracing::debug!(to = %self.describe(), health = %pushed.health, "report written");
                self.pushed = Some((pushed.fingerprint(), Instant::now()));
                self.primed = true;
                self.failed = None;
            }
            Ok(Err(e)) => {
                let wait = self.failed_at(Instant::now());
                tracing::warn!("report not written (retried in {}): {e}", humantime::format_duration(wait));
            }
            Err(e) => {
                let wait = self.failed_at(Instant::now());
                tracing::warn!("report task (retried in {}): {e}", humantime::format_duration(wait));
            }
        }
    }

    fn spawn(&mut self, report: Report) {
        let Some(key) = self.key.clone() else { return };
        let repo = self.repo.clone();
        let primed = self.primed;
        let state = self.state.clone();
        self.task = Some(tokio::spawn(async move {
            let work = async {
                let mut report = report;
                if !primed {
                    adopt_since(&repo, &mut report, &key).await;
                }
                report::store::push(&repo, &report, &key).await.map_err(|e| e.to_string())?;
                Ok(report)
            };
            let pushed = tokio::time::timeout(PUSH_TIMEOUT, work).await.unwrap_or_else(|_| Err(format!("no answer within {PUSH_TIMEOUT:?}")));
            let mut st = state.lock().expect("report state lock");
            match &pushed {
                Ok(_) => *st = ReportState { result: "written".into(), last_write: Some(now_rfc3339()), error: None, ..st.clone() },
                Err(e) => *st = ReportState { result: "failed".into(), error: Some(e.clone()), ..st.clone() },
            }
            drop(st);
            pushed
        }));
    }

    /// After a poll: collects a finished push, then starts one when the report is due and
    /// none is in flight. Never waits. Returns true when a push was started.
    pub fn after_cycle(&mut self, obs: &Observed) -> bool {
        if let Some(task) = self.task.take() {
            if !task.is_finished() {
                self.task = Some(task);
                return false;
            }
            if let Some(result) = futures::FutureExt::now_or_never(task) {
                self.collect(result);
            }
        }
        let now = Instant::now();
        if self.backing_off(now) || self.key.is_none() {
            return false;
        }
        let report = self.build(obs);
        let due = self.due(&report, now);
        if due {
            self.spawn(report);
        }
        due
    }

    /// Pretends the last report was written `age` ago (the fleet simulation starts its
    /// agents with their heartbeats spread as a long-running fleet has them).
    pub fn pretend_last_write(&mut self, age: Duration) {
        if let Some((_, at)) = self.pushed.as_mut() {
            let now = Instant::now();
            *at = now.checked_sub(age).unwrap_or(now);
        }
    }

    /// Writes the report now if it is due (`--once`, shutdown), waiting for a push in
    /// flight first, backing off or not; bounded by [`PUSH_TIMEOUT`] each.
    pub async fn flush(&mut self, obs: &Observed) {
        if let Some(task) = self.task.take() {
            let result = task.await;
            self.collect(result);
        }
        let report = self.build(obs);
        if self.key.is_some() && self.due(&report, Instant::now()) {
            self.spawn(report);
            if let Some(task) = self.task.take() {
                let result = task.await;
                self.collect(result);
            }
        }
    }
}

/// Keeps the predecessor's `healthSince` when its report says the same digest and
/// health, is signed with this cluster's own `key`, and the time is not in the future.
async fn adopt_since(repo: &Repo, report: &mut Report, key: &PrivateKey) {
    match report::store::read(repo, &report.tag()).await {
        Ok(Some(prev)) => {
            let ours = matches!(&prev.signer, report::store::Signer::Key(k) if k.fingerprint() == key.public_key().fingerprint());
            let prev = prev.report;
            if !ours {
                tracing::info!("the report under {} is not signed with this cluster's key: its healthSince is not kept", report.tag());
                return;
            }
            if prev.applied_digest != report.applied_digest || prev.health != report.health {
                return;
            }
            let secs = |s: &Option<String>| s.as_deref().and_then(|s| drover_proto::time::parse_rfc3339(s).ok());
            let now = drover_proto::time::now_unix();
            let older = matches!((secs(&prev.health_since), secs(&report.health_since)), (Some(p), Some(c)) if p < c && p <= now);
            if older {
                report.health_since = prev.health_since;
            }
        }
        Ok(None) => {}
        Err(e) => tracing::debug!("previous report unreadable, healthSince starts now: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_pushes_back_off_up_to_the_heartbeat() {
        let five = Duration::from_secs(300);
        let delays: Vec<u64> = (1..=7).map(|n| retry_delay(n, five).as_secs()).collect();
        assert_eq!(delays, [30, 60, 120, 240, 300, 300, 300]);
        assert_eq!(retry_delay(u32::MAX, five), five, "no overflow");
        assert_eq!(retry_delay(1, Duration::from_secs(10)).as_secs(), 10, "never longer than the heartbeat");
    }

    #[test]
    fn a_failed_push_waits_and_a_written_one_clears_the_wait() {
        let client = RegistryClient::new(RegistryOptions::default()).unwrap();
        let to = Reference::parse("127.0.0.1:9/fleet/drover-reports").unwrap();
        let settings = ReportSettings {
            cluster_name: "c1".into(),
            cluster_type: "edge".into(),
            environment: "prod".into(),
            channel: "prod".into(),
            to: to.clone(),
            interval: Duration::from_secs(300),
            docker_config: None,
        };
        let mut r = Reporter::new(Repo::open(&to, &client, true).unwrap().0, settings);
        let t0 = Instant::now();
        assert!(!r.backing_off(t0));
        assert_eq!(r.failed_at(t0), Duration::from_secs(30));
        assert!(r.backing_off(t0 + Duration::from_secs(29)));
        assert!(!r.backing_off(t0 + Duration::from_secs(30)));
        assert_eq!(r.failed_at(t0 + Duration::from_secs(30)), Duration::from_secs(60));
        assert!(r.backing_off(t0 + Duration::from_secs(89)));
        let report = r.build(&Observed::default());
        r.collect(Ok(Ok(report)));
        assert!(!r.backing_off(Instant::now()), "a written report ends the backoff");
    }
}
