//! A search that starts from configurations known to be good elsewhere: [`Started`] proposes
//! them first, then leaves the run to its inner strategy, which finds them in the history.
//!
//! This is how one problem size of a many-shape run learns from the sizes tuned before it:
//! their best configurations are this size's first evaluations, and the inner strategy is
//! asked only once one of them has an outcome (`default`, learning from another size,
//! lets its model choose from that first outcome on).

use std::collections::HashSet;

use kerntune_space::ConfigId;

use crate::{Context, Observation, Strategy};

/// A strategy that first proposes `first`, in order, and then asks `inner` once one of them
/// has an outcome. Held until then, `inner` chooses its first configurations knowing how
/// this run's measurements relate to what it learned elsewhere, instead of filling the
/// first batch (as wide as the compile pool) with a random draw that a small budget never
/// gets past.
pub struct Started {
    first: Vec<ConfigId>,
    inner: Box<dyn Strategy>,
    /// What `inner` proposed and has not been told of yet: only that reaches its `tell`.
    inner_pending: HashSet<ConfigId>,
    /// The given configurations proposed and not yet told of.
    first_pending: HashSet<ConfigId>,
    /// Whether any outcome was told.
    told: bool,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("first", &self.first)
            .field("inner_pending", &self.inner_pending)
            .field("told", &self.told)
            .finish()
    }
}

impl Started {
    /// `first` may hold duplicates and configurations already known: they are skipped.
    pub fn new(first: Vec<ConfigId>, inner: Box<dyn Strategy>) -> Started {
        Started { first, inner, inner_pending: HashSet::new(), first_pending: HashSet::new(), told: false }
    }
}

impl Strategy for Started {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        let mut batch: Vec<ConfigId> = Vec::with_capacity(n);
        while batch.len() < n && !self.first.is_empty() {
            let id = self.first.remove(0);
            if !context.history.is_known(id) && !context.history.is_pending(id) && !batch.contains(&id) {
                batch.push(id);
            }
        }
        self.first_pending.extend(batch.iter().copied());
        if !self.told && !self.first_pending.is_empty() {
            return batch;
        }
        if batch.len() < n {
            let more = self.inner.ask(context, n - batch.len());
            self.inner_pending.extend(more.iter().copied());
            batch.extend(more.into_iter().filter(|id| !batch.contains(id)).collect::<Vec<_>>());
        }
        batch
    }

    fn tell(&mut self, context: &mut Context<'_>, observation: Observation) {
        self.told = true;
        self.first_pending.remove(&observation.id);
        if self.inner_pending.remove(&observation.id) {
            self.inner.tell(context, observation);
        }
    }

    fn improvement_chance(&self) -> Option<f64> {
        self.inner.improvement_chance()
    }

    fn stops_by_itself(&self) -> bool {
        self.inner.stops_by_itself()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_strategy, History};
    use kerntune_space::{Param, Rng, Space, Value};

    fn space() -> Space {
        Space::new(vec![Param::new("x", (0..50).map(Value::Int).collect()).unwrap()], &[] as &[&str]).unwrap()
    }

    #[test]
    fn the_given_configurations_come_first_once_each_then_the_inner_strategy_proposes_once_one_is_told() {
        let space = space();
        let ids: Vec<ConfigId> = space.ids().collect();
        let (mut rng, mut history) = (Rng::seeded(3), History::new());
        history.start(ids[7]);
        history.observe(Observation { id: ids[7], score: Some(1.0) });
        let first = vec![ids[40], ids[7], ids[40], ids[12]];
        let mut strategy = Started::new(first, build_strategy("random_sample", &Default::default()).unwrap());
        let batch = {
            let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
            strategy.ask(&mut context, 4)
        };
        assert_eq!(batch, vec![ids[40], ids[12]], "known and repeated ones are skipped; the inner strategy waits");
        for id in &batch {
            history.start(*id);
        }
        let mut context = Context { space: &space, rng: &mut rng, history: &history, remaining: None };
        assert!(strategy.ask(&mut context, 2).is_empty(), "nothing told yet: nothing more is proposed");
        strategy.tell(&mut context, Observation { id: ids[40], score: Some(2.0) });
        let more = strategy.ask(&mut context, 2);
        assert_eq!(more.len(), 2);
        assert!(more.iter().all(|id| ![ids[40], ids[12], ids[7]].contains(id)), "{more:?}");
    }
}
