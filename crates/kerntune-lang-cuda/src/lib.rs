//! CUDA C on kerntune's GPU pipeline.
//!
//! A [`KernelSpec`] ([`spec`], the `kerntune tune SPEC.toml` file, or the JSON the Python
//! package writes for Kernel Tuner's `tune_kernel`) says what is tuned: the source, the
//! parameters and restrictions, the launch geometry, the arguments, the verification and
//! the timing protocol. [`CudaLanguage`] is its [`kerntune_pipeline::Language`]: each
//! configuration becomes an NVRTC compile job (the parameters as `#define`s) and a launch
//! with the spec's geometry. A configuration beyond the device's limits is a [`LimitError`],
//! known before compiling.

mod error;
mod language;
pub mod spec;

pub use error::LimitError;
pub use language::{check_device_limits, CheckFn, CudaLanguage, Instance, InstanceFn, OutputCheck};
pub use spec::{divided_geometry, KernelSpec, LaunchError, SpecError};
