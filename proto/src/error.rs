//! The error type of every store (registry, OCI layout, OCI archive).

/// Errors reading or writing bundles in a registry, layout or archive.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The manifest or blob does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// Content exceeds a size limit.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What was fetched.
        what: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Content does not hash to the digest that named it.
    #[error("{what}: digest mismatch, expected {expected}, got {actual}")]
    DigestMismatch {
        /// What was fetched.
        what: String,
        /// Expected digest.
        expected: String,
        /// Actual digest.
        actual: String,
    },
    /// The client could not be configured (CA file, Docker config).
    #[error("{0}")]
    Config(String),
    /// A local file operation failed.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// What failed.
        message: String,
    },
    /// A layout, archive or manifest is malformed.
    #[error("{0}")]
    Malformed(String),
    /// Content exceeds a size limit while it is still arriving (reading stopped there).
    #[error("{what} is over the limit of {limit} bytes (stopped reading there)")]
    OverLimit {
        /// What was fetched.
        what: String,
        /// The limit.
        limit: u64,
    },
    /// The registry refused the credentials (401) or the access (403): retrying with
    /// the same credentials cannot help.
    #[error("{what}: authentication failed for {registry}: {detail}")]
    Auth {
        /// The operation and reference.
        what: String,
        /// `HOST[:PORT]` that refused.
        registry: String,
        /// What was answered, which credentials were used or where they were looked for.
        detail: String,
    },
    /// Transport or protocol error.
    #[error("{what}: {message}")]
    Transport {
        /// The operation and reference.
        what: String,
        /// The underlying error.
        message: String,
    },
}

impl StoreError {
    /// True for errors worth retrying (network, timeouts, TLS, 5xx), false for definitive
    /// answers (not found, too large, digest mismatch, authentication refused).
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Transport { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_authentication_is_not_transient() {
        let e = StoreError::Auth { what: "HEAD r".into(), registry: "r.example".into(), detail: "HTTP 401".into() };
        assert!(!e.is_transient());
        assert!(e.to_string().contains("authentication failed for r.example"));
        assert!(StoreError::Transport { what: "x".into(), message: "timed out".into() }.is_transient());
    }
}

