//! First-improvement hill climbing, one step at a time: the local search that
//! [`Climbs`](super::climbs::Climbs) restarts for `mls`, `greedy_ils` and `basinhopping`.

use kerntune_space::{ConfigId, Neighbourhood};

use super::cost;
use crate::Context;

/// A climb from a centre configuration: its neighbours are tried in random order and the
/// first that improves on the centre becomes the new centre. Neighbours the history
/// already knows are compared at no cost.
#[derive(Debug)]
pub(crate) struct Descent {
    kind: Neighbourhood,
    centre: ConfigId,
    cost: f64,
    /// Neighbours of the centre not compared yet; taken from the end.
    untried: Vec<ConfigId>,
}

impl Descent {
    pub(crate) fn new(context: &mut Context<'_>, centre: ConfigId, cost: f64, kind: Neighbourhood) -> Descent {
        let mut descent = Descent { kind, centre, cost, untried: Vec::new() };
        descent.move_to(context, centre, cost);
        descent
    }

    fn move_to(&mut self, context: &mut Context<'_>, centre: ConfigId, cost: f64) {
        self.centre = centre;
        self.cost = cost;
        self.untried = context.space.neighbours(centre, self.kind);
        context.rng.shuffle(&mut self.untried);
    }

    /// Up to `n` unevaluated neighbours to try next; empty once the centre is a local
    /// optimum (no neighbour left that could improve on it).
    pub(crate) fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        let mut batch = Vec::new();
        while batch.len() < n {
            let Some(next) = self.untried.pop() else { break };
            match context.history.score(next) {
                Some(score) if cost(score) < self.cost => {
                    // A known better neighbour: move now, and plan from the new centre.
                    self.move_to(context, next, cost(score));
                    batch.clear();
                }
                Some(_) => {}
                None if context.history.is_pending(next) => {}
                None => batch.push(next),
            }
        }
        batch
    }

    /// Moves to the best of the evaluated neighbours if it improves on the centre.
    pub(crate) fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        let best =
            proposed.iter().zip(scores).map(|(id, score)| (*id, cost(*score))).min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((id, best_cost)) = best {
            if best_cost < self.cost {
                self.move_to(context, id, best_cost);
            }
        }
    }

    pub(crate) fn centre(&self) -> ConfigId {
        self.centre
    }

    pub(crate) fn cost(&self) -> f64 {
        self.cost
    }
}
