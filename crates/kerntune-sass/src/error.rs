//! The one error type of the crate.

use std::path::PathBuf;

use crate::moves::{Move, Refusal};

/// Everything that can go wrong while reading, analysing or rewriting a cubin.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SassError {
    /// The bytes are not an ELF file this crate understands.
    #[error("not a CUDA cubin: {reason}")]
    NotACubin { reason: String },

    /// The ELF structure is inconsistent (an offset or size points outside the file).
    #[error("malformed cubin: {reason}")]
    MalformedCubin { reason: String },

    /// The requested kernel has no `.text.<kernel>` section.
    #[error("no kernel named `{kernel}` in the cubin (kernels: {available})")]
    KernelNotFound { kernel: String, available: String },

    /// The kernel uses a feature whose instruction offsets this crate cannot keep
    /// consistent, so no schedule of it may be rewritten.
    #[error("kernel `{kernel}` cannot be rescheduled: {reason}")]
    Unsupported { kernel: String, reason: String },

    /// No nvdisasm binary was found.
    #[error(
        "nvdisasm not found; set KERNTUNE_NVDISASM, put it on PATH, set CUDA_HOME, \
         or `pip install triton` (searched: {searched})"
    )]
    NvdisasmNotFound { searched: String },

    /// nvdisasm could not be started or failed on an input.
    #[error("nvdisasm ({path}) failed: {reason}")]
    NvdisasmFailed { path: PathBuf, reason: String },

    /// nvdisasm printed something this crate cannot read.
    #[error("cannot parse nvdisasm output for kernel `{kernel}` at line {line}: {reason}")]
    DisassemblyParse { kernel: String, line: usize, reason: String },

    /// nvdisasm and the ELF bytes disagree about the kernel's instructions.
    #[error("nvdisasm listing of `{kernel}` does not match its .text bytes: {reason}")]
    ListingMismatch { kernel: String, reason: String },

    /// A move was asked for that the legality rules forbid.
    #[error("illegal move {requested}: {refusal}")]
    IllegalMove { requested: Move, refusal: Refusal },

    /// A rewritten cubin is not the intended permutation of the original.
    #[error("rewritten kernel `{kernel}` is not the intended permutation: {reason}")]
    VerificationFailed { kernel: String, reason: String },

    /// A temporary file for nvdisasm could not be written.
    #[error("cannot write a temporary cubin for nvdisasm: {0}")]
    TempFile(#[source] std::io::Error),

    /// The objective of a schedule search failed (not a failed verification,
    /// which the objective reports as `Ok(None)`).
    #[error("schedule objective failed: {0}")]
    Objective(String),
}
