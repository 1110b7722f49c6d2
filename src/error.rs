//! The one error type of the core.

/// Everything that can go wrong in blockmap's core.
///
/// Each message says what was wrong and where (which label dimension, which
/// block, which gradient), so that it can be shown to a user as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Data that breaks one of the data model's rules: shapes that do not
    /// match their labels, duplicated label entries, invalid names, ...
    #[error("{0}")]
    Invalid(String),

    /// An element type blockmap does not handle.
    #[error("{0}")]
    UnsupportedType(String),

    /// An operating system error (file not found, permission denied, ...).
    #[error("{context}: {source}")]
    Io {
        /// what blockmap was doing
        context: String,
        /// the error the operating system gave
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Shorthand for [`Error::Invalid`] from anything printable.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }
}

/// `Result` with blockmap's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
