//! Bayesian optimisation with a Gaussian process: the process (Matérn 5/2 over unit-cube
//! coordinates, log-scale targets, failures as the worst observation) is refitted after
//! every evaluation and the candidate with the highest expected improvement is evaluated.
//!
//! Candidates are random configurations of the whole space plus the neighbours of the best
//! ones found. Asked for a batch, it fantasises: each pick is added to the data at its
//! predicted mean before the next is chosen, so a batch spreads out instead of piling up
//! where the first pick was.

use std::collections::HashSet;

use kerntune_space::{ConfigId, Neighbourhood};

use crate::support::{exhausted, fresh, fresh_batch};
use crate::surrogate::gp::Gp;
use crate::surrogate::{expected_improvement, targets};
use crate::{options, Context, Observation, Strategy};

/// Length scales tried at each fit, in units of the cube's side.
const LENGTHS: [f64; 5] = [0.1, 0.2, 0.35, 0.6, 1.0];

options! {
    /// Options of Bayesian optimisation.
    pub struct BayesOptOptions {
        /// Random configurations observed before the model guides the search.
        initial_samples: usize = 10,
        /// Random configurations of the whole space scored at each step.
        random_candidates: usize = 500,
        /// Best configurations whose neighbours (one parameter changed) are also scored.
        parents: usize = 3,
        /// Observations the process is fitted to at most (the best half and the most recent
        /// half): fitting costs the cube of this number.
        max_observations: usize = 150,
    }
}

#[derive(Debug)]
pub(crate) struct BayesOpt {
    options: BayesOptOptions,
}

impl BayesOpt {
    pub(crate) fn new(options: BayesOptOptions) -> BayesOpt {
        BayesOpt { options }
    }

    /// Which observations (indexes into `targets`) the process is fitted to.
    fn kept(&self, targets: &[f64]) -> Vec<usize> {
        let limit = self.options.max_observations.max(2);
        if targets.len() <= limit {
            return (0..targets.len()).collect();
        }
        let mut by_target: Vec<usize> = (0..targets.len()).collect();
        by_target.sort_by(|a, b| targets[*a].total_cmp(&targets[*b]));
        let mut kept: Vec<usize> = by_target[..limit / 2].to_vec();
        kept.sort_unstable();
        let recent = (0..targets.len())
            .rev()
            .filter(|i| kept.binary_search(i).is_err())
            .take(limit - kept.len())
            .collect::<Vec<_>>();
        kept.extend(recent);
        kept
    }

    fn candidates(&self, context: &mut Context<'_>) -> Vec<ConfigId> {
        let history = context.history;
        let mut ranked: Vec<Observation> =
            history.observations().iter().filter(|o| o.score.is_some()).copied().collect();
        ranked.sort_by(|a, b| a.score.unwrap_or(f64::INFINITY).total_cmp(&b.score.unwrap_or(f64::INFINITY)));
        let mut seen = HashSet::new();
        let mut candidates = Vec::new();
        for parent in ranked.iter().take(self.options.parents) {
            for id in context.space.neighbours(parent.id, Neighbourhood::Hamming) {
                if !history.is_known(id) && seen.insert(id) {
                    candidates.push(id);
                }
            }
        }
        for _ in 0..self.options.random_candidates {
            match fresh(context, &[]) {
                Some(id) if seen.insert(id) => candidates.push(id),
                Some(_) => {}
                None => break,
            }
        }
        candidates
    }
}

impl Strategy for BayesOpt {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        if exhausted(context) || n == 0 {
            return Vec::new();
        }
        let history = context.history;
        let valid = history.observations().iter().filter(|o| o.score.is_some()).count();
        if history.len() < self.options.initial_samples || valid < 2 {
            return fresh_batch(context, n);
        }
        let (ids, targets) = targets(history);
        let best = ids
            .iter()
            .zip(&targets)
            .filter(|(id, _)| history.score(**id).flatten().is_some())
            .map(|(_, target)| *target)
            .fold(f64::INFINITY, f64::min);
        let kept = self.kept(&targets);
        let space = context.space;
        let mut points: Vec<Vec<f64>> = kept.iter().map(|i| space.to_unit(ids[*i])).collect();
        let mut targets: Vec<f64> = kept.iter().map(|i| targets[*i]).collect();
        let mut candidates: Vec<(ConfigId, Vec<f64>)> =
            self.candidates(context).into_iter().map(|id| (id, space.to_unit(id))).collect();
        let mut batch = Vec::with_capacity(n);
        let mut lengths = LENGTHS.to_vec();
        while batch.len() < n && !candidates.is_empty() {
            let Some(gp) = Gp::fit(points.clone(), &targets, &lengths) else { break };
            // Fantasies do not change how smooth the objective is: keep the length scale.
            lengths = vec![gp.length()];
            let scores: Vec<f64> = candidates
                .iter()
                .map(|(_, point)| {
                    let (mean, deviation) = gp.predict(point);
                    expected_improvement(best, mean, deviation)
                })
                .collect();
            let pick = (0..candidates.len()).fold(0, |top, i| if scores[i] > scores[top] { i } else { top });
            let (id, point) = candidates.swap_remove(pick);
            batch.push(id);
            if batch.len() < n {
                targets.push(gp.predict(&point).0);
                points.push(point);
            }
        }
        batch
    }

    fn tell(&mut self, _context: &mut Context<'_>, _observation: Observation) {}
}
