//! Basin hopping: hill climb to the bottom of a basin, hop away from the current basin
//! with a kick of a few parameters, climb again, and move to the new basin when it is
//! better or, with a chance that shrinks with how much worse it is, even when it is not.
//!
//! Unlike greedy iterated local search, worse basins can be accepted, which lets the
//! search cross a ridge instead of restarting; it never stops on its own.

use kerntune_space::{ConfigId, Neighbourhood};

use crate::options::Neighbours;
use crate::support::descent::Descent;
use crate::support::{cost, fresh, metropolis, moves, Stepwise};
use crate::{options, Context};

options! {
    /// Options of basin hopping.
    pub struct BasinhoppingOptions {
        /// Which configurations count as neighbours in the climb.
        neighbourhood: Neighbours = Neighbours::Hamming,
        /// Parameters a hop changes.
        hop_size: usize = 2,
        /// Acceptance temperature for worse basins, in units of relative score change.
        temperature: f64 = 0.1,
    }
}

#[derive(Debug)]
pub(crate) struct Basinhopping {
    options: BasinhoppingOptions,
    descent: Option<Descent>,
    /// The bottom of the basin the search is in.
    basin: Option<(ConfigId, f64)>,
    start: Option<ConfigId>,
}

impl Basinhopping {
    pub(crate) fn new(options: BasinhoppingOptions) -> Basinhopping {
        Basinhopping { options, descent: None, basin: None, start: None }
    }
}

impl Stepwise for Basinhopping {
    fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        if let Some(descent) = &mut self.descent {
            let batch = descent.propose(context, n);
            if !batch.is_empty() {
                return batch;
            }
            let bottom = (descent.centre(), descent.cost());
            self.descent = None;
            let accepted = match self.basin {
                None => true,
                Some(basin) => metropolis(context.rng, bottom.1, basin.1, self.options.temperature),
            };
            if accepted {
                self.basin = Some(bottom);
            }
        }
        self.start = match self.basin {
            Some((basin, _)) => Some(moves::kick(context.space, context.rng, basin, self.options.hop_size)),
            None => fresh(context, &[]),
        };
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
        self.basin = None;
    }
}
