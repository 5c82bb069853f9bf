//! kerntune's GPU backend for CUDA devices.
//!
//! A [`Pipeline`] is the engine's backend: a [`pool::CompilePool`] of worker processes
//! compiles configurations ahead of one benchmark worker process per GPU, which verifies
//! each kernel against the reference on poisoned outputs and times it with an L2 flush
//! before every launch ([`bench`]). A worker that crashes or hangs is replaced and costs one
//! configuration. A [`Frontend`] supplies the language: [`CudaFrontend`] compiles CUDA C
//! described by a [`kerntune_engine::spec::KernelSpec`] with [`nvrtc`]; the Triton
//! frontend lives in `kerntune-triton`. [`driver`] is the thin safe layer over the driver.

pub mod bench;
pub mod compile;
mod cuda;
pub mod driver;
pub mod nvrtc;
mod pipeline;
pub mod pool;
pub mod process;
pub mod protocol;
pub mod schedule;
pub mod stats;
mod verify;

pub use cuda::{check_device_limits, CheckFn, CudaFrontend, Instance, InstanceFn, OutputCheck};
pub use driver::{driver_available, DeviceInfo};
pub use nvrtc::nvrtc_available;
pub use pipeline::{Frontend, Pipeline, PipelineOptions};
pub use process::WorkerCommand;
