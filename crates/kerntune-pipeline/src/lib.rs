//! kerntune's GPU pipeline: compile workers running ahead of one benchmark worker, in
//! crash-isolated processes, for any kernel language.
//!
//! A [`Pipeline`] is the engine's backend on one GPU or several of one model
//! ([`one_model`]): a pool of compile worker processes
//! ([`pool`]) compiles configurations ahead of one benchmark worker process per GPU
//! ([`run_bench_worker`]), which verifies each kernel on poisoned outputs and times it under
//! the [`Timing`] protocol, taking the samples again when the GPU's clocks moved under them
//! ([`Clocks`]). A worker that crashes or hangs is replaced and costs one
//! configuration. A [`Language`] (implemented by `kerntune-lang-cuda` and
//! `kerntune-lang-triton`) says how a configuration becomes a compile job and how the
//! binary is launched. Workers talk JSON lines ([`protocol`]), so a worker can be any
//! program that speaks it: the `kerntune` binary, or a Python process for Triton.
//! After the search, [`finalists`] times the best few again, interleaved with an A/A
//! control, before one is called the winner; [`schedule`] is the stage after that: the
//! native schedule of the best binary. [`controls`] reads a configuration's compiler
//! controls (ACF files, ptxas knobs) for either language, and runs CompileIQ's search over ACF files
//! ([`controls::tune_controls`]). A configuration that fails is a [`Failure`] of a
//! [`FailureKind`], named on the wire and turned into the store's status in one place; a
//! language says why it cannot do what is asked with a [`LanguageError`].

mod backend;
mod bench;
mod compile;
pub mod controls;
mod crew;
mod early_stop;
mod energy;
mod error;
pub mod finalists;
mod language;
mod memo;
pub mod pool;
pub mod process;
pub mod protocol;
mod sampling;
pub mod schedule;
mod timing;

pub use backend::{one_model, Pipeline, PipelineOptions, Startup};
pub use bench::{refillable, run as run_bench_worker};
pub use compile::run as run_compile_worker;
pub use crew::{Crew, Kept};
pub use early_stop::Bar as EarlyStopBar;
pub use energy::Energy;
pub use error::{CompileError, Death, Exit, Failure, FailureKind, LanguageError, MixedModels, ScheduleError};
pub use language::Language;
pub use pool::Binary;
pub use process::{RayError, RayGpus, RayRelay, WorkerCommand};
pub use protocol::Geometry;
pub use sampling::{ClockSpan, Clocks};
pub use timing::{EarlyStop, EnergyMode, Flush, RawTiming, Timing};
