//! The simulation backend: a recorded landscape acts as a device. Evaluating a
//! configuration returns its recorded outcome and advances a simulated clock by what the
//! recording says it cost (compile + verify + benchmark + framework time).

use std::collections::VecDeque;
use std::time::Duration;

use kerntune_space::{ConfigId, Space};
use kerntune_store::{Evaluation, Landscape};

use crate::{Backend, BackendError};

#[derive(Debug)]
pub struct SimBackend<'a> {
    landscape: &'a Landscape,
    /// For each configuration id of the space, its record in the landscape.
    record_of: Vec<usize>,
    queue: VecDeque<ConfigId>,
    clock: Duration,
    /// Replay the recorded costs in real time, this many times faster.
    realtime_speed: Option<f64>,
}

impl<'a> SimBackend<'a> {
    /// A backend over `landscape`, whose configurations `space` must hold (as
    /// [`Landscape::space`] builds it).
    pub fn new(landscape: &'a Landscape, space: &Space) -> Result<SimBackend<'a>, BackendError> {
        let mut record_of = vec![usize::MAX; space.len()];
        for (index, record) in landscape.records.iter().enumerate() {
            let id = space.id_of(&record.config).ok_or_else(|| {
                BackendError::CannotStart("a recorded configuration is missing from the space".into())
            })?;
            // A configuration recorded twice keeps its first record.
            if record_of[id.index()] == usize::MAX {
                record_of[id.index()] = index;
            }
        }
        Ok(SimBackend { landscape, record_of, queue: VecDeque::new(), clock: Duration::ZERO, realtime_speed: None })
    }

    /// Sleeps for each evaluation's recorded cost divided by `speed`, so a simulation can be
    /// watched (and interrupted) like a real run.
    pub fn with_realtime_speed(mut self, speed: f64) -> Self {
        self.realtime_speed = Some(speed);
        self
    }
}

impl Backend for SimBackend<'_> {
    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        let known = self.record_of.get(id.index()).is_some_and(|r| *r != usize::MAX);
        if !known {
            return Err(BackendError::Other(format!("configuration {id} is not in the landscape")));
        }
        self.queue.push_back(id);
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        let id = self.queue.pop_front().ok_or_else(|| BackendError::Other("nothing is being evaluated".into()))?;
        let mut evaluation = self.landscape.records[self.record_of[id.index()]].evaluation.clone();
        // The recorded strategy time belongs to the recorded run's strategy, not ours.
        evaluation.costs.strategy_s = 0.0;
        let cost = Duration::from_secs_f64(evaluation.costs.total().max(0.0));
        self.clock += cost;
        if let Some(speed) = self.realtime_speed {
            std::thread::sleep(cost.div_f64(speed));
        }
        Ok((id, evaluation))
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }
}
