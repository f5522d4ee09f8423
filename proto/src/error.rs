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
    /// True for errors worth retrying (network, 5xx), false for definitive answers.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Transport { .. })
    }
}

