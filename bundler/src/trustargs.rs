//! The trust flags shared by every command that verifies bundles (`verify`, `promote`,
//! `import`, `sign`): the trusted public keys and how many of them must have signed.

use std::path::PathBuf;

use drover_proto::trust::TrustPolicy;

/// `--trust-key PUB...` and `--threshold N`.
#[derive(Debug, Clone, clap::Args)]
pub struct TrustArgs {
    /// Trusted public key (PEM); repeat for several keys (rotation, two-party release).
    #[arg(long = "trust-key", value_name = "PUB")]
    pub keys: Vec<PathBuf>,
    /// Distinct trusted keys that must have signed.
    #[arg(long, default_value_t = 1)]
    pub threshold: usize,
}

impl TrustArgs {
    /// The policy; at least one `--key` is required.
    pub fn policy(&self) -> anyhow::Result<TrustPolicy> {
        anyhow::ensure!(
            !self.keys.is_empty(),
            "give at least one trusted public key with --trust-key PUB"
        );
        Ok(TrustPolicy::from_files(&self.keys, self.threshold)?)
    }

    /// The policy when keys were given, `None` otherwise (then `--threshold` is an error).
    pub fn optional_policy(&self) -> anyhow::Result<Option<TrustPolicy>> {
        if self.keys.is_empty() {
            anyhow::ensure!(self.threshold == 1, "--threshold needs --trust-key");
            return Ok(None);
        }
        self.policy().map(Some)
    }
}
