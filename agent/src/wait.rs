//! Stage 7, wait: a bounded wait for the applied objects to become healthy.

use std::time::Duration;

use crate::targets::{ApplyRequest, HealthReport, Target};

/// Waits at most `timeout`; never fails. A target whose own wait overruns the bound by
/// more than 5 s is reported `Degraded`, as a health timeout is (docs/kubernetes.md).
pub async fn wait(target: &dyn Target, req: &ApplyRequest, timeout: Duration) -> HealthReport {
    match tokio::time::timeout(timeout + Duration::from_secs(5), target.wait(req, timeout)).await {
        Ok(r) => r,
        Err(_) => HealthReport { health: crate::targets::Health::Degraded, objects: Vec::new() },
    }
}
