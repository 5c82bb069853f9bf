//! Greedy iterated local search: hill climb to a local optimum, kick the best optimum
//! found (change a share of its parameters at random) and climb again; the kicked climb
//! is kept only if it ends better. After `patience` kicks without improvement the search
//! restarts from a random configuration instead of giving up.

use kerntune_space::{ConfigId, Neighbourhood};

use crate::options::Neighbours;
use crate::support::climbs::{Climbs, Next};
use crate::support::{fresh, moves, Stepwise};
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
    climbs: Climbs,
    /// The best local optimum of this restart, which kicks start from.
    incumbent: Option<(ConfigId, f64)>,
    failed_kicks: usize,
}

impl GreedyIls {
    pub(crate) fn new(options: GreedyIlsOptions) -> GreedyIls {
        let climbs = Climbs::new(Neighbourhood::from(options.neighbourhood));
        GreedyIls { options, climbs, incumbent: None, failed_kicks: 0 }
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
        let ended = match self.climbs.propose(context, n) {
            Next::Neighbours(batch) => return batch,
            Next::Start { ended } => ended,
        };
        if let Some(optimum) = ended {
            if self.incumbent.is_none_or(|best| optimum.1 < best.1) {
                self.incumbent = Some(optimum);
                self.failed_kicks = 0;
            } else {
                self.failed_kicks += 1;
            }
        }
        self.next_start(context).into_iter().collect()
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        self.climbs.learn(context, proposed, scores);
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.climbs.abandon();
        self.incumbent = None;
        self.failed_kicks = 0;
    }
}
