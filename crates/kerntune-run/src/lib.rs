//! One kerntune run, end to end, for every front.
//!
//! The CLI and the Python extension parse what the user asked for, call this crate, and
//! render what it returns; neither assembles a run itself.
//!
//! - [`Tuning`] tunes a kernel of any [`kerntune_pipeline::Language`] on one GPU or
//!   several of one model ([`Devices`]): pre-flight
//!   checks ([`Tuning::prepare`]), the results store, the search settings
//!   ([`kerntune_engine::SearchOptions`]) turned into a strategy and a budget, the tuner
//!   over the GPU pipeline, the schedule stage and its artefact, and the [`RunSummary`].
//! - [`CompileOnly`] compiles every configuration for an architecture with no GPU, keeping
//!   the cubins in the store and resuming where an earlier run stopped.
//! - [`Simulation`] replays a recorded landscape as if it were a device.
//! - [`report`] turns summaries into the text and the JSON the fronts print.

mod compile_only;
mod devices;
mod error;
mod gpu;
pub mod report;
mod simulate;
mod summary;
pub mod vetting;

pub use compile_only::{Compilation, CompileOnly, CompileReport, CompiledConfig};
pub use devices::Devices;
pub use error::RunError;
pub use gpu::{schedule_stage, Prepared, Progress, Tuning, Workers};
pub use simulate::{Simulation, SimulationSummary};
pub use summary::{BestSummary, Finalists, Pareto, ParetoPoint, ResultRow, RunSummary};

/// Compile workers when the caller names no number: one per core.
pub fn default_compile_workers() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get())
}
