//! A genetic algorithm over value indexes: tournament selection, uniform crossover,
//! per-parameter mutation, elitism, and children kept distinct from what is known.
//!
//! Each generation is one batch, so a compile pool gets a whole generation at once.
//! Failed configurations rank below every valid one, so selection steers away from the
//! regions where builds fail. When the population has converged (children keep landing on
//! known configurations) the population is re-seeded at random around the elites.

use kerntune_space::ConfigId;

use crate::support::{cost, fresh_batch, moves, Stepwise};
use crate::{options, Context};

options! {
    /// Options of the genetic algorithm.
    pub struct GeneticAlgorithmOptions {
        /// Individuals per generation.
        #[range(min = 1)]
        population_size: usize = 20,
        /// Chance that each parameter of a child takes a random other value.
        #[range(min = 0.0, max = 1.0)]
        mutation_rate: f64 = 0.1,
        /// Best individuals carried unchanged into the next generation.
        elites: usize = 2,
        /// Individuals compared in each tournament that picks a parent.
        tournament_size: usize = 2,
        /// Attempts at making a child that is not already known, before accepting a known one.
        distinct_attempts: usize = 5,
    }
}

#[derive(Debug)]
pub(crate) struct GeneticAlgorithm {
    options: GeneticAlgorithmOptions,
    /// The current generation with its costs, best first.
    population: Vec<(ConfigId, f64)>,
    /// The next generation is the elites plus random newcomers (at the start, and after
    /// the population converged).
    reseed: bool,
}

impl GeneticAlgorithm {
    pub(crate) fn new(options: GeneticAlgorithmOptions) -> GeneticAlgorithm {
        GeneticAlgorithm { options, population: Vec::new(), reseed: true }
    }

    fn tournament(&self, context: &mut Context<'_>) -> ConfigId {
        let size = self.population.len();
        let winner = (0..self.options.tournament_size.max(1)).map(|_| context.rng.below(size)).min().unwrap_or(0);
        self.population[winner].0
    }

    fn child(&self, context: &mut Context<'_>, taken: &[ConfigId]) -> ConfigId {
        let space = context.space;
        let mut child = self.population[0].0;
        for _ in 0..self.options.distinct_attempts.max(1) {
            let (mother, father) = (self.tournament(context), self.tournament(context));
            child = moves::uniform_crossover(space, context.rng, mother, father);
            if child == mother || child == father || context.rng.chance(self.options.mutation_rate) {
                child = moves::mutate(space, context.rng, child, self.options.mutation_rate);
            }
            if !context.history.is_known(child) && !taken.contains(&child) {
                break;
            }
        }
        child
    }
}

impl Stepwise for GeneticAlgorithm {
    fn propose(&mut self, context: &mut Context<'_>, _n: usize) -> Vec<ConfigId> {
        let size = self.options.population_size.max(2);
        let mut generation: Vec<ConfigId> = self.population.iter().take(self.options.elites).map(|m| m.0).collect();
        if std::mem::take(&mut self.reseed) || self.population.is_empty() {
            generation.extend(fresh_batch(context, size - generation.len().min(size)));
            return generation;
        }
        while generation.len() < size {
            let child = self.child(context, &generation);
            generation.push(child);
        }
        generation
    }

    fn learn(&mut self, _context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        self.population = proposed.iter().zip(scores).map(|(id, score)| (*id, cost(*score))).collect();
        // Stable, so equal costs keep their order and the run stays deterministic.
        self.population.sort_by(|a, b| a.1.total_cmp(&b.1));
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.reseed = true;
    }
}
