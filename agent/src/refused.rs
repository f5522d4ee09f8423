//! Refused digests are remembered, so that what one registry write costs every agent is
//! paid once, not on every poll: a digest the agent refused (signature, statement,
//! content, sequence, ...) is not fetched or judged again until a backoff has passed —
//! [`FIRST`] after the first refusal, doubling with each refusal of the same digest up to
//! [`LONGEST`]. A refusal that may heal by itself (a signature or a channel statement
//! that arrives after the tag: push then sign, two-party release) is thus judged again
//! within [`LONGEST`] at worst. A new digest on the tag is judged at once; a restart
//! forgets.

use std::time::{Duration, Instant};

/// The backoff after a digest's first refusal.
pub const FIRST: Duration = Duration::from_secs(60);
/// The longest backoff.
pub const LONGEST: Duration = Duration::from_secs(600);

/// The last refused digest.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The digest.
    pub digest: String,
    /// The refusal's reason label (`signature`, `tampered`, ...).
    pub reason: &'static str,
    /// The refusal's message.
    pub message: String,
    /// The stage that refused.
    pub stage: &'static str,
    at: Instant,
    times: u32,
}

impl Refused {
    /// Records a refusal of `digest`, counting it with `previous` when that was the same
    /// digest.
    pub fn record(previous: Option<Refused>, digest: &str, reason: &'static str, message: &str, stage: &'static str) -> Refused {
        let times = previous.filter(|p| p.digest == digest).map_or(1, |p| p.times.saturating_add(1));
        Refused { digest: digest.to_string(), reason, message: message.to_string(), stage, at: Instant::now(), times }
    }

    /// How long after the last refusal the digest is judged again.
    pub fn backoff(&self) -> Duration {
        FIRST.saturating_mul(1u32 << self.times.saturating_sub(1).min(16)).min(LONGEST)
    }

    /// True while `digest` is this refused digest and its backoff has not passed.
    pub fn holds(&self, digest: &str) -> bool {
        self.digest == digest && self.at.elapsed() < self.backoff()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_refusal_of_one_digest_and_a_new_digest_starts_over() {
        let mut r = Refused::record(None, "sha256:a", "signature", "m", "verify");
        assert_eq!(r.backoff(), FIRST);
        assert!(r.holds("sha256:a") && !r.holds("sha256:b"));
        for _ in 0..10 {
            r = Refused::record(Some(r), "sha256:a", "signature", "m", "verify");
        }
        assert_eq!(r.backoff(), LONGEST);
        let b = Refused::record(Some(r), "sha256:b", "tampered", "m", "verify");
        assert_eq!(b.backoff(), FIRST);
    }
}
