//! Simulated annealing over a neighbourhood: a random neighbour replaces the current
//! configuration when it is better, or with a chance that shrinks with how much worse it is
//! (relative to the current score) and with the temperature.
//!
//! With room for `n` evaluations, `n` distinct neighbours are tried at once and judged in
//! order. A failed neighbour is never accepted. Once the temperature has cooled below its
//! floor the search reheats from the best configuration found, instead of stopping.

use kerntune_space::{ConfigId, Neighbourhood};

use crate::options::Neighbours;
use crate::support::{cost, fresh, metropolis, Stepwise};
use crate::{options, Context};

options! {
    /// Options of simulated annealing.
    pub struct SimulatedAnnealingOptions {
        /// Temperature at the start and after each reheat, in units of relative score change.
        start_temperature: f64 = 0.5,
        /// Factor applied to the temperature after each evaluation.
        cooling: f64 = 0.98,
        /// Below this temperature the search reheats from the best configuration.
        min_temperature: f64 = 0.005,
        /// Which configurations count as neighbours.
        neighbourhood: Neighbours = Neighbours::Hamming,
    }
}

#[derive(Debug)]
pub(crate) struct SimulatedAnnealing {
    options: SimulatedAnnealingOptions,
    temperature: f64,
    current: Option<(ConfigId, f64)>,
    best: Option<(ConfigId, f64)>,
}

impl SimulatedAnnealing {
    pub(crate) fn new(options: SimulatedAnnealingOptions) -> SimulatedAnnealing {
        let temperature = options.start_temperature;
        SimulatedAnnealing { options, temperature, current: None, best: None }
    }
}

impl Stepwise for SimulatedAnnealing {
    fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        let Some((current, _)) = self.current else {
            return fresh(context, &[]).into_iter().collect();
        };
        let mut neighbours = context.space.neighbours(current, Neighbourhood::from(self.options.neighbourhood));
        context.rng.shuffle(&mut neighbours);
        let history = context.history;
        let unknown: Vec<ConfigId> =
            neighbours.iter().copied().filter(|id| !history.is_known(*id)).take(n.max(1)).collect();
        if unknown.is_empty() {
            // Every neighbour is known: a free move among them keeps the walk going.
            neighbours.truncate(1);
            return neighbours;
        }
        unknown
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        for (id, score) in proposed.iter().zip(scores) {
            let value = cost(*score);
            if self.best.is_none_or(|b| value < b.1) {
                self.best = Some((*id, value));
            }
            let accepted = match self.current {
                None => true,
                Some((_, current)) => metropolis(context.rng, value, current, self.temperature),
            };
            if accepted {
                self.current = Some((*id, value));
            }
            self.temperature *= self.options.cooling;
            if self.temperature < self.options.min_temperature {
                self.temperature = self.options.start_temperature;
                self.current = self.best;
            }
        }
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.current = None;
        self.temperature = self.options.start_temperature;
    }
}
