//! Reading what a channel or history tag holds, in the order that trusts nothing
//! unverified: the manifest (size-capped), then its signatures against the trust policy,
//! and only then the config (sequence, identity). The next sequence is chosen from what
//! verified here, never from a tag name or an unverified config.

use crate::config::BundleConfig;
use crate::error::StoreError;
use crate::manifest::Manifest;
use crate::repo::{FetchLimits, Repo};
use crate::trust::{self, TrustError, TrustPolicy, Verification};

use super::{parse_history_tag, ChannelError, Position, MAX_SEQUENCE};

/// Stepped-over history tags named one by one (the rest are counted).
const NAMED_SKIPS: usize = 10;

/// A bundle whose signatures satisfied the policy (or, without a policy, whose digests
/// checked), with its manifest and config.
#[derive(Debug, Clone)]
pub struct Head {
    /// Manifest digest.
    pub digest: String,
    /// Manifest bytes.
    pub manifest_bytes: Vec<u8>,
    /// Parsed manifest (bundle shape checked).
    pub manifest: Manifest,
    /// Config bytes.
    pub config_bytes: Vec<u8>,
    /// Parsed config.
    pub config: BundleConfig,
    /// The signature verification (`None` when read without a policy).
    pub verification: Option<Verification>,
}

impl Head {
    /// Where this bundle stands: digest and signed sequence.
    pub fn position(&self) -> Position {
        Position { digest: self.digest.clone(), sequence: self.config.sequence }
    }

    /// The content layer's digest.
    pub fn layer_digest(&self) -> &str {
        self.manifest.layers.first().map(|l| l.digest.as_str()).unwrap_or("")
    }
}

/// What a tag holds, as far as the channel rules are concerned.
#[derive(Debug)]
pub enum Holding {
    /// Nothing: the tag does not exist.
    Empty,
    /// A bundle that verified against the policy (or any readable bundle without one).
    Trusted(Box<Head>),
    /// A drover bundle whose signatures do not satisfy the policy: not ours.
    Untrusted {
        /// Its digest.
        digest: String,
        /// Why it did not verify.
        reason: String,
    },
    /// Something that is not a drover bundle at all (another artifact or image).
    Foreign {
        /// Its digest.
        digest: String,
        /// What it is.
        reason: String,
    },
}

impl Holding {
    /// The trusted head, if any.
    pub fn trusted(&self) -> Option<&Head> {
        match self {
            Holding::Trusted(h) => Some(h),
            _ => None,
        }
    }
}

/// Reads `lookup` (a tag or digest) in `repo`: manifest, then signatures against `policy`
/// (when given), then the config. Network and storage failures are errors; an unsigned or
/// foreign manifest is a [`Holding`], for the caller to refuse or step over.
pub async fn read(repo: &Repo, lookup: &str, policy: Option<&TrustPolicy>) -> Result<Holding, ChannelError> {
    complete(repo, judge(repo, lookup, policy).await?).await
}

/// A tag read as far as its manifest and signatures ([`judge`]), before its config.
#[derive(Debug)]
pub enum Judged {
    /// Already decided: empty, untrusted or foreign.
    Decided(Holding),
    /// A bundle manifest whose signatures satisfied the policy (or, without a policy,
    /// a readable bundle manifest); its config is read by [`complete`].
    Manifest {
        /// Manifest digest.
        digest: String,
        /// Manifest bytes.
        manifest_bytes: Vec<u8>,
        /// Parsed manifest (bundle shape checked).
        manifest: Box<Manifest>,
        /// The signature verification (`None` when read without a policy).
        verification: Option<Verification>,
    },
}

/// The first half of [`read`]: the manifest (size-capped) and its signatures against
/// `policy`; no config yet.
pub async fn judge(repo: &Repo, lookup: &str, policy: Option<&TrustPolicy>) -> Result<Judged, ChannelError> {
    let limits = FetchLimits::default();
    let (manifest_bytes, digest) = match repo.manifest(lookup, limits.manifest).await {
        Ok(x) => x,
        Err(StoreError::NotFound(_)) => return Ok(Judged::Decided(Holding::Empty)),
        Err(e) => return Err(e.into()),
    };
    let manifest = match Manifest::from_slice(&manifest_bytes) {
        Ok(m) => m,
        Err(reason) => return Ok(Judged::Decided(Holding::Foreign { digest, reason })),
    };
    if let Err(reason) = manifest.bundle_layer() {
        return Ok(Judged::Decided(Holding::Foreign { digest, reason }));
    }
    let verification = match policy {
        None => None,
        Some(policy) => match trust::verify(repo, &digest, policy).await {
            Ok(v) => Some(v),
            Err(TrustError::Store(e)) => return Err(e.into()),
            Err(e) => return Ok(Judged::Decided(Holding::Untrusted { digest, reason: e.to_string() })),
        },
    };
    Ok(Judged::Manifest { digest, manifest_bytes, manifest: Box::new(manifest), verification })
}

/// The second half of [`read`]: the config of a judged manifest.
pub async fn complete(repo: &Repo, judged: Judged) -> Result<Holding, ChannelError> {
    let (digest, manifest_bytes, manifest, verification) = match judged {
        Judged::Decided(h) => return Ok(h),
        Judged::Manifest { digest, manifest_bytes, manifest, verification } => (digest, manifest_bytes, *manifest, verification),
    };
    let limits = FetchLimits::default();
    if manifest.config.size > limits.config {
        return Err(StoreError::TooLarge { what: format!("config of {}", repo.describe(&digest)), size: manifest.config.size, limit: limits.config }.into());
    }
    let config_bytes = repo.blob(&manifest.config.digest, limits.config).await?;
    let config = match BundleConfig::from_slice(&config_bytes) {
        Ok(c) => c,
        Err(reason) if verification.is_none() => return Ok(Holding::Foreign { digest, reason }),
        Err(reason) => return Err(ChannelError::Refused(format!("{} is signed but its config is unreadable: {reason}", repo.describe(&digest)))),
    };
    Ok(Holding::Trusted(Box::new(Head { digest, manifest_bytes, manifest, config_bytes, config, verification })))
}

/// The highest trusted bundle among the `<env>-<n>` history tags (of `tags`, the tags of
/// `repo`) whose number is above `above`: tags are tried highest first and untrusted ones
/// skipped, every one of them if need be, so that no number of tags an attacker adds above
/// the real history hides it. What bounds the work is the tag list itself (see
/// `registry::MAX_TAGS`); each forged tag costs one `HEAD` (its digest), unless it names a
/// manifest already judged or one with a signature tag, which is then verified. Returns the
/// head and the tags that were stepped over (the first few by name, then a count).
pub async fn highest_trusted(
    repo: &Repo,
    tags: &[String],
    env: &str,
    above: u64,
    policy: Option<&TrustPolicy>,
) -> Result<(Option<Head>, Vec<String>), ChannelError> {
    let mut numbered: Vec<(u64, String)> = tags
        .iter()
        .filter_map(|t| parse_history_tag(t, env).map(|n| (n, t.clone())))
        .filter(|(n, _)| *n > above && *n <= MAX_SEQUENCE)
        .collect();
    numbered.sort_by(|a, b| b.cmp(a));
    let signed: std::collections::HashSet<&str> = tags.iter().map(String::as_str).filter(|t| t.ends_with(".sig")).collect();
    let mut judged = std::collections::HashSet::new();
    let mut skips = Skips::default();
    for (_, tag) in numbered {
        if policy.is_some() {
            // Cheap checks first: one HEAD, no body, no signature fetch.
            let Some(digest) = repo.resolve(&tag).await? else { continue };
            if !judged.insert(digest.clone()) {
                skips.add(format!("{}: names {digest}, already found untrusted", repo.describe(&tag)));
                continue;
            }
            if !signed.contains(crate::digest::signature_tag(&digest).as_str()) {
                skips.add(format!("{}: {digest} is not signed (no signature tag)", repo.describe(&tag)));
                continue;
            }
        }
        match read(repo, &tag, policy).await? {
            Holding::Trusted(h) if h.config.environment == env => return Ok((Some(*h), skips.finish())),
            Holding::Trusted(h) => skips.add(format!("{} (environment {:?})", repo.describe(&tag), h.config.environment)),
            Holding::Untrusted { reason, .. } | Holding::Foreign { reason, .. } => skips.add(format!("{}: {reason}", repo.describe(&tag))),
            Holding::Empty => {}
        }
    }
    Ok((None, skips.finish()))
}

/// History tags stepped over: the first [`NAMED_SKIPS`] by name, the rest counted.
#[derive(Default)]
struct Skips {
    named: Vec<String>,
    more: usize,
}

impl Skips {
    fn add(&mut self, s: String) {
        if self.named.len() < NAMED_SKIPS {
            self.named.push(s);
        } else {
            self.more += 1;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.more > 0 {
            self.named.push(format!("{} more history tags", self.more));
        }
        self.named
    }
}

/// The verified floor of a channel and what the repository held when it was read.
#[derive(Debug, Clone)]
pub struct Floor {
    /// The higher of what the channel tag holds (when it verifies) and the highest
    /// verified history tag; `None` when neither exists.
    pub position: Option<Position>,
    /// True when the repository held no tag at all (no channel, history or signature):
    /// a writer has nothing to read or merge there.
    pub repository_empty: bool,
}

/// The verified floor of a channel: the higher of what the channel tag holds (when it
/// verifies) and the highest verified history tag of `env` (one tag list, then reads of
/// the candidate history tags).
pub async fn floor(repo: &Repo, channel: &Holding, env: &str, policy: Option<&TrustPolicy>) -> Result<Floor, ChannelError> {
    let current = channel.trusted().map(Head::position);
    let above = current.as_ref().map(|p| p.sequence).unwrap_or(0);
    let tags = repo.tags().await?;
    let (history, skipped) = highest_trusted(repo, &tags, env, above, policy).await?;
    for s in skipped {
        tracing::warn!("ignoring history tag {s}");
    }
    Ok(Floor { position: super::admits::higher_floor(current, history.map(|h| h.position())), repository_empty: tags.is_empty() })
}
