//! The channel rules, and the only code that knows them (docs/design.md §9). A channel is
//! a tag an agent follows (`prod`, `prod-ring0`); every bundle published into it also gets
//! an immutable history tag. The rules:
//!
//! - **history tags** are `<env>-<sequence>` ([`history_tag`], [`parse_history_tag`]);
//! - **sequences** are plausible only up to [`MAX_SEQUENCE`] (2^53) ([`check_sequence`]);
//!   the next one is chosen from *verified* history only, with checked arithmetic
//!   ([`next_sequence`]);
//! - **never lower**: a channel never moves to a lower sequence, nor to another bundle with
//!   the same sequence ([`never_lower`]); the agent's admission uses the same rule
//!   ([`admits`]);
//! - **write order**: blobs, signature, history tag, channel statement, channel tag (the
//!   first tag written stores the manifest), so no tag ever names an unsigned bundle
//!   ([`write`]);
//! - **placement is signed**: every channel tag a bundle is placed on with a key gets a
//!   signed [`statement`] naming repository, channel, digest and sequence; an agent follows
//!   a channel only with a statement for it.
//!
//! One file per verb, as fluxcd/pkg `ssa` has one file per verb: [`publish`] (what
//! `drover push` and `drover publish` write), [`promote`], [`rollback`], [`import`], and
//! [`admits`] for the agent.

pub mod admits;
pub mod history;
pub mod import;
pub mod promote;
pub mod publish;
pub mod rollback;
pub mod sign;
pub mod statement;
pub mod write;

use serde::Serialize;

use crate::error::StoreError;
use crate::reference::valid_tag;
use crate::trust::TrustError;

/// The highest plausible sequence: 2^53. Sequences are usually Unix seconds (about 2^31
/// today); above 2^53 JSON readers lose precision, and a bundle claiming such a number
/// would freeze the channel (every later bundle would be "lower").
pub const MAX_SEQUENCE: u64 = 1 << 53;

/// Where a channel (or a candidate for it) stands: a bundle digest and its signed sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Position {
    /// The bundle's manifest digest.
    pub digest: String,
    /// The sequence from the bundle's config.
    pub sequence: u64,
}

/// What [`never_lower`] decided for a channel move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// The channel already holds this exact bundle: nothing to write.
    Unchanged,
    /// The channel is empty or holds a lower sequence: it may move.
    Forward,
}

/// Why a channel rule refused.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// A sequence above [`MAX_SEQUENCE`] (or one that would overflow).
    #[error("{what}: sequence {sequence} is implausible (the limit is 2^53 = {MAX_SEQUENCE}); sequences are Unix seconds or small counters. A bundle claiming it is not one drover published: delete that tag, or republish with a sane sequence (`drover publish`, or `drover push DIR REF --sequence N`)")]
    Implausible {
        /// What carried the sequence.
        what: String,
        /// The sequence.
        sequence: u64,
    },
    /// Moving the channel would lower its sequence (or replace a bundle of the same sequence).
    #[error("refusing to move {channel}: it holds sequence {} ({}), {}", current.sequence, current.digest, lower_reason(channel, current, candidate))]
    Lower {
        /// The channel (reference text).
        channel: String,
        /// What it holds.
        current: Position,
        /// What was to replace it.
        candidate: Position,
    },
    /// The agent's admission refused a bundle below its floor (see [`admits`]).
    #[error("{} has sequence {}, {} the applied {} ({}); {}", candidate.digest, candidate.sequence,
        if candidate.sequence == applied.sequence { "equal to" } else { "lower than" }, applied.sequence, applied.digest,
        if candidate.sequence == applied.sequence { "a different bundle with the same sequence: every publish needs a higher sequence" }
        else { "roll back with `drover rollback` (a new, higher sequence)" })]
    BelowFloor {
        /// What is applied.
        applied: Position,
        /// What was offered.
        candidate: Position,
    },
    /// A history tag already names another bundle (history tags are immutable).
    #[error("{tag} already holds {existing}; history tags are immutable: publish {wanted} with a higher sequence (`drover push DIR REF --sequence N`)")]
    HistoryTaken {
        /// The history tag (reference text).
        tag: String,
        /// What it holds.
        existing: String,
        /// What was to be tagged.
        wanted: String,
    },
    /// A tag that cannot be written.
    #[error("{0}")]
    InvalidTag(String),
    /// The bundle to move or sign did not verify against the trust policy.
    #[error("{what} did not verify, so it is not signed or tagged: {source}")]
    Unverified {
        /// What was checked.
        what: String,
        /// Why it failed.
        #[source]
        source: TrustError,
    },
    /// Something else about the bundle is wrong (shape, identity).
    #[error("{0}")]
    Refused(String),
    /// Registry or layout access failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn lower_reason(channel: &str, current: &Position, candidate: &Position) -> String {
    if candidate.sequence == current.sequence {
        format!(
            "and {} is a different bundle with the same sequence; every publish needs a higher sequence",
            candidate.digest
        )
    } else {
        format!(
            "and {} has the lower sequence {}, which would be a rollback; to re-publish old content with a new, higher sequence: {}",
            candidate.digest,
            candidate.sequence,
            crate::hint::rollback(channel, &candidate.digest)
        )
    }
}

/// Checks that `sequence` is plausible (at most [`MAX_SEQUENCE`]); `what` names its carrier.
pub fn check_sequence(sequence: u64, what: &str) -> Result<u64, ChannelError> {
    if sequence > MAX_SEQUENCE {
        return Err(ChannelError::Implausible { what: what.to_string(), sequence });
    }
    Ok(sequence)
}

/// The immutable history tag of `sequence` in environment `env`: `<env>-<sequence>`.
pub fn history_tag(env: &str, sequence: u64) -> Result<String, ChannelError> {
    let tag = format!("{env}-{sequence}");
    if env.is_empty() || !valid_tag(&tag) {
        return Err(ChannelError::InvalidTag(format!(
            "history tag {tag:?} is not a valid tag: the environment must be letters, digits, '_', '.' or '-'"
        )));
    }
    Ok(tag)
}

/// The sequence named by history tag `tag` of environment `env` (`None` for other tags).
pub fn parse_history_tag(tag: &str, env: &str) -> Option<u64> {
    let n = tag.strip_prefix(env)?.strip_prefix('-')?;
    if n.is_empty() || n.len() > 20 || !n.bytes().all(|b| b.is_ascii_digit()) || (n.len() > 1 && n.starts_with('0')) {
        return None;
    }
    n.parse().ok()
}

/// The next sequence: above every *verified* sequence in `verified` and at least
/// `at_least` (e.g. now in Unix seconds), checked against [`MAX_SEQUENCE`].
pub fn next_sequence(verified: impl IntoIterator<Item = u64>, at_least: u64) -> Result<u64, ChannelError> {
    let mut next = at_least;
    for s in verified {
        let above = s.checked_add(1).ok_or(ChannelError::Implausible { what: "verified history".into(), sequence: s })?;
        next = next.max(above);
    }
    check_sequence(next, "the next sequence")
}

/// The never-lower rule: may `channel`, holding `current`, move to `candidate`?
/// Refused when the candidate's sequence is lower, or equal with another digest.
pub fn never_lower(channel: &str, current: Option<&Position>, candidate: &Position) -> Result<Move, ChannelError> {
    check_sequence(candidate.sequence, &format!("{} for {channel}", candidate.digest))?;
    let Some(current) = current else { return Ok(Move::Forward) };
    if current.digest == candidate.digest {
        return Ok(Move::Unchanged);
    }
    if candidate.sequence <= current.sequence {
        return Err(ChannelError::Lower { channel: channel.to_string(), current: current.clone(), candidate: candidate.clone() });
    }
    Ok(Move::Forward)
}

/// Now in Unix seconds (the default floor of a new sequence).
pub fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(d: &str, s: u64) -> Position {
        Position { digest: d.into(), sequence: s }
    }

    #[test]
    fn history_tags_round_trip() {
        assert_eq!(history_tag("prod", 41).unwrap(), "prod-41");
        assert_eq!(parse_history_tag("prod-41", "prod"), Some(41));
        assert_eq!(parse_history_tag("prod-ring0", "prod"), None);
        assert_eq!(parse_history_tag("prod-041", "prod"), None);
        assert_eq!(parse_history_tag("prod-", "prod"), None);
        assert_eq!(parse_history_tag("staging-4", "prod"), None);
        assert_eq!(parse_history_tag("prod-99999999999999999999999", "prod"), None);
        assert!(history_tag("", 1).is_err());
        assert!(history_tag("a/b", 1).is_err());
    }

    #[test]
    fn next_sequence_is_checked() {
        assert_eq!(next_sequence([3, 7], 0).unwrap(), 8);
        assert_eq!(next_sequence([3], 100).unwrap(), 100);
        assert!(next_sequence([u64::MAX], 0).is_err());
        assert!(next_sequence([MAX_SEQUENCE], 0).is_err());
        assert_eq!(next_sequence([MAX_SEQUENCE - 1], 0).unwrap(), MAX_SEQUENCE);
    }

    #[test]
    fn never_lower_rules() {
        let cur = pos("sha256:a", 5);
        assert_eq!(never_lower("c", None, &pos("sha256:b", 1)).unwrap(), Move::Forward);
        assert_eq!(never_lower("c", Some(&cur), &pos("sha256:a", 5)).unwrap(), Move::Unchanged);
        assert_eq!(never_lower("c", Some(&cur), &pos("sha256:b", 6)).unwrap(), Move::Forward);
        assert!(never_lower("c", Some(&cur), &pos("sha256:b", 5)).is_err());
        assert!(never_lower("c", Some(&cur), &pos("sha256:b", 4)).is_err());
        assert!(never_lower("c", None, &pos("sha256:b", u64::MAX)).is_err());
    }
}
