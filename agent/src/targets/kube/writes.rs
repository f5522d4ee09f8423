//! The writes the kube target sends, counted where every request passes: a layer on its
//! API clients counts each POST (create), PUT (update), PATCH (apply, merge patch) and
//! DELETE, dry runs, leader-election lease renewals and the agent's own Events excepted
//! (they report on the work; they are not the work). The pipeline records the
//! difference per attempt ([`crate::targets::Writes`]), so `status`, `/status`, history
//! and `drover_api_writes_total` show what a resync sent on any cluster.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::targets::Writes;

/// Counts of the writes sent so far (shared by the target's clients).
#[derive(Clone, Default, Debug)]
pub struct WriteCounter(Arc<[AtomicU64; 4]>);

impl WriteCounter {
    /// Counts `req` if it is a write.
    pub fn observe<B>(&self, req: &http::Request<B>) {
        let query = req.uri().query().unwrap_or_default();
        let path = req.uri().path();
        if query.split('&').any(|p| p.starts_with("dryRun=")) || path.contains("/leases") || path.contains("/events") {
            return;
        }
        let slot = match *req.method() {
            http::Method::POST => 0,
            http::Method::PUT => 1,
            http::Method::PATCH => 2,
            http::Method::DELETE => 3,
            _ => return,
        };
        self.0[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// The writes counted so far.
    pub fn total(&self) -> Writes {
        let get = |i: usize| self.0[i].load(Ordering::Relaxed);
        Writes { create: get(0), update: get(1), patch: get(2), delete: get(3) }
    }
}
