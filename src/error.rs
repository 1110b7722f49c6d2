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

    /// A file or buffer that is not a valid `.mts` archive or `.npy` array.
    #[error("{0}")]
    Format(String),

    /// An element type blockmap does not handle.
    #[error("{0}")]
    UnsupportedType(String),

    /// An operating system error (file not found, permission denied, ...),
    /// or a writer that failed.
    #[error("{context}: {source}")]
    Io {
        /// what blockmap was doing
        context: String,
        /// the error the operating system (or the writer) gave
        #[source]
        source: std::io::Error,
    },

    /// Memory could not be had: the allocator refused, or the size asked
    /// for cannot exist on this machine.
    #[error("{0}")]
    OutOfMemory(String),

    /// A long operation stopped because its caller asked it to (its
    /// interrupt checker said so), e.g. on Ctrl-C.
    #[error("interrupted")]
    Interrupted,

    /// Inputs of an operation whose metadata should match and does not
    /// (metatensor-operations' `NotEqualError`).
    #[error("{0}")]
    NotEqual(String),

    /// An index outside the items it indexes (a dataset's maps); Python's
    /// `IndexError`.
    #[error("{0}")]
    OutOfRange(String),

    /// Something the data model allows but an operation does not handle
    /// (yet), e.g. gradients of gradients in `join`.
    #[error("{0}")]
    NotImplemented(String),

    /// A broken internal invariant: a bug in blockmap, never the caller's
    /// fault.
    #[error("internal error (this is a bug in blockmap, please report it): {0}")]
    Internal(String),
}

impl Error {
    /// Shorthand for [`Error::Invalid`] from anything printable.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }

    /// Shorthand for [`Error::Format`] from anything printable.
    pub fn format(message: impl Into<String>) -> Self {
        Error::Format(message.into())
    }

    /// An [`Error::Io`] saying what blockmap was doing.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// An [`Error::OutOfMemory`] for an allocation of `bytes` bytes.
    pub fn out_of_memory(bytes: usize) -> Self {
        Error::OutOfMemory(format!("cannot allocate {bytes} bytes: out of memory"))
    }

    /// Shorthand for [`Error::Internal`] from anything printable.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal(message.into())
    }

    /// The same error with `context` in front of its message (for
    /// [`Error::Invalid`] and [`Error::Format`]), e.g. the entry it concerns.
    #[must_use]
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        match self {
            Error::Invalid(message) => Error::Invalid(format!("{context}: {message}")),
            Error::Format(message) => Error::Format(format!("{context}: {message}")),
            other => other,
        }
    }
}

impl From<std::collections::TryReserveError> for Error {
    fn from(error: std::collections::TryReserveError) -> Self {
        Error::OutOfMemory(format!("cannot reserve memory: {error}"))
    }
}

impl From<hashbrown::TryReserveError> for Error {
    fn from(_: hashbrown::TryReserveError) -> Self {
        Error::OutOfMemory("cannot reserve memory for a table: out of memory".into())
    }
}

/// `Result` with blockmap's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
