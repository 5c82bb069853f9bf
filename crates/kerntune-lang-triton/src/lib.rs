//! Tuning Triton kernels on kerntune's GPU pipeline.
//!
//! The Python package describes a tuning as a [`TritonJob`]: the kernel's arguments (device
//! buffers filled from the user's tensors, scalars packed as Triton's launcher packs them,
//! constexpr parameters), the expected outputs, the timing protocol and the compile worker
//! to start. [`TritonLanguage`] turns configurations into compile jobs for that worker
//! (constexprs and compile options) and launches what it compiled with Triton's ABI: the
//! non-constexpr arguments the compiled kernel kept, then its scratch pointers, 32 ×
//! `num_warps` threads, the metadata's dynamic shared memory, and clusters of `num_ctas`; a
//! configuration that cannot launch so is a [`LaunchError`].

mod error;
mod job;
mod language;

pub use error::LaunchError;
pub use job::{
    is_compilers_choice, is_control_option, option_default, ChosenPtxas, JobError, ObjectiveSpec, ReferenceOutput,
    TritonArg, TritonJob, OPTION_NAMES,
};
pub use language::{DescriptorFn, GridFn, TritonLanguage};
