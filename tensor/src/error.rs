//! The error type of every tensor operation.
//!
//! A [`TensorError`] is a plain, lowercase, human-readable message that names
//! the shapes, axes or values involved (for example
//! `cannot broadcast shapes [2, 3] and [4]`). It carries no source position:
//! the interpreter adds the statement's location when it reports the error.

use std::fmt;

/// A failed tensor operation, described by one lowercase message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorError {
    message: String,
}

impl TensorError {
    /// Creates an error from its message.
    pub fn new(message: impl Into<String>) -> Self {
        TensorError {
            message: message.into(),
        }
    }

    /// The message, without any source position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TensorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TensorError {}

/// The result of a tensor operation.
pub type Result<T, E = TensorError> = std::result::Result<T, E>;

/// Builds a [`TensorError`] from `format!` arguments.
#[macro_export]
macro_rules! terr {
    ($($arg:tt)*) => {
        $crate::error::TensorError::new(format!($($arg)*))
    };
}
pub use crate::terr;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_its_message() {
        let e = TensorError::new("axis 2 is out of range");
        assert_eq!(e.to_string(), "axis 2 is out of range");
        assert_eq!(e.message(), "axis 2 is out of range");
    }
}
