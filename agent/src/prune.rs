//! Stage 8, prune: which objects of the previous inventory the new bundle lacks, the
//! safety valve (never more than `--max-prune-ratio` of the inventory unless the bundle
//! opts in with `allowMassPrune`), then the target's delete. The pipeline never calls
//! this after a failed apply.

use std::collections::BTreeSet;

use drover_proto::object::ObjectRef;

use crate::stage::StageError;
use crate::targets::{ApplyRequest, PruneReport, PruneRequest, Target};

/// What the prune stage will do.
#[derive(Debug)]
pub enum Decision {
    /// Nothing to delete.
    Nothing,
    /// Over the ratio: nothing is deleted, the objects stay in the inventory.
    Refused {
        /// The objects that would have been deleted.
        candidates: Vec<ObjectRef>,
        /// Why, for the attempt's reason.
        message: String,
    },
    /// Delete these.
    Prune(PruneRequest),
}

/// Decides from the previous inventory and the applied request.
pub fn decide(previous: &[ObjectRef], req: &ApplyRequest, max_ratio: f64, allow_mass_prune: bool) -> Decision {
    let wanted: BTreeSet<_> = req.objects().map(|o| o.id.key()).collect();
    let candidates: Vec<ObjectRef> = previous.iter().filter(|o| !wanted.contains(&o.key())).cloned().collect();
    if candidates.is_empty() {
        return Decision::Nothing;
    }
    let ratio = candidates.len() as f64 / previous.len() as f64;
    if ratio > max_ratio && !allow_mass_prune {
        let message = format!(
            "prune refused: it would delete {} of {} inventory objects ({:.0}%), over --max-prune-ratio {:.0}%; publish with allowMassPrune to opt in, or raise the ratio",
            candidates.len(),
            previous.len(),
            ratio * 100.0,
            max_ratio * 100.0
        );
        return Decision::Refused { candidates, message };
    }
    Decision::Prune(PruneRequest { source: req.source.clone(), digest: req.digest.clone(), delete: candidates, previous: previous.to_vec() })
}

/// Runs the target's prune.
pub async fn prune(target: &dyn Target, req: &PruneRequest) -> Result<PruneReport, StageError> {
    target.prune(req).await.map_err(|e| StageError::Failed(format!("pruning on {}: {e}", target.describe())))
}
