//! Why a Triton configuration cannot launch on a device, by kind: recorded as the
//! configuration's `invalid_config` ([`LanguageError::InvalidConfig`]).

use kerntune_pipeline::LanguageError;

/// A Triton configuration's launch that the device cannot make.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    #[error("num_warps = {num_warps} is {threads} threads; the device allows {allowed} per block")]
    Warps { num_warps: i64, threads: i64, allowed: i32 },
    #[error("num_ctas = {0} needs thread-block clusters (sm_90 or newer)")]
    Clusters(i64),
    #[error("the Triton compile worker sent no launch information")]
    NoLaunchInfo,
    #[error("grid overflow")]
    GridOverflow,
    #[error("grid {axis} = {programs} is outside 1..={limit}")]
    Grid { axis: char, programs: u64, limit: u64 },
    /// The front's grid or descriptor function refused the configuration: its reason.
    #[error("{0}")]
    Front(String),
    /// The configuration's compiler controls cannot be read.
    #[error("{0}")]
    Controls(String),
}

impl From<LaunchError> for LanguageError {
    fn from(error: LaunchError) -> LanguageError {
        LanguageError::InvalidConfig(error.to_string())
    }
}
