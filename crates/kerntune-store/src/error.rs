//! Errors of the store and of the file formats, each naming the file concerned.

use kerntune_space::{Setting, SpaceError};

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
    /// No tuning (of the kernel asked for) in the database.
    #[error("{path}: no tuning{} to export", kernel.as_ref().map(|k| format!(" of kernel '{k}'")).unwrap_or_default())]
    NoTuning { path: String, kernel: Option<String> },
    /// Several tunings where one was asked for: the kernels they tuned.
    #[error("{path} holds {count} tunings; choose one with {} ({kernels})", Setting::KERNEL)]
    SeveralTunings { path: String, count: usize, kernels: String },
}

impl StoreError {
    pub(crate) fn format(path: &str, message: impl Into<String>) -> StoreError {
        StoreError::Format { path: path.to_string(), message: message.into() }
    }
}
