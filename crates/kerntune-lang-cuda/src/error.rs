//! Why a CUDA C configuration cannot launch on a device, by kind: known before compiling,
//! and recorded as the configuration's `invalid_config` ([`LanguageError::InvalidConfig`]).

use kerntune_pipeline::LanguageError;

/// A limit of the device that a configuration's launch exceeds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    #[error("{threads} threads per block; the device allows {allowed}")]
    Threads { threads: u64, allowed: i32 },
    #[error("{bytes} bytes of dynamic shared memory per block; the device allows {allowed}")]
    SharedMemory { bytes: u32, allowed: i32 },
}

impl From<LimitError> for LanguageError {
    fn from(error: LimitError) -> LanguageError {
        LanguageError::InvalidConfig(error.to_string())
    }
}
