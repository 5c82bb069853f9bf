//! Simulated annealing over legal moves, as in the SIP paper.

use serde::{Deserialize, Serialize};

use super::{Evaluator, ScheduleObjective, SearchOutcome};
use crate::error::SassError;
use crate::random::Random;
use crate::schedule::Schedule;
use crate::shuffle::random_legal_move;

/// The annealing schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnnealingOptions {
    /// Initial temperature, relative to the current energy: a candidate that is
    /// worse by a fraction `d` is accepted with probability `exp(-d / T)`.
    pub initial_temperature: f64,
    /// Factor applied to the temperature after every step (0 < cooling <= 1).
    pub cooling: f64,
    /// Number of candidates to evaluate.
    pub steps: usize,
    /// Random legal moves between the current schedule and a candidate.
    pub moves_per_step: usize,
}

impl Default for AnnealingOptions {
    fn default() -> Self {
        AnnealingOptions { initial_temperature: 0.02, cooling: 0.97, steps: 200, moves_per_step: 1 }
    }
}

/// Simulated annealing from `start`. The candidate of each step is the
/// current schedule plus `moves_per_step` random legal moves; it is accepted
/// if better, or if worse with the Metropolis probability; candidates that
/// fail verification are never accepted.
pub fn anneal<O: ScheduleObjective>(
    start: &Schedule,
    objective: &mut O,
    options: &AnnealingOptions,
    seed: u64,
) -> Result<SearchOutcome, SassError> {
    let mut random = Random::seeded(seed);
    let mut evaluator = Evaluator::new(objective, start)?;
    let baseline = evaluator.baseline();
    let mut current = start.clone();
    let mut current_energy = baseline;
    let mut temperature = options.initial_temperature;
    for _ in 0..options.steps {
        let mut candidate = current.clone();
        for _ in 0..options.moves_per_step.max(1) {
            let Some(chosen) = random_legal_move(&candidate, &mut random) else {
                break;
            };
            candidate.apply(&chosen)?;
        }
        let draw = random.unit();
        if let Some(energy) = evaluator.energy(&candidate)? {
            let worse_by = (energy - current_energy) / current_energy.abs().max(f64::MIN_POSITIVE);
            let accept = worse_by <= 0.0 || (temperature > 0.0 && draw < (-worse_by / temperature).exp());
            if accept {
                evaluator.accept_last();
                current = candidate;
                current_energy = energy;
            }
        }
        temperature *= options.cooling;
    }
    Ok(evaluator.finish())
}
