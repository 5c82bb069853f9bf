//! Why the device layer cannot do what it was asked, by kind, with the user's words in the
//! message. The driver's own failures are [`crate::driver::CudaError`]; NVRTC's refusal of
//! ptxas flags is [`crate::nvrtc::FlagsError`]; an unusable
//! ptxas is [`crate::ptxas::PtxasError`].

use kerntune_space::Setting;

/// A failure of the device layer outside the driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The architecture asked for (`sm_9x`) names no NVIDIA architecture.
    #[error("{} is not an NVIDIA architecture: give one like sm_90 (or sm_90a)", Setting::ARCH.with(format!("{:?}", .0)))]
    NotAnArch(String),
}
