//! What a run has learned so far: every configuration's outcome, in the order observed.

use std::collections::{HashMap, HashSet};

use kerntune_space::ConfigId;

/// The outcome of one configuration as strategies see it: a score where lower is better
/// (the engine negates objectives that should be maximised), or `None` when the
/// configuration failed (did not compile, crashed, computed a wrong answer...).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub id: ConfigId,
    pub score: Option<f64>,
}

/// Observations of one run plus the configurations still being evaluated.
#[derive(Debug, Default, Clone)]
pub struct History {
    observations: Vec<Observation>,
    scores: HashMap<ConfigId, Option<f64>>,
    pending: HashSet<ConfigId>,
    best: Option<Observation>,
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    /// Marks `id` as being evaluated; it will be observed later.
    pub fn start(&mut self, id: ConfigId) {
        self.pending.insert(id);
    }

    pub fn observe(&mut self, observation: Observation) {
        self.pending.remove(&observation.id);
        if self.scores.insert(observation.id, observation.score).is_some() {
            return;
        }
        self.observations.push(observation);
        if let Some(score) = observation.score {
            if self.best.and_then(|b| b.score).is_none_or(|best| score < best) {
                self.best = Some(observation);
            }
        }
    }

    /// Observed or being evaluated: proposing it again gains nothing.
    pub fn is_known(&self, id: ConfigId) -> bool {
        self.scores.contains_key(&id) || self.pending.contains(&id)
    }

    pub fn is_pending(&self, id: ConfigId) -> bool {
        self.pending.contains(&id)
    }

    /// `Some(score)` once observed (the score itself `None` for a failed configuration).
    pub fn score(&self, id: ConfigId) -> Option<Option<f64>> {
        self.scores.get(&id).copied()
    }

    /// The lowest score observed, with its configuration.
    pub fn best(&self) -> Option<(ConfigId, f64)> {
        self.best.and_then(|b| b.score.map(|s| (b.id, s)))
    }

    /// Observations in the order they arrived.
    pub fn observations(&self) -> &[Observation] {
        &self.observations
    }

    /// Number of distinct configurations observed.
    pub fn len(&self) -> usize {
        self.observations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.observations.is_empty()
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_ignores_failures_and_repeats() {
        let mut history = History::new();
        history.start(ConfigId(1));
        assert!(history.is_known(ConfigId(1)));
        history.observe(Observation { id: ConfigId(1), score: Some(3.0) });
        history.observe(Observation { id: ConfigId(2), score: None });
        history.observe(Observation { id: ConfigId(3), score: Some(2.0) });
        history.observe(Observation { id: ConfigId(3), score: Some(9.0) });
        assert_eq!(history.best(), Some((ConfigId(3), 2.0)));
        assert_eq!(history.len(), 3);
        assert_eq!(history.score(ConfigId(2)), Some(None));
        assert_eq!(history.pending_count(), 0);
    }
}
