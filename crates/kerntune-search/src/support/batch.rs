//! Running a strategy as a sequence of steps, each needing the scores of a set of
//! configurations before the next can be planned (a generation, a ring of neighbours).
//!
//! A [`Stepwise`] strategy only plans steps; the [`Stepper`] that wraps it answers members
//! the history already knows at no cost, hands the new ones out as the engine asks (a
//! whole generation at once keeps a compile pool full; one at a time works as well),
//! waits for their outcomes, and keeps stepping while steps bring nothing new. A strategy
//! whose steps keep landing on known configurations is restarted rather than allowed to
//! stall the run.

use std::collections::{HashMap, HashSet, VecDeque};

use kerntune_space::ConfigId;

use super::fresh::{exhausted, fresh_batch};
use crate::{Context, History, Observation, Strategy};

/// Steps in a row that bring nothing new before the strategy is restarted.
const RESTART_AFTER_IDLE_STEPS: usize = 25;
/// Steps one ask may plan before giving up on the strategy and drawing at random; only
/// reached by a strategy whose restarts also land on known configurations.
const STEPS_PER_ASK: usize = 4 * RESTART_AFTER_IDLE_STEPS;

/// A strategy that plans its search step by step.
pub(crate) trait Stepwise: Send {
    /// The configurations the next step needs scores of, in the strategy's own order;
    /// repeats and configurations already known are allowed. `n` is how many the engine can
    /// start now, a hint for strategies whose step size is free.
    fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId>;

    /// The scores of the last proposal, in its order (`None` for a failed configuration).
    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]);

    /// Many steps brought nothing new: the search has converged; start over somewhere else.
    fn restart(&mut self, context: &mut Context<'_>);
}

/// The configurations of one step and what is known of them.
#[derive(Debug)]
struct Batch {
    members: Vec<ConfigId>,
    scores: HashMap<ConfigId, Option<f64>>,
    queue: VecDeque<ConfigId>,
    waiting: HashSet<ConfigId>,
}

impl Batch {
    fn new(members: Vec<ConfigId>, history: &History) -> Batch {
        let mut batch = Batch { members, scores: HashMap::new(), queue: VecDeque::new(), waiting: HashSet::new() };
        for id in &batch.members {
            if let Some(score) = history.score(*id) {
                batch.scores.insert(*id, score);
            } else if history.is_pending(*id) {
                // Proposed earlier and still in flight: its outcome will be told.
                batch.waiting.insert(*id);
            } else if !batch.waiting.contains(id) && !batch.queue.contains(id) {
                batch.queue.push_back(*id);
            }
        }
        batch
    }

    fn take(&mut self, n: usize) -> Vec<ConfigId> {
        let taken: Vec<ConfigId> = (0..n).map_while(|_| self.queue.pop_front()).collect();
        self.waiting.extend(&taken);
        taken
    }

    fn tell(&mut self, observation: Observation) {
        if self.waiting.remove(&observation.id) {
            self.scores.insert(observation.id, observation.score);
        }
    }

    fn is_complete(&self) -> bool {
        self.queue.is_empty() && self.waiting.is_empty()
    }

    fn scores(&self) -> Vec<Option<f64>> {
        self.members.iter().map(|id| self.scores.get(id).copied().flatten()).collect()
    }
}

/// Drives a [`Stepwise`] strategy through the ask/tell protocol.
#[derive(Debug)]
pub(crate) struct Stepper<S> {
    inner: S,
    batch: Option<Batch>,
    idle_steps: usize,
}

impl<S: Stepwise> Stepper<S> {
    pub(crate) fn new(inner: S) -> Stepper<S> {
        Stepper { inner, batch: None, idle_steps: 0 }
    }
}

impl<S: Stepwise + std::fmt::Debug> Strategy for Stepper<S> {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        for _ in 0..STEPS_PER_ASK {
            if let Some(batch) = &mut self.batch {
                if !batch.queue.is_empty() {
                    return batch.take(n);
                }
                if !batch.is_complete() {
                    return Vec::new();
                }
                let scores = batch.scores();
                let members = std::mem::take(&mut batch.members);
                self.batch = None;
                self.inner.learn(context, &members, &scores);
            }
            if exhausted(context) {
                return Vec::new();
            }
            if self.idle_steps >= RESTART_AFTER_IDLE_STEPS {
                self.inner.restart(context);
                self.idle_steps = 0;
            }
            let batch = Batch::new(self.inner.propose(context, n), context.history);
            self.idle_steps = if batch.queue.is_empty() { self.idle_steps + 1 } else { 0 };
            self.batch = Some(batch);
        }
        fresh_batch(context, n)
    }

    fn tell(&mut self, _context: &mut Context<'_>, observation: Observation) {
        if let Some(batch) = &mut self.batch {
            batch.tell(observation);
        }
    }
}
