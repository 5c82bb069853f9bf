//! Why the device layer cannot do what it was asked, by kind, with the user's words in the
//! message: an architecture that is not one ([`DeviceError`]), a buffer's data that cannot
//! be made ([`DataError`]). The driver's own failures are [`crate::driver::CudaError`];
//! NVRTC's refusal of ptxas flags is [`crate::nvrtc::FlagsError`]; an unusable ptxas is
//! [`crate::ptxas::PtxasError`].

use kerntune_space::Setting;

/// A failure of the device layer outside the driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The architecture asked for (`sm_9x`) names no NVIDIA architecture.
    #[error("{} is not an NVIDIA architecture: give one like sm_90 (or sm_90a)", Setting::ARCH.with(format!("{:?}", .0)))]
    NotAnArch(String),
}

/// Why a buffer's contents, or a scalar's bytes, cannot be made: the file, and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// The file cannot be read.
    #[error("{file}: {reason}")]
    Unreadable { file: String, reason: String },
    #[error("{0}: not a .npy file")]
    NotNpy(String),
    #[error("{0}: truncated header")]
    TruncatedHeader(String),
    #[error("{0}: .npy has no bfloat16 type; use a raw initialiser")]
    NoBfloat16(String),
    #[error("{file}: element type is not {expected} (header {header})")]
    ElementType { file: String, expected: &'static str, header: String },
    #[error("{0}: Fortran order is not supported; save a C-contiguous array")]
    FortranOrder(String),
    /// A `.npy` file with another number of elements than the argument's.
    #[error("{file}: holds {holds} elements, the argument needs {needs}")]
    Elements { file: String, holds: usize, needs: usize },
    /// A raw file with another number of bytes than the argument's.
    #[error("{file}: holds {holds} bytes, the argument needs {needs}")]
    Bytes { file: String, holds: usize, needs: usize },
    /// A scalar argument's value that is not a number.
    #[error("{0} is not a number")]
    NotANumber(String),
}
