//! State the pipeline writes and the HTTP server reads.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use crate::metrics::Metrics;
use crate::record::Store;
use crate::report::Observed;
use crate::status::Status;

/// State shared between the pipeline and the HTTP server.
pub struct Shared {
    /// Current status.
    pub status: Mutex<Status>,
    /// Readiness.
    pub ready: AtomicBool,
    /// Metrics.
    pub metrics: Metrics,
    /// The database.
    pub store: Arc<Store>,
    /// What the next fleet report says (written where attempts are recorded).
    pub observed: Mutex<Observed>,
    /// "Poll now" requests (`drover-agent reconcile`) and the attempts that answer them.
    pub reconcile: crate::reconcile::Reconcile,
    /// The fleet report's state, when reporting is on (the reporter writes it).
    pub report: std::sync::OnceLock<Arc<Mutex<crate::status::ReportState>>>,
}
