//! Iterated descent: climb to a local optimum, then start a new climb wherever the
//! strategy says. The skeleton of `mls`, `greedy_ils` and `basinhopping`, which differ
//! only in where the next climb starts.

use kerntune_space::{ConfigId, Neighbourhood};

use super::cost;
use super::descent::Descent;
use crate::Context;

/// One climb after another: a climb runs until its centre is a local optimum, and the
/// next one starts from the single configuration the strategy proposes after it.
#[derive(Debug)]
pub(crate) struct Climbs {
    kind: Neighbourhood,
    descent: Option<Descent>,
}

/// What [`Climbs::propose`] needs next.
pub(crate) enum Next {
    /// Neighbours of the climb's centre to evaluate.
    Neighbours(Vec<ConfigId>),
    /// A configuration to start a climb from; `ended` is the optimum (and its cost) the
    /// climb that just finished reached, `None` when there was none.
    Start { ended: Option<(ConfigId, f64)> },
}

impl Climbs {
    pub(crate) fn new(kind: Neighbourhood) -> Climbs {
        Climbs { kind, descent: None }
    }

    /// The next neighbours of the current climb, or a request for a new start once the
    /// climb has reached a local optimum.
    pub(crate) fn propose(&mut self, context: &mut Context<'_>, n: usize) -> Next {
        let Some(descent) = &mut self.descent else { return Next::Start { ended: None } };
        let batch = descent.propose(context, n);
        if !batch.is_empty() {
            return Next::Neighbours(batch);
        }
        let ended = (descent.centre(), descent.cost());
        self.descent = None;
        Next::Start { ended: Some(ended) }
    }

    /// Scores of the last proposal: neighbours move the climb, a start begins one (a
    /// failed start is left for its first valid neighbour).
    pub(crate) fn learn(&mut self, context: &mut Context<'_>, proposed: &[ConfigId], scores: &[Option<f64>]) {
        match &mut self.descent {
            Some(descent) => descent.learn(context, proposed, scores),
            None => {
                if let (Some(start), Some(score)) = (proposed.first(), scores.first()) {
                    self.descent = Some(Descent::new(context, *start, cost(*score), self.kind));
                }
            }
        }
    }

    /// Drops the current climb; the next proposal asks for a start.
    pub(crate) fn abandon(&mut self) {
        self.descent = None;
    }
}
