//! The ask/tell contract between the engine and a search strategy.

use kerntune_space::{ConfigId, Rng, Space};

use crate::{History, Observation};

/// What a strategy may look at while it decides: the space, the run's seeded generator,
/// everything observed so far, and how many evaluations the budget still allows.
#[derive(Debug)]
pub struct Context<'a> {
    pub space: &'a Space,
    pub rng: &'a mut Rng,
    pub history: &'a History,
    /// Evaluations left under `max_fevals`, counting those in flight; `None` when the
    /// run is bounded only by time or a target.
    pub remaining: Option<usize>,
}

/// A search strategy, driven by the engine.
///
/// The engine calls [`Strategy::ask`] whenever it can start evaluations, and
/// [`Strategy::tell`] once for each configuration the strategy proposed (also for one
/// that was already known: the engine answers those from the history at no cost). A
/// strategy never sees wall-clock time or global state: given the same seed and the same
/// outcomes, it makes the same proposals.
pub trait Strategy: Send {
    /// Up to `n` configurations to evaluate next. A strategy that is waiting for
    /// outcomes (a generation in flight) returns an empty list; an empty list while
    /// nothing is in flight means the strategy has nothing left to propose.
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId>;

    /// The outcome of a configuration this strategy proposed.
    fn tell(&mut self, context: &mut Context<'_>, observation: Observation);

    /// The strategy's own estimate, as of its last proposal, of the chance that an
    /// unevaluated configuration beats the best by more than the noise; `None` when it
    /// has no model to tell (yet). The engine stops a run that asked to stop by itself
    /// once this falls low enough.
    fn improvement_chance(&self) -> Option<f64> {
        None
    }

    /// Whether [`Strategy::improvement_chance`] will ever be `Some`: a run without a budget
    /// can then be left to stop by itself.
    fn stops_by_itself(&self) -> bool {
        false
    }
}
