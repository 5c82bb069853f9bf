//! Greedy iterated local search: hill climb to a local optimum, kick the best optimum
//! found (change a share of its parameters at random) and climb again; the kicked climb
//! is kept only if it ends better. After `patience` kicks without improvement the search
//! restarts from a random configuration instead of giving up.

use kerntune_space::{ConfigId, Neighbourhood};

use crate::options::Neighbours;
use crate::support::descent::Descent;
use crate::support::{cost, fresh, moves, Stepwise};
use crate::{options, Context};

options! {
    /// Options of greedy iterated local search.
    pub struct GreedyIlsOptions {
        /// Which configurations count as neighbours in the climb.
        neighbourhood: Neighbours = Neighbours::Hamming,
        /// Share of the parameters a kick changes (at least one).
        #[range(min = 0.0, max = 1.0)]
        kick_fraction: f64 = 0.3,
        /// Kicks in a row that find no better optimum before a random restart.
        patience: usize = 4,
    }
}

#[derive(Debug)]
pub(crate) struct GreedyIls {
    options: GreedyIlsOptions,
    descent: Option<Descent>,
    /// The best local optimum of this restart, which kicks start from.
    incumbent: Option<(ConfigId, f64)>,
    failed_kicks: usize,
    /// The configuration the next climb starts from.
    start: Option<ConfigId>,
}

impl GreedyIls {
    pub(crate) fn new(options: GreedyIlsOptions) -> GreedyIls {
        GreedyIls { options, descent: None, incumbent: None, failed_kicks: 0, start: None }
    }

    fn next_start(&mut self, context: &mut Context<'_>) -> Option<ConfigId> {
        match self.incumbent {
            Some((incumbent, _)) if self.failed_kicks < self.options.patience => {
                let free = moves::free_params(context.space).len();
                let changes = (self.options.kick_fraction * free as f64).round() as usize;
                Some(moves::kick(context.space, context.rng, incumbent, changes.max(1)))
            }
            _ => {
                self.incumbent = None;
                self.failed_kicks = 0;
                fresh(context, &[])
            }
        }
    }
}

impl Stepwise for GreedyIls {
    fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        if let Some(descent) = &mut self.descent {
            let batch = descent.propose(context, n);
            if !batch.is_empty() {
                return batch;
            }
            let optimum = (descent.centre(), descent.cost());
            self.descent = None;
            if self.incumbent.is_none_or(|best| optimum.1 < best.1) {
                self.incumbent = Some(optimum);
                self.failed_kicks = 0;
            } else {
                self.failed_kicks += 1;
            }
        }
        self.start = self.next_start(context);
        self.start.into_iter().collect()
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        match &mut self.descent {
            Some(descent) => descent.learn(context, proposed, scores),
            None => {
                if let (Some(start), Some(score)) = (self.start.take(), scores.first()) {
                    let kind = Neighbourhood::from(self.options.neighbourhood);
                    self.descent = Some(Descent::new(context, start, cost(*score), kind));
                }
            }
        }
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.descent = None;
        self.incumbent = None;
        self.failed_kicks = 0;
    }
}
