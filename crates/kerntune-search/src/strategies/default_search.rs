//! The default strategy: forest-guided best-first search.
//!
//! After a few random configurations, a random forest is fitted to everything observed
//! (failed configurations included, as the worst outcome) before every proposal, and the
//! proposal is the candidate with the highest expected improvement under it. Candidates
//! come from one of two places:
//!
//! - a *local* step looks at the best configuration whose neighbourhood (one parameter
//!   changed) still holds unevaluated configurations, and takes from those neighbours and
//!   from random configurations one step away in several parameters. Every neighbour of a
//!   good configuration is eventually tried, in the order the model prefers, so the search
//!   climbs like a local search that knows which move to try first;
//! - a *global* step (a share of the proposals) takes from random configurations of the
//!   whole space, which lets the model jump to another basin when it believes one is
//!   better, and keeps the search from circling a plateau.
//!
//! The forest is what makes this cheap in evaluations: it learns which parameters matter
//! and that some regions fail, from the first few dozen outcomes. Nothing depends on the
//! budget, so the search is the same whether it will be stopped at 25 evaluations or 2000.
//! Asked for a batch, it fills the batch with distinct picks the same way.

use kerntune_space::{ConfigId, Neighbourhood, Space};

use crate::support::{exhausted, fresh, fresh_batch, moves};
use crate::surrogate::forest::{Forest, ForestShape};
use crate::surrogate::{expected_improvement, targets};
use crate::{options, Context, Observation, Strategy};

options! {
    /// Options of the default strategy (forest-guided best-first search). `initial_samples`,
    /// `global_share` and `min_leaf` were chosen by leave-one-kernel-out cross-validation on
    /// recorded landscapes (bench/cross_validate.sh, docs/strategies.md).
    pub struct DefaultOptions {
        /// Random configurations observed before the model guides the search.
        initial_samples: usize = 10,
        /// Trees in the forest.
        #[range(min = 1)]
        trees: usize = 30,
        /// Observations a leaf of a tree holds at least.
        min_leaf: usize = 1,
        /// Share of the parameters considered at each split of a tree.
        #[range(min = 0.0, max = 1.0)]
        feature_fraction: f64 = 0.7,
        /// Share of the proposals chosen among random configurations of the whole space.
        #[range(min = 0.0, max = 1.0)]
        global_share: f64 = 0.3,
        /// Random configurations scored in a global step.
        random_candidates: usize = 500,
        /// Draws of configurations one step away in several parameters, scored in a local step.
        adjacent: usize = 200,
        /// Chance that each parameter moves in such a draw.
        #[range(min = 0.0, max = 1.0)]
        adjacent_rate: f64 = 0.5,
    }
}

#[derive(Debug)]
pub(crate) struct DefaultSearch {
    options: DefaultOptions,
}

/// The forest fitted to the history, and the best target it was fitted to.
struct Model {
    forest: Forest,
    best: f64,
}

impl Model {
    /// The candidate with the highest expected improvement (the first of equals).
    fn pick(&self, space: &Space, candidates: impl IntoIterator<Item = ConfigId>) -> Option<ConfigId> {
        let mut top: Option<(ConfigId, f64)> = None;
        for id in candidates {
            let (mean, deviation) = self.forest.predict(&indexes(space, id));
            let score = expected_improvement(self.best, mean, deviation);
            if top.is_none_or(|(_, best)| score > best) {
                top = Some((id, score));
            }
        }
        top.map(|(id, _)| id)
    }
}

impl DefaultSearch {
    pub(crate) fn new(options: DefaultOptions) -> DefaultSearch {
        DefaultSearch { options }
    }

    fn fit(&self, context: &mut Context<'_>) -> Model {
        let (ids, targets) = targets(context.history);
        let space = context.space;
        let features: Vec<Vec<u32>> = ids.iter().map(|id| indexes(space, *id)).collect();
        let cardinality: Vec<usize> = space.params().iter().map(|p| p.len()).collect();
        let shape = ForestShape {
            trees: self.options.trees,
            min_leaf: self.options.min_leaf,
            feature_fraction: self.options.feature_fraction,
        };
        let forest = Forest::fit(&features, &targets, &cardinality, shape, context.rng);
        let history = context.history;
        let best = ids
            .iter()
            .zip(&targets)
            .filter(|(id, _)| history.score(**id).flatten().is_some())
            .map(|(_, target)| *target)
            .fold(f64::INFINITY, f64::min);
        Model { forest, best }
    }

    /// The model's pick among the unevaluated neighbours of the best configuration that
    /// still has some (`ranked` holds the valid observations, best first), and among
    /// random configurations one step away from it in several parameters.
    fn local(
        &self,
        context: &mut Context<'_>,
        model: &Model,
        ranked: &[ConfigId],
        taken: &[ConfigId],
    ) -> Option<ConfigId> {
        let space = context.space;
        let history = context.history;
        let is_new = |id: &ConfigId| !history.is_known(*id) && !taken.contains(id);
        for parent in ranked {
            let mut candidates: Vec<ConfigId> =
                space.neighbours(*parent, Neighbourhood::Hamming).into_iter().filter(is_new).collect();
            if candidates.is_empty() {
                continue;
            }
            for _ in 0..self.options.adjacent {
                match moves::adjacent_step(space, context.rng, *parent, self.options.adjacent_rate) {
                    Some(id) if is_new(&id) && !candidates.contains(&id) => candidates.push(id),
                    _ => {}
                }
            }
            return model.pick(space, candidates);
        }
        None
    }

    /// The model's pick among random unevaluated configurations.
    fn global(&self, context: &mut Context<'_>, model: &Model, taken: &[ConfigId]) -> Option<ConfigId> {
        let mut candidates = Vec::with_capacity(self.options.random_candidates);
        for _ in 0..self.options.random_candidates.max(1) {
            match fresh(context, taken) {
                Some(id) => candidates.push(id),
                None => break,
            }
        }
        model.pick(context.space, candidates)
    }
}

impl Strategy for DefaultSearch {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        if exhausted(context) || n == 0 {
            return Vec::new();
        }
        let history = context.history;
        let mut ranked: Vec<Observation> =
            history.observations().iter().filter(|o| o.score.is_some()).copied().collect();
        if history.len() < self.options.initial_samples || ranked.len() < 2 {
            return fresh_batch(context, n);
        }
        ranked.sort_by(|a, b| a.score.unwrap_or(f64::INFINITY).total_cmp(&b.score.unwrap_or(f64::INFINITY)));
        let ranked: Vec<ConfigId> = ranked.into_iter().map(|o| o.id).collect();
        let model = self.fit(context);
        let mut batch = Vec::with_capacity(n);
        while batch.len() < n {
            let local = match context.rng.chance(self.options.global_share) {
                true => None,
                false => self.local(context, &model, &ranked, &batch),
            };
            match local.or_else(|| self.global(context, &model, &batch)) {
                Some(id) => batch.push(id),
                None => break,
            }
        }
        batch
    }

    fn tell(&mut self, _context: &mut Context<'_>, _observation: Observation) {}
}

fn indexes(space: &Space, id: ConfigId) -> Vec<u32> {
    space.indexes(id).into_iter().map(|i| i as u32).collect()
}
