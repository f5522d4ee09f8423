//! The one error type of the platform modules.

/// Why a platform could not be loaded or rendered. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// A platform file is missing, unreadable or invalid.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A template does not compile or render (`FILE:LINE: ...`).
    #[error("{0}")]
    Template(String),
    /// Rendering one cluster type failed (template, YAML, object rules).
    #[error("{0}")]
    Render(String),
    /// The command line names something the platform does not have.
    #[error("{0}")]
    Usage(String),
}
