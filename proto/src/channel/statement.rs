//! Channel statements: placing a bundle on a channel is a signed act. `drover publish`,
//! `promote` and `rollback` sign a small statement — repository, channel, digest,
//! sequence, time — stored next to the channel tag as a signed document
//! ([`crate::signed`]) under tag `<channel>.statement` (docs/design.md §4, "Channel
//! statements"). An agent applies a bundle its channel tag names only when the statement
//! for that channel names the same digest and sequence and satisfies its trust policy
//! (the threshold as for bundles): a signed candidate copied onto a later ring's tag by a
//! registry writer carries no statement for that ring and is refused.
//!
//! One statement per channel, replaced by every placement: the newest statement is the
//! only one a reader finds. An older statement put back by a registry writer names an
//! older sequence, which every agent that applied a newer one refuses (never lower).
//!
//! This module is the format and the reading; [`super::write::place`] writes them (in the
//! channel write order: before the channel tag moves).

use serde::{Deserialize, Serialize};

use crate::digest::is_valid_digest;
use crate::hint;
use crate::reference::valid_tag;
use crate::repo::Repo;
use crate::signed::{self, Found, Kind};
use crate::trust::{TrustPolicy, Verification};
use crate::{media, time};

use super::{check_sequence, parse_history_tag, ChannelError};

/// The schema version this code writes and reads.
pub const SCHEMA_VERSION: u32 = 1;
/// `drover promote`'s flag that places a channel whose tag has no statement that counts
/// (a channel last moved before channel statements existed), named in every refusal
/// that needs it.
pub const MIGRATE_FLAG: &str = "--migrate-unplaced-source";
/// A channel's statement lives at `<channel>` + this suffix.
pub const TAG_SUFFIX: &str = ".statement";
/// What a channel statement is, as a signed document.
pub const KIND: Kind =
    Kind { name: "channel statement", artifact_type: media::STATEMENT_ARTIFACT_TYPE, media_type: media::STATEMENT, max: 16 << 10 };

/// The signed statement: this bundle is placed on this channel of this repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Statement {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The repository path where it was signed (`fleet/edge`; no registry host, which
    /// changes when bundles are relocated).
    pub repository: String,
    /// The channel tag.
    pub channel: String,
    /// The bundle's manifest digest.
    pub digest: String,
    /// The bundle's signed sequence.
    pub sequence: u64,
    /// When it was placed (RFC 3339, UTC).
    pub time: String,
}

impl Statement {
    /// The document bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("statement serializes")
    }

    /// Parses and checks a statement document.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, String> {
        let s: Statement = serde_json::from_slice(bytes).map_err(|e| format!("not a channel statement: {e}"))?;
        if s.schema_version != SCHEMA_VERSION {
            return Err(format!("schemaVersion {} is not {SCHEMA_VERSION}", s.schema_version));
        }
        if !is_valid_digest(&s.digest) || !valid_tag(&s.channel) || s.repository.len() > 255 {
            return Err("malformed channel statement (digest, channel or repository)".into());
        }
        check_sequence(s.sequence, "channel statement").map_err(|e| e.to_string())?;
        time::parse_rfc3339(&s.time).map_err(|e| format!("time {:?}: {e}", s.time))?;
        Ok(s)
    }

    /// True when the statement places `digest` with `sequence` on `channel` of a
    /// repository named `repository` (compared by its last path segment, the cluster
    /// type's repository: `drover import --to HOST/PREFIX` relocates the parent path).
    /// A placement is bound to a repository: a statement naming none (signed into an
    /// unnamed `oci:` layout) places nothing in a named repository, a registry's
    /// included. Only a reader of an unnamed layout (`repository` empty) takes any.
    pub fn places(&self, repository: &str, channel: &str, digest: &str, sequence: u64) -> bool {
        let last = |r: &str| r.rsplit('/').next().unwrap_or(r).to_string();
        self.channel == channel
            && self.digest == digest
            && self.sequence == sequence
            && (repository.is_empty() || (!self.repository.is_empty() && last(&self.repository) == last(repository)))
    }
}

/// The tag of `channel`'s statement.
pub fn tag(channel: &str) -> Result<String, ChannelError> {
    let t = format!("{channel}{TAG_SUFFIX}");
    if !valid_tag(&t) || is_statement_tag(channel) || channel.ends_with(".sig") {
        return Err(ChannelError::InvalidTag(format!(
            "channel {channel:?} cannot carry a statement: a channel is a tag of at most {} characters not ending in {TAG_SUFFIX} or .sig",
            128 - TAG_SUFFIX.len()
        )));
    }
    Ok(t)
}

/// True for a statement tag (`<channel>.statement`).
pub fn is_statement_tag(tag: &str) -> bool {
    tag.strip_suffix(TAG_SUFFIX).is_some_and(|c| !c.is_empty())
}

/// What a channel's statement says, once read against a trust policy.
#[derive(Debug)]
pub enum Placement {
    /// There is no statement for the channel.
    Missing {
        /// Where it was looked for.
        reference: String,
    },
    /// A statement that does not count: unsigned, signed by too few trusted keys, malformed.
    Untrusted {
        /// Where it is.
        reference: String,
        /// Why it does not count.
        reason: String,
        /// Distinct trusted keys whose signature verified: more than 0 means short of the
        /// threshold (a further approver countersigns it); 0, that it must be placed again.
        signers: usize,
    },
    /// A statement signed by the trusted keys.
    Trusted {
        /// Where it is.
        reference: String,
        /// The statement manifest's digest.
        digest: String,
        /// The statement.
        statement: Statement,
        /// Who signed it.
        verification: Box<Verification>,
    },
}

/// Reads `channel`'s statement in `repo` against `policy`.
pub async fn read(repo: &Repo, channel: &str, policy: &TrustPolicy) -> Result<Placement, ChannelError> {
    let tag = tag(channel)?;
    let reference = repo.describe(&tag);
    Ok(match signed::read(repo, &KIND, &tag, policy).await? {
        Found::Missing => Placement::Missing { reference },
        Found::Untrusted { reason, signers, .. } => Placement::Untrusted { reference, reason, signers },
        Found::Foreign { reason, .. } => Placement::Untrusted { reference, reason, signers: 0 },
        Found::Trusted(doc) => match Statement::from_slice(&doc.bytes) {
            Ok(statement) => Placement::Trusted { reference, digest: doc.digest, statement, verification: Box::new(doc.verification) },
            Err(reason) => Placement::Untrusted { reference, reason: format!("signed, but {reason}"), signers: 0 },
        },
    })
}

/// True when `lookup` is the history tag of a bundle with `environment` and `sequence`:
/// such a tag certifies itself (the signed config names both), no statement is needed.
pub fn self_certifying(lookup: &str, environment: &str, sequence: u64) -> bool {
    !environment.is_empty() && parse_history_tag(lookup, environment) == Some(sequence)
}

/// The rule an agent (and `drover promote` for its source, and `drover verify`) applies:
/// `Ok` when `placement` (read for `channel` of `repo`) places `digest` with `sequence`
/// there; otherwise why not, naming the channel and the next step ([`crate::hint`]): the
/// `drover sign` that countersigns a statement short of the threshold, else the `drover
/// promote` that places exactly this digest.
pub fn check(placement: &Placement, repo: &Repo, channel: &str, digest: &str, sequence: u64) -> Result<Statement, String> {
    let at = repo.describe(channel);
    let place = hint::place(&repo.describe(digest), channel);
    match placement {
        Placement::Missing { reference } => Err(format!(
            "{digest} is on channel {channel} ({at}) without a signed channel statement: {reference} does not exist. \
             A bundle is placed on a channel by a signed drover publish, promote or rollback; a tag written any other way is not followed. \
             If this bundle belongs on {channel} (a channel last moved before channel statements existed, or a tag copied by hand), place it: {place}; \
             a promote from such a channel takes {MIGRATE_FLAG} once \
             (docs/signatures.md, \"Channel statements\")"
        )),
        Placement::Untrusted { reference, reason, signers } if *signers > 0 => Err(format!(
            "{digest} is on channel {channel} ({at}), but its channel statement {reference} is signed by too few trusted keys: {reason}. \
             A further approver countersigns it: {}",
            hint::sign_channel(&at)
        )),
        Placement::Untrusted { reference, reason, .. } => Err(format!(
            "{digest} is on channel {channel} ({at}), but its channel statement {reference} does not count: {reason}. \
             If this bundle belongs on {channel}, place it: {place}"
        )),
        Placement::Trusted { reference, statement, .. } => {
            let repository = repo.repository_name();
            if statement.places(&repository, channel, digest, sequence) {
                return Ok(statement.clone());
            }
            if statement.repository.is_empty() {
                return Err(format!(
                    "{digest} is on channel {channel} ({at}), but its signed channel statement {reference} names no repository (it was signed into an OCI layout), \
                     so it places nothing in {repository}: a placement is bound to the repository it was signed for. Place it here: `drover promote SOURCE {at} --key KEY --trust-key PUB`"
                ));
            }
            Err(format!(
                "{digest} (sequence {sequence}) is on channel {channel} ({at}), but the signed channel statement {reference} places {} (sequence {}, {}, repository {}) there: \
                 the tag was moved without a statement (drover publish, promote and rollback sign one). If this bundle belongs on {channel}, place it: {place}",
                statement.digest, statement.sequence, statement.time, statement.repository
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Statement {
        Statement {
            schema_version: 1,
            repository: "fleet/edge".into(),
            channel: "prod-ring1".into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            sequence: 43,
            time: "2026-11-25T10:00:00Z".into(),
        }
    }

    #[test]
    fn round_trip_and_placement() {
        let s = sample();
        assert_eq!(Statement::from_slice(&s.to_bytes()).unwrap(), s);
        assert!(s.places("fleet/edge", "prod-ring1", &s.digest, 43));
        assert!(s.places("mirror/site-a/edge", "prod-ring1", &s.digest, 43), "relocated parent path");
        assert!(!s.places("fleet/cloud", "prod-ring1", &s.digest, 43), "another repository");
        assert!(!s.places("fleet/edge", "prod-ring0", &s.digest, 43), "another channel");
        assert!(!s.places("fleet/edge", "prod-ring1", &s.digest, 44), "another sequence");
        let unbound = Statement { repository: String::new(), ..sample() };
        assert!(!unbound.places("fleet/other", "prod-ring1", &s.digest, 43), "a layout's statement places nothing in a registry");
        assert!(unbound.places("", "prod-ring1", &s.digest, 43), "an unnamed layout reads it");
        let mut bad = sample();
        bad.sequence = u64::MAX;
        assert!(Statement::from_slice(&bad.to_bytes()).is_err());
        assert!(Statement::from_slice(br#"{"schemaVersion":1,"extra":1}"#).is_err());
    }

    #[test]
    fn tags() {
        assert_eq!(tag("prod-ring1").unwrap(), "prod-ring1.statement");
        assert!(is_statement_tag("prod.statement") && !is_statement_tag(".statement") && !is_statement_tag("prod"));
        assert!(tag("prod.statement").is_err() && tag(&"x".repeat(120)).is_err());
        assert!(self_certifying("prod-41", "prod", 41) && !self_certifying("prod-41", "prod", 42) && !self_certifying("prod-ring1", "prod", 1));
    }
}
