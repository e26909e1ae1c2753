//! Why an `.npy` array or an `.npz` archive was refused.

/// Why an `.npy` array or an `.npz` archive could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// An `.npy` header or array this reader refuses (a dtype it does not
    /// know, Fortran order, a shape that disagrees with the data, ...).
    #[error("npy: {0}")]
    Array(String),
    /// An `.npz` member that is missing, stored in a way this reader does not
    /// support, or whose bytes disagree with the archive's directory.
    #[error("npz: {0}")]
    Archive(String),
    /// A file that is not a valid archive, or not the CSR matrix it should be.
    #[error("{path}: {problem}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Reading failed, with the file or member it concerned.
    #[error("{context}: {error}")]
    Io {
        /// The path or archive member being read.
        context: String,
        /// The underlying I/O error (in the message, so not the source).
        error: std::io::Error,
    },
}

impl NpyError {
    /// Wraps an I/O error with what was being read.
    pub fn io(context: impl Into<String>, error: std::io::Error) -> NpyError {
        NpyError::Io {
            context: context.into(),
            error,
        }
    }

    /// A problem with the file at `path`.
    pub fn file(path: &std::path::Path, problem: impl Into<String>) -> NpyError {
        NpyError::File {
            path: path.display().to_string(),
            problem: problem.into(),
        }
    }
}
