//! State the pipelines write and the HTTP server reads: the agent's ([`Shared`]) and
//! each source's ([`SourceShared`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::metrics::{Metrics, SourceMetrics};
use crate::record::Store;
use crate::report::Observed;
use crate::status::{SourceStatus, Status};

/// What one source's pipeline shares with the server and the run loop.
pub struct SourceShared {
    /// The source's name.
    pub name: String,
    /// Its reference (the state key).
    pub source: String,
    /// Its current status.
    pub status: Mutex<SourceStatus>,
    /// True once its applied state is in place in this run.
    pub ready: AtomicBool,
    /// Its metrics.
    pub metrics: SourceMetrics,
    /// The database (one for the agent).
    pub store: Arc<Store>,
    /// What its next fleet report says (written where attempts are recorded).
    pub observed: Mutex<Observed>,
    /// "Poll now" requests (`drover-agent reconcile`) and the attempts that answer them.
    pub reconcile: crate::reconcile::Reconcile,
    /// The fleet report's state, when reporting is on (the reporter writes it).
    pub report: std::sync::OnceLock<Arc<Mutex<crate::status::ReportState>>>,
}

impl SourceShared {
    /// The source's status as `/status` shows it.
    pub fn status(&self) -> SourceStatus {
        let mut st = self.status.lock().expect("status lock").clone();
        st.ready = self.ready.load(Ordering::Relaxed);
        st.report = self.report.get().map(|r| r.lock().expect("report state lock").clone());
        st
    }
}

/// State shared between the sources' pipelines and the HTTP server.
pub struct Shared {
    /// The state directory (absolute).
    pub state_dir: String,
    /// The target, as `/status` names it.
    pub target: String,
    /// `single`, `leader` or `standby`.
    pub role: Mutex<String>,
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// The database.
    pub store: Arc<Store>,
    /// Every source, in the order configured.
    pub sources: Vec<Arc<SourceShared>>,
}

impl Shared {
    /// True when every source's applied state is in place.
    pub fn ready(&self) -> bool {
        self.sources.iter().all(|s| s.ready.load(Ordering::Relaxed))
    }

    /// The status document of the running agent.
    pub fn status(&self) -> Status {
        Status {
            state_dir: self.state_dir.clone(),
            target: self.target.clone(),
            role: self.role.lock().expect("role lock").clone(),
            agent_running: true,
            ready: self.ready(),
            sources: self.sources.iter().map(|s| s.status()).collect(),
            ..Default::default()
        }
    }

    /// Sets the agent's role (`single`, `leader`, `standby`) in `/status` and `/metrics`.
    pub fn set_role(&self, role: &str) {
        *self.role.lock().expect("role lock") = role.into();
        self.metrics.role(role);
    }

    /// The source named `name`.
    pub fn source(&self, name: &str) -> Option<&Arc<SourceShared>> {
        self.sources.iter().find(|s| s.name == name)
    }
}
