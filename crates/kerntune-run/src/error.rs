//! Why a run could not be done. Failures of single configurations are not errors: they
//! are outcomes in the summary.

use kerntune_engine::{BackendError, SearchOptionsError, TuneError};
use kerntune_store::StoreError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No driver, or the GPU asked for cannot be opened.
    #[error("{0}")]
    NoGpu(String),
    /// A tool the run needs (NVRTC) is missing, or rejects the run's settings.
    #[error("{0}")]
    Toolchain(String),
    #[error("no configuration satisfies the restrictions")]
    EmptySpace,
    #[error("--arch {0:?} is not an NVIDIA architecture: give one like sm_90 (or sm_90a)")]
    Arch(String),
    #[error("no configuration compiled for {arch}: {reason}")]
    NothingCompiled { arch: String, reason: String },
    #[error(transparent)]
    Search(#[from] SearchOptionsError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// The GPU pipeline (or the simulation) could not go on.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The compile pool of a compile-only run could not go on.
    #[error("{0}")]
    Compile(String),
    /// A setting of the run that cannot be used (named in the message).
    #[error("{0}")]
    Setting(String),
}
