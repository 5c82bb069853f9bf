//! kerntune's device layer: what touches one GPU, and nothing about tuning.
//!
//! [`driver`] is a thin safe layer over the CUDA driver (contexts, modules, buffers,
//! events) that every `unsafe` call goes through; [`nvrtc`] compiles CUDA C to a cubin on
//! the CPU, and [`ptxas`] assembles PTX with a ptxas the user chose; [`data`] makes the host contents of buffers (element types, seeded fills);
//! [`draw`] draws random inputs on the GPU itself;
//! [`DeviceError`] says why the layer cannot do what it was asked, by kind.
//! [`wheels`] finds NVIDIA's pip wheels in the Python environment kerntune is installed in;
//! [`verify`] compares a kernel's outputs with the reference's on the GPU; [`tensor_map`]
//! encodes Hopper's TMA descriptors over device buffers; [`nvml`] reads
//! clocks, temperature, power and throttle reasons. The driver, NVRTC and NVML are loaded
//! when first used, so a machine without them still runs everything that needs none of
//! them: [`driver_available`] and [`nvrtc_available`] probe first, and [`nvml::nvml`] is
//! `None`.

pub mod data;
pub mod draw;
pub mod driver;
mod error;
pub mod nvml;
pub mod nvrtc;
pub mod ptxas;
mod target;
pub mod tensor_map;
pub mod verify;
pub mod wheels;

pub use data::{f16_to_f32, f32_to_bf16, f32_to_f16, fill, scalar_bytes, DType, Init};
pub use driver::{driver_available, DeviceInfo, FunctionAttributes};
pub use error::{DataError, DeviceError};
pub use nvrtc::nvrtc_available;
pub use tensor_map::{TensorMap, TensorMapSpec};
