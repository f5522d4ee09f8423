//! The next step a refusal names: the one place that writes the `drover` commands an
//! error message tells the operator to run, so that `drover verify`, `drover promote`,
//! the agent and the fleet commands all name the same command with the flags it really
//! takes (checked against `drover <command> --help` by `tests/tests/cli_messages.rs`).
//!
//! Each hint is a whole command in backquotes, runnable as written once the operator puts
//! their files in for the placeholders [`KEY`] (a private key) and [`PUB`] (a trusted
//! public key). References are printed as given (untrusted text is cleaned where the
//! message is printed, by `crate::text::clean`).

/// Placeholder for the operator's private signing key file.
pub const KEY: &str = "KEY";
/// Placeholder for a trusted public key file.
pub const PUB: &str = "PUB";
/// Placeholder for the publish prefix (`HOST/PREFIX`) whose `drover-reports` a message
/// cannot name (a roster judges a report without knowing where it was read).
pub const PREFIX: &str = "PREFIX";

/// A channel's statement is signed by fewer trusted keys than the threshold: a further
/// approver countersigns it (`drover sign` of the channel tag verifies the bundle with
/// [`PUB`], signs it and countersigns the statement that places it there).
pub fn sign_channel(channel_reference: &str) -> String {
    format!("`drover sign {channel_reference} --key {KEY} --trust-key {PUB}`")
}

/// A bundle is on a channel without a statement that places it: the promote that signs
/// one for exactly this digest (`digest_reference` is `HOST/REPO@sha256:…`), `channel`
/// being the destination tag in the same repository.
pub fn place(digest_reference: &str, channel: &str) -> String {
    format!("`drover promote {digest_reference} {channel} --key {KEY} --trust-key {PUB}`")
}

/// A bundle digest without a signature: sign the digest as built.
pub fn sign_digest(digest_reference: &str) -> String {
    format!("`drover sign {digest_reference} --key {KEY}`")
}

/// Re-publishing old content with a new, higher sequence (`channel_reference` is the
/// channel tag, `to` the digest or history tag to restore).
pub fn rollback(channel_reference: &str, to: &str) -> String {
    format!("`drover rollback {channel_reference} --to {to} --key {KEY}`")
}

/// A cluster whose report key is not enrolled in the fleet roster of the reports under
/// `registry_prefix` (`HOST/PREFIX`, reading `PREFIX/drover-reports`, or [`PREFIX`]);
/// `cluster` is its report tag `TYPE.NAME`, with `=FINGERPRINT` to pin the key.
pub fn enroll(registry_prefix: &str, cluster: &str) -> String {
    format!("`drover fleet enroll --registry {registry_prefix} --cluster {cluster} --key {KEY}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of a hint, without its backquotes.
    fn words(hint: &str) -> Vec<&str> {
        assert!(hint.starts_with("`drover ") && hint.ends_with('`'), "{hint}");
        hint.trim_matches('`').split_whitespace().collect()
    }

    #[test]
    fn hints_are_whole_commands_with_placeholders() {
        let d = format!("reg.example/fleet/edge@sha256:{}", "a".repeat(64));
        assert_eq!(
            words(&sign_channel("reg.example/fleet/edge:prod")),
            ["drover", "sign", "reg.example/fleet/edge:prod", "--key", "KEY", "--trust-key", "PUB"]
        );
        assert_eq!(words(&place(&d, "prod-ring1")), ["drover", "promote", d.as_str(), "prod-ring1", "--key", "KEY", "--trust-key", "PUB"]);
        assert_eq!(words(&sign_digest(&d)), ["drover", "sign", d.as_str(), "--key", "KEY"]);
        assert_eq!(words(&rollback("r/e:prod", "prod-41")), ["drover", "rollback", "r/e:prod", "--to", "prod-41", "--key", "KEY"]);
        assert_eq!(words(&enroll("r/fleet", "edge.a")), ["drover", "fleet", "enroll", "--registry", "r/fleet", "--cluster", "edge.a", "--key", "KEY"]);
    }
}
