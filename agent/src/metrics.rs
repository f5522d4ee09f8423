//! Prometheus metrics (`prometheus-client`, `drover_` prefix) served at `/metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn l(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Every metric the agent exports.
pub struct Metrics {
    registry: Registry,
    polls: Family<Labels, Counter>,
    applies: Family<Labels, Counter>,
    last_success: Gauge,
    bundle_info: Family<Labels, Gauge>,
    objects: Family<Labels, Counter>,
    prunes: Counter,
    prunes_refused: Counter,
    drift: Counter,
    verification_failures: Family<Labels, Counter>,
    health: Family<Labels, Gauge>,
    api_writes: Family<Labels, Counter>,
    leader: Gauge,
    held: Gauge,
    drifted: Gauge,
    state_unwritable: Gauge,
    rollbacks: Counter,
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
            last_success: Gauge::default(),
            bundle_info: Family::default(),
            objects: Family::default(),
            prunes: Counter::default(),
            prunes_refused: Counter::default(),
            drift: Counter::default(),
            verification_failures: Family::default(),
            health: Family::default(),
            api_writes: Family::default(),
            leader: Gauge::default(),
            held: Gauge::default(),
            drifted: Gauge::default(),
            state_unwritable: Gauge::default(),
            rollbacks: Counter::default(),
            rolled_back: Family::default(),
            registry: Registry::default(),
        };
        registry.register("polls", "Polls of the source by result (Applied, Unchanged, Rejected, Failed)", m.polls.clone());
        registry.register("applies", "Apply attempts by result (Applied, Failed)", m.applies.clone());
        registry.register(
            "last_successful_apply_timestamp_seconds",
            "Unix time of the last successful apply",
            m.last_success.clone(),
        );
        registry.register("bundle_info", "The applied bundle (value 1; digest and sequence labels)", m.bundle_info.clone());
        registry.register("objects", "Objects handled by outcome (created, configured, unchanged, failed, deleted, ...)", m.objects.clone());
        registry.register("prunes", "Objects deleted by prune", m.prunes.clone());
        registry.register("prunes_refused", "Prunes refused by the safety valve", m.prunes_refused.clone());
        registry.register("drift_corrections", "Objects changed back by a resync of an unchanged bundle", m.drift.clone());
        registry.register("verification_failures", "Bundles refused, by reason", m.verification_failures.clone());
        registry.register("api_writes", "Writes sent to the target's API server, by verb (POST create, PUT update, PATCH, DELETE); an unchanged resync sends none", m.api_writes.clone());
        for verb in ["create", "update", "patch", "delete"] {
            let _ = m.api_writes.get_or_create(&l(&[("verb", verb)]));
        }
        registry.register("health", "Health of the applied state after the last apply (1 for the current state: Healthy, Progressing, Degraded)", m.health.clone());
        registry.register("leader", "1 when this agent leads its cluster or runs without leader election, 0 on standby", m.leader.clone());
        registry.register(
            "held",
            "1 while the agent holds back new bundles: drover-agent hold or the drover.dev/hold annotation (it applies nothing), or outside its apply windows",
            m.held.clone(),
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
        let m = Metrics { registry, ..m };
        m.start_at_zero();
        m
    }

    /// Creates every labelled series with a known label value at 0: a family with no
    /// series is not exported at all, and `increase(...) > 0` never sees its step from
    /// nothing to 1 (the first failure would go unnoticed).
    fn start_at_zero(&self) {
        for r in crate::record::AttemptResult::ALL {
            let _ = self.polls.get_or_create(&l(&[("result", &r.to_string())]));
        }
        for r in ["Applied", "Failed"] {
            let _ = self.applies.get_or_create(&l(&[("result", r)]));
        }
        for a in crate::targets::Action::ALL {
            let _ = self.objects.get_or_create(&l(&[("outcome", &a.to_string())]));
        }
        for reason in crate::stage::REJECT_REASONS {
            let _ = self.verification_failures.get_or_create(&l(&[("reason", reason)]));
        }
        self.health("");
    }

    /// Counts a poll.
    pub fn poll(&self, result: &str) {
        self.polls.get_or_create(&l(&[("result", result)])).inc();
    }

    /// Counts an apply (`Applied` or `Failed`).
    pub fn apply(&self, result: &str) {
        self.applies.get_or_create(&l(&[("result", result)])).inc();
    }

    /// Marks a successful apply of `digest`/`sequence` from `source`.
    pub fn applied(&self, source: &str, digest: &str, sequence: u64) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        self.last_success.set(now as i64);
        self.bundle_info.clear();
        self.bundle_info.get_or_create(&l(&[("source", source), ("digest", digest), ("sequence", &sequence.to_string())])).set(1);
    }

    /// Sets the health of the applied state (`Healthy`, `Progressing` or `Degraded`; all
    /// three 0 for anything else: nothing applied yet).
    pub fn health(&self, state: &str) {
        for s in ["Healthy", "Progressing", "Degraded"] {
            self.health.get_or_create(&l(&[("state", s)])).set(i64::from(s == state));
        }
    }

    /// Sets the role: `single` or `leader` → 1, `standby` → 0.
    pub fn role(&self, role: &str) {
        self.leader.set(i64::from(role != "standby"));
    }

    /// Sets `drover_held` (1 while held).
    pub fn held(&self, held: bool) {
        self.held.set(i64::from(held));
    }

    /// Sets `drover_drifted_objects`.
    pub fn drifted(&self, n: usize) {
        self.drifted.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Sets `drover_state_unwritable` (1 while the state database cannot be written).
    pub fn state_unwritable(&self, failing: bool) {
        self.state_unwritable.set(i64::from(failing));
    }

    /// A rollback recorded (`Some`: counted, and its refusal shown) or no refusal in force
    /// (`None`).
    pub fn rolled_back(&self, rb: Option<&crate::rollback::RolledBack>) {
        self.rolled_back.clear();
        if let Some(rb) = rb {
            self.rollbacks.inc();
            self.show_rolled_back(rb);
        }
    }

    /// Shows a refusal in force (at start, from the state) without counting a rollback.
    pub fn show_rolled_back(&self, rb: &crate::rollback::RolledBack) {
        self.rolled_back.clear();
        let labels = l(&[("digest", &rb.from.digest), ("sequence", &rb.from.sequence.to_string()), ("to_digest", &rb.to.digest)]);
        self.rolled_back.get_or_create(&labels).set(1);
    }

    /// Counts object outcomes.
    pub fn object(&self, action: &str, n: u64) {
        if n > 0 {
            let _ = self.objects.get_or_create(&l(&[("outcome", action)])).inc_by(n);
        }
    }

    /// Counts pruned objects.
    pub fn pruned(&self, n: u64) {
        self.prunes.inc_by(n);
    }

    /// Counts a refused prune.
    pub fn prune_refused(&self) {
        self.prunes_refused.inc();
    }

    /// Counts drift corrections.
    pub fn drift(&self, n: u64) {
        self.drift.inc_by(n);
    }

    /// Counts the writes an attempt sent.
    pub fn api_writes(&self, w: &crate::targets::Writes) {
        for (verb, n) in [("create", w.create), ("update", w.update), ("patch", w.patch), ("delete", w.delete)] {
            self.api_writes.get_or_create(&l(&[("verb", verb)])).inc_by(n);
        }
    }

    /// Counts a refused bundle.
    pub fn verification_failure(&self, reason: &str) {
        self.verification_failures.get_or_create(&l(&[("reason", reason)])).inc();
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = encode(&mut s, &self.registry);
        s
    }
}
