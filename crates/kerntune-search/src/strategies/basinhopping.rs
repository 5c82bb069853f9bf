//! Basin hopping: hill climb to the bottom of a basin, hop away from the current basin
//! with a kick of a few parameters, climb again, and move to the new basin when it is
//! better or, with a chance that shrinks with how much worse it is, even when it is not.
//!
//! Unlike greedy iterated local search, worse basins can be accepted, which lets the
//! search cross a ridge instead of restarting; it never stops on its own.

use kerntune_space::{ConfigId, Neighbourhood};

use crate::options::Neighbours;
use crate::support::climbs::{Climbs, Next};
use crate::support::{fresh, metropolis, moves, Stepwise};
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
    climbs: Climbs,
    /// The bottom of the basin the search is in.
    basin: Option<(ConfigId, f64)>,
}

impl Basinhopping {
    pub(crate) fn new(options: BasinhoppingOptions) -> Basinhopping {
        let climbs = Climbs::new(Neighbourhood::from(options.neighbourhood));
        Basinhopping { options, climbs, basin: None }
    }
}

impl Stepwise for Basinhopping {
    fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        let ended = match self.climbs.propose(context, n) {
            Next::Neighbours(batch) => return batch,
            Next::Start { ended } => ended,
        };
        if let Some(bottom) = ended {
            let accepted = match self.basin {
                None => true,
                Some(basin) => metropolis(context.rng, bottom.1, basin.1, self.options.temperature),
            };
            if accepted {
                self.basin = Some(bottom);
            }
        }
        let start = match self.basin {
            Some((basin, _)) => Some(moves::kick(context.space, context.rng, basin, self.options.hop_size)),
            None => fresh(context, &[]),
        };
        start.into_iter().collect()
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        self.climbs.learn(context, proposed, scores);
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.climbs.abandon();
        self.basin = None;
    }
}
