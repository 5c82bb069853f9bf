//! Every configuration once, in id order (the lexicographic order of the declared values).

use kerntune_space::ConfigId;

use crate::{options, Context, Observation, Strategy};

options! {
    /// Brute force takes no options.
    pub struct BruteForceOptions {}
}

#[derive(Debug, Default)]
pub struct BruteForce {
    next: usize,
}

impl BruteForce {
    pub fn new(_options: BruteForceOptions) -> BruteForce {
        BruteForce::default()
    }
}

impl Strategy for BruteForce {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        let mut batch = Vec::with_capacity(n);
        while batch.len() < n && self.next < context.space.len() {
            let id = ConfigId::from(self.next);
            self.next += 1;
            if !context.history.is_known(id) {
                batch.push(id);
            }
        }
        batch
    }

    fn tell(&mut self, _context: &mut Context<'_>, _observation: Observation) {}
}
