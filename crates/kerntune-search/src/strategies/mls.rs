//! Multi-start local search: first-improvement hill climbing from a random configuration
//! until no neighbour improves, then again from a new random configuration.
//!
//! Neighbours already evaluated are compared at no cost; with room for `n` evaluations,
//! `n` neighbours are tried at once. A failed start is left for its first valid neighbour.

use kerntune_space::{ConfigId, Neighbourhood};

use crate::options::Neighbours;
use crate::support::descent::Descent;
use crate::support::{cost, fresh, Stepwise};
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
    options: MlsOptions,
    descent: Option<Descent>,
}

impl Mls {
    pub(crate) fn new(options: MlsOptions) -> Mls {
        Mls { options, descent: None }
    }
}

impl Stepwise for Mls {
    fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        if let Some(descent) = &mut self.descent {
            let batch = descent.propose(context, n);
            if !batch.is_empty() {
                return batch;
            }
            self.descent = None;
        }
        fresh(context, &[]).into_iter().collect()
    }

    fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        match &mut self.descent {
            Some(descent) => descent.learn(context, proposed, scores),
            None => {
                if let (Some(start), Some(score)) = (proposed.first(), scores.first()) {
                    let kind = Neighbourhood::from(self.options.neighbourhood);
                    self.descent = Some(Descent::new(context, *start, cost(*score), kind));
                }
            }
        }
    }

    fn restart(&mut self, _context: &mut Context<'_>) {
        self.descent = None;
    }
}
