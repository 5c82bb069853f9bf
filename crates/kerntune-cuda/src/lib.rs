//! kerntune's CUDA backend.
//!
//! [`CudaBackend`] implements the engine's backend for CUDA C kernels described by a
//! [`kerntune_engine::spec::KernelSpec`]: a [`pool::CompilePool`] of NVRTC worker processes
//! compiles configurations to cubins ahead of one benchmark worker process per GPU, which
//! verifies each kernel against the reference on poisoned outputs and times it with an L2
//! flush before every launch ([`bench`]). A worker that crashes or hangs is replaced and
//! costs one configuration. [`driver`] is the thin safe layer over the CUDA driver;
//! [`nvrtc`] compiles without a GPU.

mod backend;
pub mod bench;
pub mod compile;
pub mod driver;
pub mod nvrtc;
pub mod pool;
pub mod process;
pub mod protocol;
pub mod stats;
mod verify;

pub use backend::{CudaBackend, CudaOptions};
pub use driver::{driver_available, DeviceInfo};
pub use nvrtc::nvrtc_available;
pub use process::WorkerCommand;
