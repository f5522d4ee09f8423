//! Local rollback (`--on-degraded rollback`, docs/agent.md "Rollback"): the rules the
//! pipeline follows when a new bundle is Degraded at the end of its health wait, and the
//! refusal that follows.
//!
//! - The target of a rollback is the last bundle that ended an apply Healthy on this
//!   cluster ([`LastHealthy`], kept in the state and its blobs in the verified cache).
//! - After a rollback the Degraded bundle is refused ([`RolledBack`] in the state and in
//!   the target's record): the channel naming it is not applied again on its own; a newer
//!   digest is applied as usual (and ends the refusal); `drover-agent release --rollback`
//!   lifts it ([`request_release`], read by the agent on its next poll, [`take_release`]).
//! - The anti-rollback floor stays at the refused bundle's sequence ([`floor`]): the agent
//!   went back, the registry did not.
//! - An operator's hold in force when the wait ends keeps the Degraded bundle (nothing is
//!   changed while held); closed apply windows do not stop a rollback, which finishes the
//!   apply the window allowed ([`allowed_by`]).

use std::path::{Path, PathBuf};

use drover_proto::channel::admits::higher_floor;
use drover_proto::channel::Position;
use serde::{Deserialize, Serialize};

use crate::hold::{Hold, HoldOrigin};
use crate::record::SourceState;

/// The file `drover-agent release --rollback` writes into the state directory.
pub const RELEASE_FILE: &str = "release-rollback.json";

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

/// True when `digest` is the refused bundle of a rollback in force.
pub fn refuses(state: &SourceState, digest: &str) -> bool {
    state.rolled_back.as_ref().is_some_and(|r| !r.released && r.from.digest == digest)
}

/// The anti-rollback floor of `state`: the applied bundle, raised to the rolled-back one.
pub fn floor(state: &SourceState) -> Option<Position> {
    let applied = match (&state.applied_digest, state.applied_sequence) {
        (Some(digest), Some(sequence)) => Some(Position { digest: digest.clone(), sequence }),
        _ => None,
    };
    higher_floor(applied, state.rolled_back.as_ref().map(|r| r.from.clone()))
}

/// True when a rollback may run under `hold`: no hold, or only closed apply windows.
pub fn allowed_by(hold: Option<&Hold>) -> bool {
    hold.is_none_or(|h| h.by == HoldOrigin::Window)
}

/// After an apply of `applied` (digest, sequence) that was not a rollback: a rollback in
/// force ends once a bundle at or above the refused one's sequence is applied.
pub fn superseded(state: &mut SourceState) {
    let done = match (&state.rolled_back, state.applied_sequence) {
        (Some(r), Some(seq)) => seq >= r.from.sequence,
        _ => false,
    };
    if done {
        state.rolled_back = None;
    }
}

fn release_file(dir: &Path) -> PathBuf {
    dir.join(RELEASE_FILE)
}

#[derive(Serialize, Deserialize)]
struct ReleaseRequest {
    at: String,
}

/// `drover-agent release --rollback`: asks the agent of `dir` to lift its rollback
/// refusal (written atomically, mode 0600). Returns the request's time.
pub fn request_release(dir: &Path) -> Result<String, crate::hold::HoldError> {
    crate::hold::check_state_dir(dir)?;
    let at = drover_proto::time::now_rfc3339();
    let body = serde_json::to_vec(&ReleaseRequest { at: at.clone() }).expect("request serializes");
    let path = release_file(dir);
    let tmp = dir.join(format!(".{RELEASE_FILE}.{}", std::process::id()));
    let io = |p: &Path, e: std::io::Error| crate::hold::HoldError::Io { path: p.display().to_string(), message: e.to_string() };
    crate::private::write_file(&tmp, &body).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(&path, e)
    })?;
    Ok(at)
}

/// The agent's side: the time of a release request in `dir`, consumed (removed). A
/// request that cannot be read is removed and logged.
pub fn take_release(dir: &Path) -> Option<String> {
    let path = release_file(dir);
    let data = std::fs::read(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    match serde_json::from_slice::<ReleaseRequest>(&data) {
        Ok(r) => Some(r.at),
        Err(e) => {
            tracing::warn!("{}: not a release request ({e}); removed", path.display());
            None
        }
    }
}

/// Applies a release request made at `at` to `state`: the refusal of a rollback recorded
/// at or before it is lifted. Returns the rollback released.
pub fn release(state: &mut SourceState, at: &str) -> Option<RolledBack> {
    let secs = |t: &str| drover_proto::time::parse_rfc3339(t).ok();
    let r = state.rolled_back.as_mut().filter(|r| !r.released)?;
    if secs(&r.at).zip(secs(at)).is_some_and(|(rolled, asked)| rolled > asked) {
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

    fn rolled(at: &str) -> SourceState {
        SourceState {
            applied_digest: Some("sha256:good".into()),
            applied_sequence: Some(10),
            rolled_back: Some(RolledBack { from: pos("sha256:bad", 11), to: pos("sha256:good", 10), at: at.into(), reason: "Degraded".into(), released: false }),
            ..SourceState::default()
        }
    }

    #[test]
    fn the_floor_stays_at_the_refused_bundle() {
        let mut st = rolled("2026-01-01T00:00:00Z");
        assert_eq!(floor(&st), Some(pos("sha256:bad", 11)));
        assert!(refuses(&st, "sha256:bad") && !refuses(&st, "sha256:newer"));
        assert!(release(&mut st, "2025-12-31T00:00:00Z").is_none(), "a request older than the rollback is stale");
        assert!(release(&mut st, "2026-01-01T00:00:01Z").is_some());
        assert!(!refuses(&st, "sha256:bad"), "released");
        assert_eq!(floor(&st), Some(pos("sha256:bad", 11)), "the floor stays after a release");
        st.applied_sequence = Some(12);
        superseded(&mut st);
        assert!(st.rolled_back.is_none());
    }

    #[test]
    fn windows_do_not_stop_a_rollback_an_operator_hold_does() {
        let hold = |by| Hold { reason: "r".into(), since: String::new(), by, next_window: None };
        assert!(allowed_by(None));
        assert!(allowed_by(Some(&hold(HoldOrigin::Window))));
        assert!(!allowed_by(Some(&hold(HoldOrigin::File))));
        assert!(!allowed_by(Some(&hold(HoldOrigin::Annotation))));
        assert!(!allowed_by(Some(&hold(HoldOrigin::Unreadable))));
    }
}
