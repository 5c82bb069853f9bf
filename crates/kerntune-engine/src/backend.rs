//! The contract between the engine and whatever turns configurations into evaluations:
//! a real GPU pipeline, or a recorded landscape.

use std::time::Duration;

use kerntune_space::ConfigId;
use kerntune_store::Evaluation;

/// Evaluates configurations, possibly several at once (a compile pool ahead of the GPU).
///
/// A configuration that fails (does not compile, crashes, is wrong) is an [`Evaluation`]
/// with a failed status, not an error: `Err` means the backend itself cannot go on.
pub trait Backend {
    /// How many configurations the backend wants in flight to stay busy.
    fn capacity(&self) -> usize {
        1
    }

    /// Starts evaluating a configuration.
    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError>;

    /// Waits for the next finished evaluation. Called only while something is in flight.
    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError>;

    /// Time spent since the backend started: simulated time for a landscape, wall time for
    /// a device. Time budgets compare against this clock.
    fn elapsed(&self) -> Duration;
}

/// The backend cannot continue (its device is gone, its worker cannot start...).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);
