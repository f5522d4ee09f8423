//! Prometheus metrics (`prometheus-client`, `drover_` prefix) served at `/metrics`, each
//! per-source series labelled with the source's name.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use std::sync::{Arc, Mutex};

type Labels = Vec<(String, String)>;

/// Every metric the agent exports: one registry, every per-source series labelled
/// `source="<name>"` ([`SourceMetrics`]); `drover_leader` is the agent's own (no label).
pub struct Metrics {
    registry: Registry,
    polls: Family<Labels, Counter>,
    applies: Family<Labels, Counter>,
    last_success: Family<Labels, Gauge>,
    bundle_info: Family<Labels, Gauge>,
    objects: Family<Labels, Counter>,
    prunes: Family<Labels, Counter>,
    prunes_refused: Family<Labels, Counter>,
    drift: Family<Labels, Counter>,
    verification_failures: Family<Labels, Counter>,
    health: Family<Labels, Gauge>,
    api_writes: Family<Labels, Counter>,
    leader: Gauge,
    held: Family<Labels, Gauge>,
    waiting: Family<Labels, Gauge>,
    drifted: Family<Labels, Gauge>,
    state_unwritable: Family<Labels, Gauge>,
    rollbacks: Family<Labels, Counter>,
    rolled_back: Family<Labels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers the metrics.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("drover");
        let m = Metrics {
            polls: Family::default(),
            applies: Family::default(),
            last_success: Family::default(),
            bundle_info: Family::default(),
            objects: Family::default(),
            prunes: Family::default(),
            prunes_refused: Family::default(),
            drift: Family::default(),
            verification_failures: Family::default(),
            health: Family::default(),
            api_writes: Family::default(),
            leader: Gauge::default(),
            held: Family::default(),
            waiting: Family::default(),
            drifted: Family::default(),
            state_unwritable: Family::default(),
            rollbacks: Family::default(),
            rolled_back: Family::default(),
            registry: Registry::default(),
        };
        registry.register("polls", "Polls of the source by result (Applied, Unchanged, Rejected, Failed, Held, Waiting)", m.polls.clone());
        registry.register("applies", "Apply attempts by result (Applied, Failed)", m.applies.clone());
        registry.register(
            "last_successful_apply_timestamp_seconds",
            "Unix time of the last successful apply",
            m.last_success.clone(),
        );
        registry.register("bundle_info", "The applied bundle (value 1; reference, digest and sequence labels)", m.bundle_info.clone());
        registry.register("objects", "Objects handled by outcome (created, configured, unchanged, failed, deleted, refused, ...)", m.objects.clone());
        registry.register("prunes", "Objects deleted by prune", m.prunes.clone());
        registry.register("prunes_refused", "Prunes refused by the safety valve", m.prunes_refused.clone());
        registry.register("drift_corrections", "Objects changed back by a resync of an unchanged bundle", m.drift.clone());
        registry.register("verification_failures", "Bundles (or objects, reason policy) refused, by reason", m.verification_failures.clone());
        registry.register("api_writes", "Writes sent to the target's API server, by verb (POST create, PUT update, PATCH, DELETE); an unchanged resync sends none", m.api_writes.clone());
        registry.register("health", "Health of the applied state after the last apply (1 for the current state: Healthy, Progressing, Degraded)", m.health.clone());
        registry.register("leader", "1 when this agent leads its cluster or runs without leader election, 0 on standby", m.leader.clone());
        registry.register(
            "held",
            "1 while the source holds back new bundles: drover-agent hold or the drover.dev/hold annotation (it applies nothing), or outside its apply windows",
            m.held.clone(),
        );
        registry.register(
            "waiting",
            "1 while a verified new bundle of the source waits for the sources it depends on (dependsOn) to be applied and Healthy",
            m.waiting.clone(),
        );
        registry.register(
            "drifted_objects",
            "Objects that differ from the applied bundle, found by the last resync with --drift report and left as they are",
            m.drifted.clone(),
        );
        registry.register(
            "state_unwritable",
            "1 while the state database cannot be written (a full disk, a read-only volume): the agent runs on from memory and writes it once it can",
            m.state_unwritable.clone(),
        );
        registry.register(
            "rollbacks",
            "Degraded new bundles replaced by the last bundle Healthy here (--on-degraded rollback)",
            m.rollbacks.clone(),
        );
        registry.register(
            "rolled_back",
            "1 while a rollback's refusal stands: the Degraded bundle (digest, sequence) is not applied again on its own; to_digest is the bundle put back",
            m.rolled_back.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The series of source `name`, created at 0 ([`SourceMetrics::start_at_zero`]).
    pub fn source(self: &Arc<Self>, name: &str) -> SourceMetrics {
        let s = SourceMetrics { m: self.clone(), name: name.to_string(), bundle: Arc::default(), rolled: Arc::default() };
        s.start_at_zero();
        s
    }

    /// Sets the role: `single` or `leader` → 1, `standby` → 0.
    pub fn role(&self, role: &str) {
        self.leader.set(i64::from(role != "standby"));
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = encode(&mut s, &self.registry);
        s
    }
}

/// The series of one source: every method of the pipeline's metrics, labelled
/// `source="<name>"` first.
#[derive(Clone)]
pub struct SourceMetrics {
    m: Arc<Metrics>,
    name: String,
    /// The labels of this source's `drover_bundle_info` series (replaced on each apply).
    bundle: Arc<Mutex<Option<Labels>>>,
    /// The labels of this source's `drover_rolled_back` series, while a refusal stands.
    rolled: Arc<Mutex<Option<Labels>>>,
}

impl SourceMetrics {
    fn l(&self, pairs: &[(&str, &str)]) -> Labels {
        let mut v = Vec::with_capacity(pairs.len() + 1);
        v.push(("source".to_string(), self.name.clone()));
        v.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        v
    }

    /// Creates every labelled series with a known label value at 0: a family with no
    /// series is not exported at all, and `increase(...) > 0` never sees its step from
    /// nothing to 1 (the first failure would go unnoticed).
    fn start_at_zero(&self) {
        let m = &self.m;
        for r in crate::record::AttemptResult::ALL {
            let _ = m.polls.get_or_create(&self.l(&[("result", &r.to_string())]));
        }
        for r in ["Applied", "Failed"] {
            let _ = m.applies.get_or_create(&self.l(&[("result", r)]));
        }
        for a in crate::targets::Action::ALL {
            let _ = m.objects.get_or_create(&self.l(&[("outcome", &a.to_string())]));
        }
        for reason in crate::stage::REJECT_REASONS {
            let _ = m.verification_failures.get_or_create(&self.l(&[("reason", reason)]));
        }
        for verb in ["create", "update", "patch", "delete"] {
            let _ = m.api_writes.get_or_create(&self.l(&[("verb", verb)]));
        }
        let none = self.l(&[]);
        for f in [&m.prunes, &m.prunes_refused, &m.drift, &m.rollbacks] {
            let _ = f.get_or_create(&none);
        }
        for f in [&m.last_success, &m.held, &m.waiting, &m.drifted, &m.state_unwritable] {
            let _ = f.get_or_create(&none);
        }
        self.health("");
    }

    /// Counts a poll.
    pub fn poll(&self, result: &str) {
        self.m.polls.get_or_create(&self.l(&[("result", result)])).inc();
    }

    /// Counts an apply (`Applied` or `Failed`).
    pub fn apply(&self, result: &str) {
        self.m.applies.get_or_create(&self.l(&[("result", result)])).inc();
    }

    /// Marks a successful apply of `digest`/`sequence` from `reference`.
    pub fn applied(&self, reference: &str, digest: &str, sequence: u64) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        self.m.last_success.get_or_create(&self.l(&[])).set(now as i64);
        let labels = self.l(&[("reference", reference), ("digest", digest), ("sequence", &sequence.to_string())]);
        let mut last = self.bundle.lock().expect("bundle labels lock");
        if let Some(old) = last.take() {
            self.m.bundle_info.remove(&old);
        }
        self.m.bundle_info.get_or_create(&labels).set(1);
        *last = Some(labels);
    }

    /// Sets the health of the applied state (`Healthy`, `Progressing` or `Degraded`; all
    /// three 0 for anything else: nothing applied yet).
    pub fn health(&self, state: &str) {
        for s in ["Healthy", "Progressing", "Degraded"] {
            self.m.health.get_or_create(&self.l(&[("state", s)])).set(i64::from(s == state));
        }
    }

    /// Sets `drover_held` (1 while held).
    pub fn held(&self, held: bool) {
        self.m.held.get_or_create(&self.l(&[])).set(i64::from(held));
    }

    /// Sets `drover_waiting` (1 while a new bundle waits for its dependencies).
    pub fn waiting(&self, waiting: bool) {
        self.m.waiting.get_or_create(&self.l(&[])).set(i64::from(waiting));
    }

    /// Sets `drover_drifted_objects`.
    pub fn drifted(&self, n: usize) {
        self.m.drifted.get_or_create(&self.l(&[])).set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Sets `drover_state_unwritable` (1 while the state database cannot be written).
    pub fn state_unwritable(&self, failing: bool) {
        self.m.state_unwritable.get_or_create(&self.l(&[])).set(i64::from(failing));
    }

    /// A rollback recorded (`Some`: counted, and its refusal shown) or no refusal in force
    /// (`None`).
    pub fn rolled_back(&self, rb: Option<&crate::rollback::RolledBack>) {
        match rb {
            Some(rb) => {
                self.m.rollbacks.get_or_create(&self.l(&[])).inc();
                self.show_rolled_back(rb);
            }
            None => {
                if let Some(old) = self.rolled.lock().expect("rolled-back labels lock").take() {
                    self.m.rolled_back.remove(&old);
                }
            }
        }
    }

    /// Shows a refusal in force (at start, from the state) without counting a rollback.
    pub fn show_rolled_back(&self, rb: &crate::rollback::RolledBack) {
        let labels = self.l(&[("digest", &rb.from.digest), ("sequence", &rb.from.sequence.to_string()), ("to_digest", &rb.to.digest)]);
        let mut last = self.rolled.lock().expect("rolled-back labels lock");
        if let Some(old) = last.take() {
            self.m.rolled_back.remove(&old);
        }
        self.m.rolled_back.get_or_create(&labels).set(1);
        *last = Some(labels);
    }

    /// Counts object outcomes.
    pub fn object(&self, action: &str, n: u64) {
        if n > 0 {
            let _ = self.m.objects.get_or_create(&self.l(&[("outcome", action)])).inc_by(n);
        }
    }

    /// Counts pruned objects.
    pub fn pruned(&self, n: u64) {
        self.m.prunes.get_or_create(&self.l(&[])).inc_by(n);
    }

    /// Counts a refused prune.
    pub fn prune_refused(&self) {
        self.m.prunes_refused.get_or_create(&self.l(&[])).inc();
    }

    /// Counts drift corrections.
    pub fn drift(&self, n: u64) {
        self.m.drift.get_or_create(&self.l(&[])).inc_by(n);
    }

    /// Counts the writes an attempt sent.
    pub fn api_writes(&self, w: &crate::targets::Writes) {
        for (verb, n) in [("create", w.create), ("update", w.update), ("patch", w.patch), ("delete", w.delete)] {
            self.m.api_writes.get_or_create(&self.l(&[("verb", verb)])).inc_by(n);
        }
    }

    /// Counts a refused bundle (or object, reason `policy`).
    pub fn verification_failure(&self, reason: &str) {
        self.m.verification_failures.get_or_create(&self.l(&[("reason", reason)])).inc();
    }
}
