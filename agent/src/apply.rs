//! Stage 6, apply: hands the planned groups to the target; one outcome per object.

use crate::stage::StageError;
use crate::targets::{ApplyReport, ApplyRequest, Target};

/// Applies `req`. A report with failures is still `Ok` (the outcomes are recorded);
/// `Err` means the target could not be used at all.
pub async fn apply(target: &dyn Target, req: &ApplyRequest) -> Result<ApplyReport, StageError> {
    target.apply(req).await.map_err(|e| StageError::Failed(format!("applying {} to {}: {e}", req.digest, target.describe())))
}
