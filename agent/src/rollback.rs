//! Local rollback (`--on-degraded rollback`, docs/agent.md "Rollback"): the rules the
//! pipeline follows when a new bundle is Degraded at the end of its health wait, and the
//! refusal that follows.
//!
//! - The target of a rollback is the last bundle that ended an apply Healthy on this
//!   cluster ([`LastHealthy`], kept in the state and its blobs in the verified cache).
//! - After a rollback the Degraded bundle is refused ([`RolledBack`] in the state and in
//!   the target's record): the channel naming it is not applied again on its own; a newer
//!   digest is applied as usual (and ends the refusal); `drover-agent release --rollback`
//!   lifts it ([`crate::hold::request_rollback_release`], read by the agent on its next
//!   poll, [`release`]).
//! - The anti-rollback floor stays at the refused bundle's sequence ([`floor`]): the agent
//!   went back, the registry did not.
//! - An operator's hold in force when the wait ends keeps the Degraded bundle (nothing is
//!   changed while held); closed apply windows do not stop a rollback, which finishes the
//!   apply the window allowed ([`crate::hold::allows_rollback`]).
//!
//! The types and rules here take plain values: the state ([`crate::record`]) holds them.

use drover_proto::channel::admits::higher_floor;
use drover_proto::channel::Position;
use serde::{Deserialize, Serialize};

/// The last bundle that ended an apply Healthy here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastHealthy {
    /// Its digest and sequence.
    #[serde(flatten)]
    pub position: Position,
    /// The trust policy it was verified under (its signatures are checked again when the
    /// policy changed since).
    pub policy_fingerprint: String,
}

/// A rollback in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    /// The Degraded bundle that was rolled back (refused until released or superseded).
    pub from: Position,
    /// The bundle put back: the last one Healthy here.
    pub to: Position,
    /// When (RFC 3339).
    pub at: String,
    /// Why: the Degraded health of `from`.
    pub reason: String,
    /// An operator released the refusal (`drover-agent release --rollback`): `from` may be
    /// applied again; the floor stays.
    #[serde(default)]
    pub released: bool,
}

impl RolledBack {
    /// The attempt's reason: both digests, why, and what happens next.
    pub fn describe(&self) -> String {
        format!(
            "rolled back from {} (sequence {}) to {} (sequence {}), the last bundle Healthy here: {}; {} is not applied again on its own (a newer bundle is; `drover-agent release --rollback` lifts the refusal)",
            self.from.digest, self.from.sequence, self.to.digest, self.to.sequence, self.reason, self.from.digest
        )
    }
}

/// True when `digest` is the refused bundle of the rollback `rb` (in force).
pub fn refuses(rb: Option<&RolledBack>, digest: &str) -> bool {
    rb.is_some_and(|r| !r.released && r.from.digest == digest)
}

/// The anti-rollback floor: the `applied` bundle, raised to the one rolled back from.
pub fn floor(applied: Option<Position>, rb: Option<&RolledBack>) -> Option<Position> {
    higher_floor(applied, rb.map(|r| r.from.clone()))
}

/// After an apply that was not a rollback, at `applied_sequence`: a rollback ends once a
/// bundle at or above the refused one's sequence is applied.
pub fn superseded(rb: &mut Option<RolledBack>, applied_sequence: Option<u64>) {
    if rb.as_ref().zip(applied_sequence).is_some_and(|(r, seq)| seq >= r.from.sequence) {
        *rb = None;
    }
}

/// Applies a release request made at `asked` (RFC 3339): the refusal of a rollback
/// recorded at or before it is lifted. Returns the rollback released.
pub fn release(rb: &mut Option<RolledBack>, asked: &str) -> Option<RolledBack> {
    let secs = |t: &str| drover_proto::time::parse_rfc3339(t).ok();
    let r = rb.as_mut().filter(|r| !r.released)?;
    if secs(&r.at).zip(secs(asked)).is_some_and(|(rolled, asked)| rolled > asked) {
        return None;
    }
    r.released = true;
    Some(r.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(d: &str, s: u64) -> Position {
        Position { digest: d.into(), sequence: s }
    }

    #[test]
    fn the_floor_stays_at_the_refused_bundle() {
        let good = Some(pos("sha256:good", 10));
        let mut rb = Some(RolledBack { from: pos("sha256:bad", 11), to: pos("sha256:good", 10), at: "2026-01-01T00:00:00Z".into(), reason: "Degraded".into(), released: false });
        assert_eq!(floor(good.clone(), rb.as_ref()), Some(pos("sha256:bad", 11)));
        assert!(refuses(rb.as_ref(), "sha256:bad") && !refuses(rb.as_ref(), "sha256:newer"));
        assert!(release(&mut rb, "2025-12-31T00:00:00Z").is_none(), "a request older than the rollback is stale");
        assert!(release(&mut rb, "2026-01-01T00:00:01Z").is_some());
        assert!(!refuses(rb.as_ref(), "sha256:bad"), "released");
        assert_eq!(floor(good, rb.as_ref()), Some(pos("sha256:bad", 11)), "the floor stays after a release");
        superseded(&mut rb, Some(10));
        assert!(rb.is_some(), "the bundle put back does not end it");
        superseded(&mut rb, Some(12));
        assert!(rb.is_none());
    }
}
