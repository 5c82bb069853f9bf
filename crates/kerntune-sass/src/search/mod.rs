//! Searching for a faster schedule over legal moves.
//!
//! A search only ever builds schedules through legal moves, hands each
//! candidate cubin to a [`ScheduleObjective`] (on a GPU: verify bitwise
//! against the original, then time), and keeps the best. Two strategies:
//! - [`anneal`]: simulated annealing as in the SIP paper, with a configurable
//!   schedule (initial temperature, cooling factor, steps);
//! - [`hill_climb`]: greedy first-improvement hill climbing with random
//!   restarts from the best schedule found, perturbed by a few random moves.
//!
//! Both are deterministic for a seed (given a deterministic objective) and
//! never evaluate the same cubin twice.

mod annealing;
mod hill_climb;

use std::collections::HashMap;

use serde::Serialize;

use crate::error::SassError;
use crate::moves::Move;
use crate::schedule::Schedule;

pub use annealing::{anneal, AnnealingOptions};
pub use hill_climb::{hill_climb, HillClimbOptions};

/// Scores a candidate cubin; lower is better (typically the median time).
pub trait ScheduleObjective {
    /// `Ok(None)` when the candidate failed verification (its outputs differ
    /// from the original kernel's); `Err` when the objective itself broke.
    fn evaluate(&mut self, cubin: &[u8]) -> Result<Option<f64>, SassError>;
}

impl<F> ScheduleObjective for F
where
    F: FnMut(&[u8]) -> Result<Option<f64>, SassError>,
{
    fn evaluate(&mut self, cubin: &[u8]) -> Result<Option<f64>, SassError> {
        self(cubin)
    }
}

/// One evaluated candidate, in the order the search evaluated them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evaluation {
    /// The candidate's energy; `None` if it failed verification.
    pub energy: Option<f64>,
    /// Whether the search moved to this candidate.
    pub accepted: bool,
}

/// How many of the best candidates a search keeps for a second look (see
/// [`SearchOutcome::leaders`]).
pub const LEADERS: usize = 16;

/// A verified candidate schedule the search evaluated.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub cubin: Vec<u8>,
    pub energy: f64,
    /// The moves that turn the original into this schedule.
    pub moves: Vec<Move>,
    /// `permutation[k]` = original position of the instruction at `k`.
    pub permutation: Vec<usize>,
}

/// What a search found.
#[derive(Clone, Debug)]
pub struct SearchOutcome {
    /// The best cubin found (the original if nothing beat it).
    pub best_cubin: Vec<u8>,
    /// Its energy.
    pub best_energy: f64,
    /// The original's energy.
    pub baseline_energy: f64,
    /// The moves that turn the original into the best schedule.
    pub best_moves: Vec<Move>,
    /// `best_permutation[k]` = original position of the instruction at `k`.
    pub best_permutation: Vec<usize>,
    /// Every evaluation, in order (the baseline not included).
    pub evaluations: Vec<Evaluation>,
    /// The best verified candidates other than the original, fastest first, at most
    /// [`LEADERS`]. Each energy is one noisy measurement, so the search's best is often a
    /// lucky sample: measuring the leaders again picks the winner more reliably.
    pub leaders: Vec<Candidate>,
}

impl SearchOutcome {
    /// How many candidates failed verification.
    pub fn failed_verifications(&self) -> usize {
        self.evaluations.iter().filter(|e| e.energy.is_none()).count()
    }
}

/// Evaluates cubins through the objective at most once each, and tracks the best.
struct Evaluator<'o, O: ScheduleObjective> {
    objective: &'o mut O,
    cache: HashMap<Vec<u8>, Option<f64>>,
    evaluations: Vec<Evaluation>,
    original: Candidate,
    /// Verified candidates other than the original, fastest first (the first seen among
    /// equals), at most [`LEADERS`]: the first is the best unless the original is.
    leaders: Vec<Candidate>,
    /// Whether the last `energy` call ran the objective (rather than the cache).
    last_was_fresh: bool,
}

impl<'o, O: ScheduleObjective> Evaluator<'o, O> {
    /// Evaluates the original schedule, which must pass verification.
    fn new(objective: &'o mut O, original: &Schedule) -> Result<Self, SassError> {
        let cubin = original.to_cubin()?;
        let energy = objective
            .evaluate(&cubin)?
            .ok_or_else(|| SassError::Objective("the original schedule failed verification".into()))?;
        let mut cache = HashMap::new();
        cache.insert(cubin.clone(), Some(energy));
        let original = Candidate { cubin, energy, moves: Vec::new(), permutation: original.permutation() };
        Ok(Evaluator {
            objective,
            cache,
            evaluations: Vec::new(),
            original,
            leaders: Vec::new(),
            last_was_fresh: false,
        })
    }

    /// The energy of a schedule; `None` if it failed verification. Records the
    /// evaluation (as not accepted) only when the objective actually ran.
    fn energy(&mut self, schedule: &Schedule) -> Result<Option<f64>, SassError> {
        let cubin = schedule.to_cubin()?;
        self.last_was_fresh = false;
        if let Some(&known) = self.cache.get(&cubin) {
            return Ok(known);
        }
        self.last_was_fresh = true;
        let energy = self.objective.evaluate(&cubin)?;
        self.evaluations.push(Evaluation { energy, accepted: false });
        if let Some(value) = energy {
            let place = self.leaders.partition_point(|leader| leader.energy <= value);
            if place < LEADERS {
                let leader = Candidate {
                    cubin: cubin.clone(),
                    energy: value,
                    moves: schedule.applied().to_vec(),
                    permutation: schedule.permutation(),
                };
                self.leaders.insert(place, leader);
                self.leaders.truncate(LEADERS);
            }
        }
        self.cache.insert(cubin, energy);
        Ok(energy)
    }

    /// Marks the last evaluation as accepted, if the last candidate was new.
    fn accept_last(&mut self) {
        if !self.last_was_fresh {
            return;
        }
        if let Some(last) = self.evaluations.last_mut() {
            last.accepted = true;
        }
    }

    /// The original's energy.
    fn baseline(&self) -> f64 {
        self.original.energy
    }

    fn finish(self) -> SearchOutcome {
        let baseline_energy = self.original.energy;
        let best = match self.leaders.first() {
            Some(leader) if leader.energy < baseline_energy => leader.clone(),
            _ => self.original,
        };
        SearchOutcome {
            best_cubin: best.cubin,
            best_energy: best.energy,
            baseline_energy,
            best_moves: best.moves,
            best_permutation: best.permutation,
            evaluations: self.evaluations,
            leaders: self.leaders,
        }
    }
}
