//! The agent's admission rule: a verified bundle is applied only when it does not lower
//! the floor (the applied digest and sequence), by the same never-lower rule every
//! command that moves a channel uses ([`super::never_lower`]).

use super::{never_lower, ChannelError, Move, Position};

/// May `candidate` be applied on top of `floor` (the applied bundle, if any)? Ok for the
/// applied bundle itself (a resync) and for a higher sequence; refused for a lower
/// sequence, another bundle with the same sequence, or an implausible sequence.
pub fn admits(source: &str, floor: Option<&Position>, candidate: &Position) -> Result<Move, ChannelError> {
    never_lower(source, floor, candidate).map_err(|e| match e {
        ChannelError::Lower { current, candidate, .. } => ChannelError::BelowFloor { applied: current, candidate },
        e => e,
    })
}

/// The higher of two floors (e.g. the local record and the in-cluster copy): the one with
/// the higher sequence wins; on a tie the first.
pub fn higher_floor(a: Option<Position>, b: Option<Position>) -> Option<Position> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.sequence > a.sequence { b } else { a }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_rules() {
        let f = Position { digest: "sha256:a".into(), sequence: 5 };
        assert!(admits("s", Some(&f), &Position { digest: "sha256:b".into(), sequence: 4 }).is_err());
        assert!(admits("s", Some(&f), &Position { digest: "sha256:b".into(), sequence: 5 }).is_err());
        assert_eq!(admits("s", Some(&f), &f).unwrap(), Move::Unchanged);
        assert_eq!(admits("s", None, &f).unwrap(), Move::Forward);
        let g = Position { digest: "sha256:c".into(), sequence: 9 };
        assert_eq!(higher_floor(Some(f.clone()), Some(g.clone())), Some(g.clone()));
        assert_eq!(higher_floor(None, Some(f.clone())), Some(f));
    }
}
