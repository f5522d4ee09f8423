//! Stage 7, wait: a bounded wait for the applied objects to become healthy, by the
//! target's built-in rules or the health rules in CEL that [`rules`] puts together.

use std::sync::Arc;
use std::time::Duration;

use drover_proto::config::BundleConfig;
use drover_proto::health::Rules;

use crate::stage::StageError;
use crate::targets::{ApplyRequest, HealthReport, Target};

/// The health rules for a bundle's objects: its own (signed, in its config) over the
/// agent's `healthChecks` (`local`, compiled at start). A bundle rule that does not
/// compile refuses the bundle (reason `health-rule`) before anything is applied.
pub fn rules(digest: &str, config: &BundleConfig, local: &Arc<Rules>) -> Result<Arc<Rules>, StageError> {
    if config.health_checks.is_empty() {
        return Ok(local.clone());
    }
    let own = Rules::compile(&config.health_checks).map_err(|e| StageError::Rejected {
        reason: "health-rule",
        message: format!("{digest}: the bundle's {e}; nothing was applied"),
    })?;
    Ok(Arc::new(own.over(local)))
}

/// Waits at most `timeout`; never fails. A target whose own wait overruns the bound by
/// more than 5 s is reported `Degraded`, as a health timeout is (docs/kubernetes.md).
pub async fn wait(target: &dyn Target, req: &ApplyRequest, timeout: Duration) -> HealthReport {
    match tokio::time::timeout(timeout + Duration::from_secs(5), target.wait(req, timeout)).await {
        Ok(r) => r,
        Err(_) => HealthReport { health: crate::targets::Health::Degraded, objects: Vec::new() },
    }
}
