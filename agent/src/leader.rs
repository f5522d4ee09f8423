//! Leader election (`--leader-election`): one agent per cluster polls and applies; the
//! others are `standby` and take over when the holder stops renewing.
//!
//! A `coordination.k8s.io/v1` Lease (`--lease-namespace`/`--lease-name`) names the holder.
//! As client-go's leaderelection: expiry is judged on the local clock from when this agent
//! last saw the lease record change (no cross-host clock comparison), so a new candidate
//! waits one full lease duration before it takes over an un-renewed lease. Writes use
//! optimistic concurrency (create, or replace with the read `resourceVersion`): of two
//! candidates exactly one wins. Timing for a lease of D (default 15 s): the leader renews
//! every D/3 (5 s) and gives up leading when it has not renewed for 2D/3 (10 s), before
//! anyone else may take over; candidates retry every D/7 (~2 s). On SIGTERM the holder
//! releases the lease (empty holder) so a standby takes over at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::watch;

/// Election settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This agent's identity (`POD_NAME` or host name, plus a random suffix).
    pub identity: String,
    /// Lease duration (default 15 s).
    pub duration: Duration,
}

impl LeaseConfig {
    /// Settings with an identity derived from `POD_NAME` / `HOSTNAME`.
    pub fn new(namespace: &str, name: &str, duration: Duration) -> Self {
        let host = crate::config::pod_name();
        let suffix: u32 = rand::random();
        LeaseConfig { namespace: namespace.into(), name: name.into(), identity: format!("{host}_{suffix:08x}"), duration }
    }

    fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    fn retry_every(&self) -> Duration {
        (self.duration / 7).max(Duration::from_millis(200))
    }
}

/// What identifies one state of the lease (a change means the holder is alive).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: Option<String>,
    renew: Option<MicroTime>,
    transitions: Option<i32>,
}

impl Record {
    fn of(l: &Lease) -> Self {
        let s = l.spec.clone().unwrap_or_default();
        Record { holder: s.holder_identity.filter(|h| !h.is_empty()), renew: s.renew_time, transitions: s.lease_transitions }
    }
}

/// One candidate's view of the lease.
pub struct Elector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    observed: Option<(Record, Instant)>,
}

fn api_error(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("HTTP {} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl Elector {
    /// A candidate using `client`.
    pub fn new(client: Client, cfg: LeaseConfig) -> Self {
        Elector { api: Api::namespaced(client, &cfg.namespace), cfg, observed: None }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.cfg.identity
    }

    fn now() -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::now())
    }

    fn secs(&self) -> i32 {
        i32::try_from(self.cfg.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// One round: acquires a free or expired lease, renews our own. `Ok(true)` = we hold it.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, String> {
        let me = self.cfg.identity.clone();
        let Some(current) = self.api.get_opt(&self.cfg.name).await.map_err(api_error)? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.cfg.name.clone()), namespace: Some(self.cfg.namespace.clone()), ..Default::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(self.secs()),
                    acquire_time: Some(Self::now()),
                    renew_time: Some(Self::now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(l) => {
                    self.observed = Some((Record::of(&l), Instant::now()));
                    Ok(true)
                }
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(api_error(e)),
            };
        };
        let record = Record::of(&current);
        match &self.observed {
            Some((r, _)) if *r == record => {}
            _ => self.observed = Some((record.clone(), Instant::now())),
        }
        let seen = self.observed.as_ref().map(|(_, at)| *at).unwrap_or_else(Instant::now);
        let spec = current.spec.clone().unwrap_or_default();
        let duration = Duration::from_secs(spec.lease_duration_seconds.map_or(self.cfg.duration.as_secs(), |s| s.max(1) as u64));
        let ours = record.holder.as_deref() == Some(me.as_str());
        let free = record.holder.is_none() || seen.elapsed() > duration;
        if !ours && !free {
            return Ok(false);
        }
        let mut next = current.clone();
        let s = next.spec.get_or_insert_with(Default::default);
        s.holder_identity = Some(me.clone());
        s.lease_duration_seconds = Some(self.secs());
        s.renew_time = Some(Self::now());
        if !ours {
            s.acquire_time = Some(Self::now());
            s.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + i32::from(record.holder.is_some()));
        }
        match self.api.replace(&self.cfg.name, &PostParams::default(), &next).await {
            Ok(l) => {
                self.observed = Some((Record::of(&l), Instant::now()));
                Ok(true)
            }
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(api_error(e)),
        }
    }

    /// Gives the lease up (empty holder, 1 s duration) if we hold it.
    pub async fn release(&mut self) {
        let Ok(Some(mut current)) = self.api.get_opt(&self.cfg.name).await else { return };
        if Record::of(&current).holder.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        let s = current.spec.get_or_insert_with(Default::default);
        s.holder_identity = None;
        s.lease_duration_seconds = Some(1);
        s.renew_time = Some(Self::now());
        match self.api.replace(&self.cfg.name, &PostParams::default(), &current).await {
            Ok(_) => tracing::info!(lease = %self.cfg.name, "released the leader lease"),
            Err(e) => tracing::warn!(lease = %self.cfg.name, "could not release the leader lease: {}", api_error(e)),
        }
    }
}

/// A running election: ask [`Election::is_leader`], wait with [`Election::wait_leader`],
/// and [`Election::resign`] on shutdown (releases the lease if held).
pub struct Election {
    rx: watch::Receiver<bool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Election {
    /// Starts campaigning in the background.
    pub fn spawn(client: Client, cfg: LeaseConfig) -> Self {
        let (tx, rx) = watch::channel(false);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let elector = Elector::new(client, cfg);
        tracing::info!(identity = %elector.identity(), namespace = %elector.cfg.namespace, lease = %elector.cfg.name, "leader election: campaigning");
        let task = tokio::spawn(run(elector, tx, stopped));
        Election { rx, stop: Some(stop), task }
    }

    /// True while this agent holds the lease.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// A receiver of the leadership (`true` while this agent leads): every source's loop
    /// waits on one.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// Returns once this agent holds the lease.
    pub async fn wait_leader(&mut self) {
        let _ = self.rx.wait_for(|l| *l).await;
    }

    /// Stops campaigning and releases the lease if held.
    pub async fn resign(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
    }
}

/// Runs the election until `stopped`, publishing `true` while this agent leads; then
/// releases the lease.
async fn run(mut elector: Elector, tx: watch::Sender<bool>, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    let mut last_renew: Option<Instant> = None;
    loop {
        let leading = *tx.borrow();
        // A round that gets no answer must not keep a leader leading past its renew
        // deadline: by the time the Lease expires for the others, it has stood down.
        let bound = match (leading, last_renew) {
            (true, Some(t)) => elector.cfg.renew_deadline().saturating_sub(t.elapsed()),
            _ => elector.cfg.renew_deadline(),
        };
        let round = match tokio::time::timeout(bound, elector.try_acquire_or_renew()).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer from the API server within {bound:?}")),
        };
        match round {
            Ok(true) => {
                last_renew = Some(Instant::now());
                if !leading {
                    tracing::info!(identity = %elector.identity(), lease = %elector.cfg.name, "became the leader");
                    let _ = tx.send(true);
                }
            }
            Ok(false) => {
                if leading {
                    tracing::warn!(identity = %elector.identity(), "another agent holds the lease now: standing by");
                    let _ = tx.send(false);
                }
            }
            Err(e) => {
                tracing::warn!(lease = %elector.cfg.name, "leader election: {e}");
                if leading && last_renew.is_none_or(|t| t.elapsed() >= elector.cfg.renew_deadline()) {
                    tracing::warn!("could not renew the lease within {:?}: standing by", elector.cfg.renew_deadline());
                    let _ = tx.send(false);
                }
            }
        }
        let pause = if *tx.borrow() { elector.cfg.renew_every() } else { elector.cfg.retry_every() };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = &mut stopped => {
                let _ = tx.send(false);
                elector.release().await;
                return;
            }
        }
    }
}
