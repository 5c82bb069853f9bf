//! Differential evolution on the unit-cube coordinates of configurations
//! (current-to-best/1/bin), each trial snapped to the nearest valid configuration.
//!
//! A generation of trials is one batch. A trial replaces its target when it is at least as
//! good; a failed trial never does. A trial that snaps back onto its own target is mutated
//! instead, so small differences still explore. The population is re-seeded around the
//! best member when trials keep landing on known configurations.

use kerntune_space::ConfigId;

use crate::support::{cost, fresh_batch, moves, Stepwise};
use crate::{options, Context};

options! {
    /// Options of differential evolution.
    pub struct DiffEvoOptions {
        /// Members of the population; each generation makes one trial per member.
        #[range(min = 1)]
        population_size: usize = 20,
        /// Scale of the difference vectors (F).
        differential_weight: f64 = 0.7,
        /// Chance that a coordinate of a trial comes from the mutant rather than the target (CR).
        #[range(min = 0.0, max = 1.0)]
        crossover_rate: f64 = 0.9,
    }
}

#[derive(Debug)]
pub(crate) struct DiffEvo {
    options: DiffEvoOptions,
    /// Each member's configuration and cost.
    population: Vec<(ConfigId, f64)>,
    reseed: bool,
}

impl DiffEvo {
    pub(crate) fn new(options: DiffEvoOptions) -> DiffEvo {
        DiffEvo { options, population: Vec::new(), reseed: true }
    }

    /// Two distinct members other than `target` (repeats only in a tiny population).
    fn others(&self, context: &mut Context<'_>, target: usize) -> [usize; 2] {
        let size = self.population.len();
        let mut pick = |avoid: &[usize]| {
            (0..4 * size).map(|_| context.rng.below(size)).find(|i| !avoid.contains(i)).unwrap_or(target)
        };
        let first = pick(&[target]);
        let second = pick(&[target, first]);
        [first, second]
    }

    fn trial(&self, context: &mut Context<'_>, target: usize, best: usize) -> ConfigId {
        let space = context.space;
        let x = space.to_unit(self.population[target].0);
        let b = space.to_unit(self.population[best].0);
        let [r1, r2] = self.others(context, target);
        let (y1, y2) = (space.to_unit(self.population[r1].0), space.to_unit(self.population[r2].0));
        let weight = self.options.differential_weight;
        let forced = context.rng.below(x.len().max(1));
        let point: Vec<f64> = (0..x.len())
            .map(|j| {
                if j == forced || context.rng.chance(self.options.crossover_rate) {
                    (x[j] + weight * (b[j] - x[j]) + weight * (y1[j] - y2[j])).clamp(0.0, 1.0)
                } else {
                    x[j]
                }
            })
            .collect();
        let own = self.population[target].0;
        match space.snap(&point) {
            Some(id) if id != own => id,
            _ => moves::mutate(space, context.rng, own, 1.0 / x.len().max(1) as f64),
        }
    }
}

impl Stepwise for DiffEvo {
    fn propose(&mut self, context: &mut Context<'_>, _n: usize) -> Vec<ConfigId> {
        let size = self.options.population_size.max(4);
        if std::mem::take(&mut self.reseed) || self.population.len() < 2 {
            let mut members: Vec<ConfigId> = self.population.first().map(|m| m.0).into_iter().collect();
            members.extend(fresh_batch(context, size - members.len()));
            self.population.clear();
            return members;
        }
        let best = (0..self.population.len())
            .min_by(|a, b| self.population[*a].1.total_cmp(&self.population[*b].1))
            .unwrap_or(0);
        (0..self.population.len()).map(|target| self.trial(context, target, best)).collect()
    }

    fn learn(&mut self, _context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        let outcomes = proposed.iter().zip(scores).map(|(id, score)| (*id, cost(*score)));
        if self.population.is_empty() {
            self.population = outcomes.collect();
            self.population.sort_by(|a, b| a.1.total_cmp(&b.1));
            return;
        }
        for (member, trial) in self.population.iter_mut().zip(outcomes) {
            if trial.1.is_finite() && trial.1 <= member.1 {
                *member = trial;
            }
        }
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.population.sort_by(|a, b| a.1.total_cmp(&b.1));
        self.reseed = true;
    }
}
