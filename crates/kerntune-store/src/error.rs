//! Errors of the store and of the file formats, each naming the file concerned.

use kerntune_space::SpaceError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not valid JSON ({message})")]
    Json { path: String, message: String },
    #[error("{path}: {message}")]
    Format { path: String, message: String },
    #[error("results database {path}: {source}")]
    Database { path: String, source: rusqlite::Error },
    /// The database file cannot be opened or created, with the system's reason (SQLite's
    /// own says only "unable to open database file").
    #[error("results database {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("{path}: {source}")]
    Space { path: String, source: SpaceError },
}

impl StoreError {
    pub(crate) fn format(path: &str, message: impl Into<String>) -> StoreError {
        StoreError::Format { path: path.to_string(), message: message.into() }
    }
}
