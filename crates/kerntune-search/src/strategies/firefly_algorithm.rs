//! The firefly algorithm in the unit cube: every firefly moves towards each brighter one,
//! with an attraction that fades with distance, plus a random step; each is evaluated at
//! the valid configuration nearest to its position.
//!
//! A move of the whole swarm is one batch. A failed configuration is the dimmest possible,
//! so nothing is drawn towards it. When moves keep landing on known configurations the
//! swarm is scattered again, keeping the brightest firefly.

use kerntune_space::ConfigId;

use crate::support::{cost, fresh_batch, Stepwise};
use crate::{options, Context};

options! {
    /// Options of the firefly algorithm.
    pub struct FireflyAlgorithmOptions {
        /// Fireflies in the swarm.
        #[range(min = 1)]
        swarm_size: usize = 20,
        /// Attraction between fireflies at distance zero (beta0).
        attractiveness: f64 = 1.0,
        /// How fast attraction fades with squared distance (gamma).
        absorption: f64 = 1.0,
        /// Size of the random step, in units of the cube's side (alpha).
        randomness: f64 = 0.2,
    }
}

#[derive(Debug)]
pub(crate) struct FireflyAlgorithm {
    options: FireflyAlgorithmOptions,
    /// Each firefly's position (that of its configuration) and cost.
    swarm: Vec<(Vec<f64>, f64)>,
    scatter: bool,
}

impl FireflyAlgorithm {
    pub(crate) fn new(options: FireflyAlgorithmOptions) -> FireflyAlgorithm {
        FireflyAlgorithm { options, swarm: Vec::new(), scatter: true }
    }
}

impl Stepwise for FireflyAlgorithm {
    fn propose(&mut self, context: &mut Context<'_>, _n: usize) -> Vec<ConfigId> {
        if std::mem::take(&mut self.scatter) || self.swarm.is_empty() {
            self.swarm.sort_by(|a, b| a.1.total_cmp(&b.1));
            let brightest = self.swarm.first().and_then(|f| context.space.snap(&f.0));
            let mut ids: Vec<ConfigId> = brightest.into_iter().collect();
            ids.extend(fresh_batch(context, self.options.swarm_size.max(1) - ids.len()));
            self.swarm.clear();
            return ids;
        }
        let mut ids = Vec::with_capacity(self.swarm.len());
        for (i, (position, own_cost)) in self.swarm.iter().enumerate() {
            let mut moved = position.clone();
            for (j, (other, other_cost)) in self.swarm.iter().enumerate() {
                if i == j || *other_cost >= *own_cost {
                    continue;
                }
                let squared: f64 = moved.iter().zip(other).map(|(a, b)| (a - b).powi(2)).sum();
                let beta = self.options.attractiveness * (-self.options.absorption * squared).exp();
                for (x, y) in moved.iter_mut().zip(other) {
                    *x += beta * (y - *x);
                }
            }
            for x in &mut moved {
                *x = (*x + self.options.randomness * (context.rng.unit() - 0.5)).clamp(0.0, 1.0);
            }
            ids.extend(context.space.snap(&moved));
        }
        ids
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        self.swarm =
            proposed.iter().zip(scores).map(|(id, score)| (context.space.to_unit(*id), cost(*score))).collect();
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.scatter = true;
    }
}
