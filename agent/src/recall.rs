//! The agent's two records of what is applied: its own ([`SourceState`] in the state
//! directory) and the copy the target keeps ([`TargetRecord`], the kube target's state
//! ConfigMap), which outlives the state directory. Before every apply decision the agent
//! reads the target's copy and keeps the higher floor (the channel module's
//! [`higher_floor`]); the inventory goes with the winning floor (on equal floors both
//! inventories are kept). After every recorded apply it writes its record back.
//!
//! The target's copy can only raise the floor: it never lets a bundle skip signature
//! verification (only bundles in the local cache, which this agent verified itself, do).

use std::collections::BTreeSet;

use drover_proto::channel::admits::higher_floor;
use drover_proto::channel::Position;

use crate::record::SourceState;
use crate::targets::{Target, TargetRecord};

/// The floor of a local record.
pub fn floor(state: &SourceState) -> Option<Position> {
    match (&state.applied_digest, state.applied_sequence) {
        (Some(digest), Some(sequence)) => Some(Position { digest: digest.clone(), sequence }),
        _ => None,
    }
}

/// The record to keep on the target for `state`.
pub fn record_of(state: &SourceState) -> TargetRecord {
    TargetRecord {
        source: state.source.clone(),
        floor: floor(state),
        policy_fingerprint: state.policy_fingerprint.clone().unwrap_or_default(),
        applied_at: state.applied_at.clone().unwrap_or_default(),
        inventory: state.inventory.clone(),
        rolled_back: state.rolled_back.as_ref().filter(|r| !r.released).map(|r| r.from.clone()),
    }
}

/// `local` raised by `kept`: the higher floor wins and brings its inventory; on equal
/// floors the inventories are merged. Returns the state and whether `kept` raised it.
pub fn merge(mut local: SourceState, kept: TargetRecord) -> (SourceState, bool) {
    // Floors raised by a rollback in force (the refused bundle's sequence) on either side.
    let mine = local.floor();
    let theirs = higher_floor(kept.floor.clone(), kept.rolled_back.clone());
    if mine == theirs {
        let known: BTreeSet<_> = local.inventory.iter().map(|o| o.key()).collect();
        let more: Vec<_> = kept.inventory.into_iter().filter(|o| !known.contains(&o.key())).collect();
        local.inventory.extend(more);
        return (local, false);
    }
    if higher_floor(mine.clone(), theirs) == mine {
        return (local, false);
    }
    // A refusal is only ever recorded with the bundle put back (the applied one).
    let Some(applied) = kept.floor else { return (local, false) };
    local.rolled_back = kept.rolled_back.map(|from| crate::rollback::RolledBack {
        from,
        to: applied.clone(),
        at: kept.applied_at.clone(),
        reason: "recorded in the target's record by the agent that rolled back".into(),
        released: false,
    });
    local.last_healthy = None;
    local.applied_digest = Some(applied.digest);
    local.applied_sequence = Some(applied.sequence);
    local.applied_at = (!kept.applied_at.is_empty()).then_some(kept.applied_at);
    local.health = None;
    // The target's record never vouches for a signature check: the digest it names is
    // verified again under the current policy before it counts as applied-and-verified.
    local.policy_fingerprint = None;
    local.inventory = kept.inventory;
    (local, true)
}

/// Reads the target's record of `state.source` and merges it in. A record that cannot
/// be read leaves `state` as it is; the message says so (for the attempt's reason).
pub async fn recall(target: &dyn Target, state: SourceState) -> (SourceState, Option<String>) {
    match target.read_record(&state.source).await {
        Ok(None) => (state, None),
        Ok(Some(kept)) => {
            let (state, raised) = merge(state, kept);
            if raised {
                tracing::info!(
                    digest = state.applied_digest.as_deref().unwrap_or(""),
                    sequence = state.applied_sequence.unwrap_or(0),
                    objects = state.inventory.len(),
                    "took the floor and inventory from the target's record (higher than the local one)"
                );
            }
            (state, None)
        }
        Err(e) => {
            tracing::warn!("{e}; going on with the local state");
            (state, Some(format!("in-cluster state not read ({e}); the local state was used")))
        }
    }
}

/// Writes `state` to the target's record; the message when that failed (the local state
/// is kept either way).
pub async fn keep(target: &dyn Target, state: &SourceState) -> Option<String> {
    match target.write_record(&record_of(state)).await {
        Ok(()) => None,
        Err(e) => {
            tracing::warn!("in-cluster state not saved: {e}");
            Some(format!("in-cluster state not saved ({e}); the local state is kept"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::object::ObjectRef;

    fn cm(name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("n".into()), name: name.into() }
    }

    fn local(seq: Option<u64>, inv: &[&str]) -> SourceState {
        SourceState {
            source: "s".into(),
            applied_digest: seq.map(|s| format!("sha256:{s}")),
            applied_sequence: seq,
            inventory: inv.iter().map(|n| cm(n)).collect(),
            ..SourceState::default()
        }
    }

    fn kept(seq: Option<u64>, inv: &[&str]) -> TargetRecord {
        TargetRecord {
            source: "s".into(),
            floor: seq.map(|s| Position { digest: format!("sha256:{s}"), sequence: s }),
            applied_at: "2026-11-23T09:00:00Z".into(),
            inventory: inv.iter().map(|n| cm(n)).collect(),
            ..TargetRecord::default()
        }
    }

    #[test]
    fn higher_floor_wins_with_its_inventory() {
        let (s, raised) = merge(local(None, &[]), kept(Some(2), &["a"]));
        assert!(raised);
        assert_eq!((s.applied_sequence, s.inventory.len()), (Some(2), 1));
        let (s, raised) = merge(local(Some(1), &["a", "b"]), kept(Some(2), &["a"]));
        assert!(raised);
        assert_eq!(s.inventory, vec![cm("a")]);
        assert_eq!(s.applied_digest.as_deref(), Some("sha256:2"));
        let (s, raised) = merge(local(Some(3), &["c"]), kept(Some(2), &["a"]));
        assert!(!raised);
        assert_eq!((s.applied_sequence, s.inventory), (Some(3), vec![cm("c")]));
        let (s, _) = merge(local(Some(2), &["a"]), kept(Some(2), &["a", "b"]));
        assert_eq!(s.inventory, vec![cm("a"), cm("b")], "equal floors: both inventories");
        let (s, raised) = merge(local(None, &["x"]), kept(None, &["y"]));
        assert!(!raised);
        assert_eq!(s.inventory.len(), 2);
    }
}
