//! Multi-start local search: first-improvement hill climbing from a random configuration
//! until no neighbour improves, then again from a new random configuration.
//!
//! Neighbours already evaluated are compared at no cost; with room for `n` evaluations,
//! `n` neighbours are tried at once. A failed start is left for its first valid neighbour.

use kerntune_space::{ConfigId, Neighbourhood};

use crate::options::Neighbours;
use crate::support::climbs::{Climbs, Next};
use crate::support::{fresh, Stepwise};
use crate::{options, Context};

options! {
    /// Options of multi-start local search.
    pub struct MlsOptions {
        /// Which configurations count as neighbours.
        neighbourhood: Neighbours = Neighbours::Hamming,
    }
}

#[derive(Debug)]
pub(crate) struct Mls {
    climbs: Climbs,
}

impl Mls {
    pub(crate) fn new(options: MlsOptions) -> Mls {
        Mls { climbs: Climbs::new(Neighbourhood::from(options.neighbourhood)) }
    }
}

impl Stepwise for Mls {
    fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        match self.climbs.propose(context, n) {
            Next::Neighbours(batch) => batch,
            Next::Start { .. } => fresh(context, &[]).into_iter().collect(),
        }
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        self.climbs.learn(context, proposed, scores);
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.climbs.abandon();
    }
}
