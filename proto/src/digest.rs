//! sha256 digests in OCI notation (`sha256:<hex>`).

use sha2::{Digest as _, Sha256};

/// Computes the OCI digest string (`sha256:<hex>`) of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Computes the bare lowercase hex sha256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Returns the hex part of a `sha256:<hex>` digest if it is well formed.
pub fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then_some(hex)
}

/// True when `digest` is a well-formed `sha256:<64 lowercase hex>` digest.
pub fn is_valid_digest(digest: &str) -> bool {
    digest_hex(digest).is_some()
}

/// Checks that `data` hashes to `expected`; returns the actual digest on mismatch.
pub fn verify_digest(data: &[u8], expected: &str) -> Result<(), String> {
    let actual = sha256_digest(data);
    if actual == expected {
        Ok(())
    } else {
        Err(actual)
    }
}

/// The cosign signature tag for a manifest digest: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn digest_of_empty() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(is_valid_digest(&sha256_digest(b"x")));
        assert!(!is_valid_digest("sha256:ABC"));
        assert_eq!(signature_tag("sha256:ab"), "sha256-ab.sig");
    }
}
