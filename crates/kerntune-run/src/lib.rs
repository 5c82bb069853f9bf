//! One kerntune run, end to end, for every front.
//!
//! The CLI and the Python extension parse what the user asked for, call this crate, and
//! render what it returns; neither assembles a run itself.
//!
//! - [`Request`] is what a user asks of a run besides the kernel, every default applied
//!   there; each front builds one from its arguments ([`Front`] names where they differ).
//! - [`Tuning`] tunes a kernel of any [`kerntune_pipeline::Language`] on one GPU or
//!   several of one model ([`Devices`]): pre-flight
//!   checks ([`Tuning::prepare`]), the results store, the search settings
//!   ([`kerntune_engine::SearchOptions`]) turned into a strategy and a budget, the tuner
//!   over the GPU pipeline, the schedule stage and its artefact, and the [`RunSummary`].
//! - [`CompileOnly`] compiles every configuration for an architecture with no GPU, keeping
//!   the cubins in the store and resuming where an earlier run stopped.
//! - [`Simulation`] replays a recorded landscape as if it were a device.
//! - [`Forecast`] gives the pace of a long brute force, for fronts to say how long it takes.
//! - [`report`] turns summaries into the text and the JSON the fronts print.

mod compile_only;
mod devices;
mod error;
mod forecast;
mod gpu;
pub mod report;
mod request;
mod shapes;
mod simulate;
mod summary;
pub mod vetting;

pub use compile_only::{Compilation, CompileOnly, CompileReport, CompiledConfig};
pub use devices::Devices;
pub use error::{NoGpu, RunError};
pub use forecast::{duration_words, Forecast, Pace, LONG_SEARCH};
pub use gpu::{schedule_stage, start_crew, Prepared, Progress, Tuning, Workers};
pub use request::{Front, Request};
pub use shapes::{check_shapes, shape_label, shapes_table, Shape, ShapeRow, ShapesError, Transfer, TunedShape};
pub use simulate::{Simulation, SimulationSummary};
pub use summary::{BestSummary, Finalists, Pareto, ParetoPoint, ResultRow, RunSummary};

/// Compile workers when the caller names no number: one per core.
pub fn default_compile_workers() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get())
}

/// A run with an evaluation budget keeps at most this share of it in flight (one sixth:
/// about six rounds of feedback for the search).
const FEEDBACK_ROUNDS: usize = 6;

/// Compiles in flight that a run with an evaluation budget may always have: the batch size
/// `default` was fitted and compared at (docs/strategies.md, "In batches of 16").
const FITTED_DEPTH: usize = 16;

/// Compile workers of a GPU tuning when the caller names no number, out of `cores`.
///
/// One per core, except where the budget is a number of evaluations: every configuration
/// in flight is picked without the results of the others, so a deep pipeline spends a small
/// budget on blind picks. Such a run keeps at most a sixth of its budget in flight, never
/// less than [`FITTED_DEPTH`] compiles plus the GPUs' two slots each. Runs without an
/// evaluation budget (brute force, a time limit, a run that stops by itself) use every core:
/// there a deeper pipeline evaluates more. docs/design-notes.md, "Compile workers against
/// the budget", has the measurements.
pub fn tuning_compile_workers(budget: &kerntune_engine::Budget, gpus: usize, cores: usize) -> usize {
    let slots = 2 * gpus;
    let limit = budget.max_fevals.map_or(usize::MAX, |max| (FITTED_DEPTH + slots).max(max.div_ceil(FEEDBACK_ROUNDS)));
    cores.min(limit.saturating_sub(slots)).max(1)
}

#[cfg(test)]
mod tests {
    use kerntune_engine::Budget;

    use super::tuning_compile_workers;

    fn evaluations(max_fevals: usize) -> Budget {
        Budget { max_fevals: Some(max_fevals), ..Budget::default() }
    }

    #[test]
    fn a_small_evaluation_budget_keeps_the_pipeline_at_the_fitted_depth_on_large_hosts() {
        assert_eq!(tuning_compile_workers(&evaluations(100), 1, 32), 16);
        assert_eq!(tuning_compile_workers(&evaluations(100), 2, 32), 16);
        assert_eq!(tuning_compile_workers(&evaluations(25), 1, 64), 16);
        // A sixth of the budget, less the GPU's two slots.
        assert_eq!(tuning_compile_workers(&evaluations(150), 1, 32), 23);
        assert_eq!(tuning_compile_workers(&evaluations(200), 1, 32), 32);
        assert_eq!(tuning_compile_workers(&evaluations(1000), 1, 256), 165);
        assert_eq!(tuning_compile_workers(&evaluations(1000), 1, 128), 128);
    }

    #[test]
    fn small_hosts_and_runs_without_an_evaluation_budget_use_every_core() {
        assert_eq!(tuning_compile_workers(&evaluations(100), 1, 16), 16);
        assert_eq!(tuning_compile_workers(&evaluations(100), 1, 2), 2);
        let unbounded = Budget::default();
        assert_eq!(tuning_compile_workers(&unbounded, 1, 32), 32);
        let timed = Budget { time_limit: Some(std::time::Duration::from_secs(6)), ..Budget::default() };
        assert_eq!(tuning_compile_workers(&timed, 2, 64), 64);
    }
}
