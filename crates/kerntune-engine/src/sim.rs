//! The simulation backend: a recorded landscape acts as a device. Evaluating a
//! configuration returns its recorded outcome and advances a simulated clock by what the
//! recording says it cost (compile + verify + benchmark + framework time).
//!
//! With a batch of N ([`SimBackend::with_batch`]), N evaluations are in flight at once, as
//! the GPU pipeline keeps its compile pool busy: each starts when a slot frees, finishes
//! its recorded cost later, and evaluations are told back in the order they finish.

use std::time::{Duration, Instant};

use kerntune_space::{ConfigId, Space};
use kerntune_store::{Evaluation, Landscape};

use crate::{Backend, BackendError};

#[derive(Debug)]
pub struct SimBackend<'a> {
    landscape: &'a Landscape,
    /// For each configuration id of the space, its record in the landscape.
    record_of: Vec<usize>,
    /// Evaluations in flight: (simulated finish time, submission number, configuration).
    in_flight: Vec<(Duration, u64, ConfigId)>,
    submitted: u64,
    batch: usize,
    clock: Duration,
    /// Replay the recorded costs in real time, this many times faster.
    realtime_speed: Option<f64>,
    /// In real time, when the wait for the next evaluation began (at `clock`).
    waiting_since: Option<Instant>,
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
        Ok(SimBackend {
            landscape,
            record_of,
            in_flight: Vec::new(),
            submitted: 0,
            batch: 1,
            clock: Duration::ZERO,
            realtime_speed: None,
            waiting_since: None,
        })
    }

    /// `batch` evaluations in flight at once (at least 1, the default).
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    fn evaluation(&self, id: ConfigId) -> Evaluation {
        let mut evaluation = self.landscape.records[self.record_of[id.index()]].evaluation.clone();
        // The recorded strategy time belongs to the recorded run's strategy, not ours.
        evaluation.costs.strategy_s = 0.0;
        evaluation
    }

    /// Sleeps for each evaluation's recorded cost divided by `speed`, so a simulation can be
    /// watched (and interrupted) like a real run.
    pub fn with_realtime_speed(mut self, speed: f64) -> Self {
        self.realtime_speed = Some(speed);
        self
    }
}

impl Backend for SimBackend<'_> {
    fn capacity(&self) -> usize {
        self.batch
    }

    /// Starts an evaluation now (when a slot is free: the engine keeps at most `capacity`
    /// in flight), to finish its recorded cost later.
    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        let known = self.record_of.get(id.index()).is_some_and(|r| *r != usize::MAX);
        if !known {
            return Err(BackendError::UnknownConfig(id));
        }
        let cost = Duration::from_secs_f64(self.evaluation(id).costs.total().max(0.0));
        self.in_flight.push((self.clock + cost, self.submitted, id));
        self.submitted += 1;
        Ok(())
    }

    /// The evaluation that finishes first (the earliest submitted among equals); the clock
    /// moves to its finish.
    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        loop {
            if let Some(finished) = self.next_within(Duration::from_secs(3600))? {
                return Ok(finished);
            }
        }
    }

    /// In real time, sleeps no longer than `patience` at once, so that a front can stop a
    /// replay of evaluations that were recorded as taking seconds each.
    fn next_within(&mut self, patience: Duration) -> Result<Option<(ConfigId, Evaluation)>, BackendError> {
        let first = (0..self.in_flight.len())
            .min_by_key(|i| (self.in_flight[*i].0, self.in_flight[*i].1))
            .ok_or(BackendError::Misuse("nothing is being evaluated"))?;
        let finish = self.in_flight[first].0;
        if let Some(speed) = self.realtime_speed {
            let since = *self.waiting_since.get_or_insert_with(Instant::now);
            let due = since + finish.saturating_sub(self.clock).div_f64(speed);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due.duration_since(now).min(patience));
                if Instant::now() < due {
                    return Ok(None);
                }
            }
            self.waiting_since = None;
        }
        let (_, _, id) = self.in_flight.remove(first);
        self.clock = self.clock.max(finish);
        Ok(Some((id, self.evaluation(id))))
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }
}
