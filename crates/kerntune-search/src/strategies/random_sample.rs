//! Uniform random sampling without replacement.

use std::collections::HashMap;

use kerntune_space::ConfigId;

use crate::{options, Context, Observation, Strategy};

options! {
    /// Random sampling takes no options.
    pub struct RandomSampleOptions {}
}

/// A Fisher–Yates shuffle of the ids carried out lazily: only the swapped positions are
/// stored, so drawing k configurations costs O(k) whatever the size of the space.
#[derive(Debug, Default)]
pub struct RandomSample {
    drawn: usize,
    swapped: HashMap<usize, usize>,
}

impl RandomSample {
    pub fn new(_options: RandomSampleOptions) -> RandomSample {
        RandomSample::default()
    }

    fn draw(&mut self, context: &mut Context<'_>) -> Option<ConfigId> {
        let size = context.space.len();
        if self.drawn >= size {
            return None;
        }
        let pick = self.drawn + context.rng.below(size - self.drawn);
        let chosen = *self.swapped.get(&pick).unwrap_or(&pick);
        let displaced = *self.swapped.get(&self.drawn).unwrap_or(&self.drawn);
        self.swapped.insert(pick, displaced);
        self.swapped.remove(&self.drawn);
        self.drawn += 1;
        Some(ConfigId::from(chosen))
    }
}

impl Strategy for RandomSample {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        let mut batch = Vec::with_capacity(n);
        while batch.len() < n {
            match self.draw(context) {
                Some(id) if !context.history.is_known(id) => batch.push(id),
                Some(_) => {}
                None => break,
            }
        }
        batch
    }

    fn tell(&mut self, _context: &mut Context<'_>, _observation: Observation) {}
}
