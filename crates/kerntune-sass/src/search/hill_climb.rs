//! Greedy hill climbing with random restarts over legal moves.

use serde::{Deserialize, Serialize};

use super::{Evaluator, ScheduleObjective, SearchOutcome};
use crate::error::SassError;
use crate::random::Random;
use crate::schedule::Schedule;
use crate::shuffle::random_legal_move;

/// The hill-climbing budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HillClimbOptions {
    /// Total candidates to evaluate, over all restarts.
    pub evaluations: usize,
    /// Climbs in all; each after the first starts from the best schedule
    /// found so far, perturbed by `perturbation` random legal moves.
    pub restarts: usize,
    /// Random moves applied at each restart.
    pub perturbation: usize,
    /// A climb stops after this many neighbours in a row did not improve.
    pub patience: usize,
    /// A neighbour replaces the current schedule only if it is better by more
    /// than this fraction, so that timing noise does not drive the climb.
    pub min_improvement: f64,
}

impl Default for HillClimbOptions {
    fn default() -> Self {
        HillClimbOptions { evaluations: 200, restarts: 4, perturbation: 8, patience: 20, min_improvement: 0.005 }
    }
}

/// Hill climbing from `start`: at each step a random legal move is tried and
/// kept if it improves the energy by more than `min_improvement`.
pub fn hill_climb<O: ScheduleObjective>(
    start: &Schedule,
    objective: &mut O,
    options: &HillClimbOptions,
    seed: u64,
) -> Result<SearchOutcome, SassError> {
    let mut random = Random::seeded(seed);
    let mut evaluator = Evaluator::new(objective, start)?;
    let baseline = evaluator.baseline();
    let mut best_schedule = start.clone();
    let mut best_energy = baseline;
    for restart in 0..options.restarts.max(1) {
        if evaluator.evaluations.len() >= options.evaluations {
            break;
        }
        let mut current = best_schedule.clone();
        if restart > 0 {
            for _ in 0..options.perturbation {
                let Some(chosen) = random_legal_move(&current, &mut random) else {
                    break;
                };
                current.apply(&chosen)?;
            }
        }
        let Some(mut current_energy) = evaluator.energy(&current)? else {
            continue;
        };
        let mut stale = 0;
        while stale < options.patience && evaluator.evaluations.len() < options.evaluations {
            let Some(chosen) = random_legal_move(&current, &mut random) else {
                break;
            };
            let mut neighbour = current.clone();
            neighbour.apply(&chosen)?;
            match evaluator.energy(&neighbour)? {
                Some(energy) if energy < current_energy * (1.0 - options.min_improvement) => {
                    evaluator.accept_last();
                    current = neighbour;
                    current_energy = energy;
                    stale = 0;
                }
                _ => stale += 1,
            }
        }
        if current_energy < best_energy {
            best_energy = current_energy;
            best_schedule = current;
        }
    }
    Ok(evaluator.finish())
}
