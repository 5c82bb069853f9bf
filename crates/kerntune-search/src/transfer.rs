//! What one problem size of a many-shape run takes from the size tuned nearest to it: its
//! best configuration is proposed first ([`Started`]), and, for `default`, every outcome
//! there is fitted beside the run's own ([`Prior`]), so that the model prefers from the
//! start what was good at that size.
//!
//! Measured in simulation over recorded landscapes of one matmul at five sizes
//! (`cargo run --release -p kerntune-engine --example many_sizes`, docs/strategies.md): at 10
//! evaluations the sizes after the first reach 0.79-0.82 of their optimum this way, against
//! 0.57-0.63 cold.

use kerntune_space::{ConfigId, Space, Value};
use serde_json::{Map, Value as Json};

use crate::{default_with_prior, Prior, SearchError, Started, Strategy};

/// One outcome at another size: the configuration's values in its parameters' order, and
/// its objective (`None` where it failed).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub values: Vec<Value>,
    pub objective: Option<f64>,
}

/// The strategy of a size that learns from `nearest`, the outcomes at the size tuned
/// nearest to it: `strategy` (already built from `name` and `options`) started from
/// `nearest`'s best, and for `default` rebuilt to fit `nearest`'s outcomes beside its own.
/// Configurations outside this size's space are left out; without any outcome in it,
/// `strategy` is returned as it is. `higher_is_better` orients the objective.
pub fn learning_from(
    space: &Space,
    name: &str,
    options: &Map<String, Json>,
    strategy: Box<dyn Strategy>,
    nearest: &[Outcome],
    higher_is_better: bool,
) -> Result<Box<dyn Strategy>, SearchError> {
    let here: Vec<(ConfigId, Option<f64>)> =
        nearest.iter().filter_map(|o| Some((space.id_of_values(&o.values)?, o.objective))).collect();
    let better = |a: f64, b: f64| if higher_is_better { a > b } else { a < b };
    let best = here
        .iter()
        .filter_map(|&(id, objective)| Some((id, objective.filter(|o| o.is_finite() && *o > 0.0)?)))
        .fold(None, |top: Option<(ConfigId, f64)>, (id, o)| match top {
            Some((_, b)) if !better(o, b) => top,
            _ => Some((id, o)),
        });
    let Some((best_id, best)) = best else { return Ok(strategy) };
    let inner = match name {
        "default" => {
            let prior = here
                .iter()
                .map(|&(id, objective)| Prior {
                    indexes: space.indexes(id).into_iter().map(|i| i as u32).collect(),
                    relative: objective.filter(|o| o.is_finite() && *o > 0.0).map(|o| (o / best).ln().abs()),
                    size: Vec::new(),
                })
                .collect();
            default_with_prior(options, prior, &[])?
        }
        _ => strategy,
    };
    Ok(Box::new(Started::new(vec![best_id], inner)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_strategy, Context, History};
    use kerntune_space::{Param, Rng};

    fn space() -> Space {
        let values = |n: i64| (0..n).map(Value::Int).collect();
        Space::new(vec![Param::new("x", values(20)).unwrap(), Param::new("y", values(20)).unwrap()], &[] as &[&str])
            .unwrap()
    }

    fn outcome(x: i64, y: i64, objective: Option<f64>) -> Outcome {
        Outcome { values: vec![Value::Int(x), Value::Int(y)], objective }
    }

    fn first_proposal(strategy: &mut Box<dyn Strategy>, space: &Space) -> Vec<Value> {
        let (mut rng, history) = (Rng::seeded(3), History::new());
        let mut context = Context { space, rng: &mut rng, history: &history, remaining: None };
        let id = strategy.ask(&mut context, 1)[0];
        space.values(id).into_iter().cloned().collect()
    }

    #[test]
    fn a_size_first_measures_the_nearest_sizes_best_by_the_objectives_direction() {
        let space = space();
        let nearest = [outcome(1, 1, Some(2.0)), outcome(5, 7, Some(0.5)), outcome(9, 9, None)];
        for (higher_is_better, expected) in [(false, [5, 7]), (true, [1, 1])] {
            let built = build_strategy("random_sample", &Map::new()).unwrap();
            let mut strategy =
                learning_from(&space, "random_sample", &Map::new(), built, &nearest, higher_is_better).unwrap();
            assert_eq!(first_proposal(&mut strategy, &space), expected.map(Value::Int).to_vec());
        }
    }

    #[test]
    fn outcomes_outside_this_sizes_space_or_all_failed_leave_the_strategy_as_it_was() {
        let space = Space::new(
            vec![
                Param::new("x", (0..20).map(Value::Int).collect()).unwrap(),
                Param::new("y", vec![Value::Int(0)]).unwrap(),
            ],
            &[] as &[&str],
        )
        .unwrap();
        let nearest = [outcome(3, 5, Some(1.0)), outcome(4, 0, None)];
        let cold = || build_strategy("random_sample", &Map::new()).unwrap();
        let mut learning = learning_from(&space, "random_sample", &Map::new(), cold(), &nearest, false).unwrap();
        assert_eq!(first_proposal(&mut learning, &space), first_proposal(&mut cold(), &space));
    }

    #[test]
    fn default_is_rebuilt_to_learn_from_the_outcomes_and_still_starts_from_the_best() {
        let space = space();
        let nearest: Vec<Outcome> = (0..20).map(|x| outcome(x, 19 - x, Some(1.0 + (x as f64 - 12.0).abs()))).collect();
        let built = build_strategy("default", &Map::new()).unwrap();
        let mut strategy = learning_from(&space, "default", &Map::new(), built, &nearest, false).unwrap();
        assert_eq!(first_proposal(&mut strategy, &space), vec![Value::Int(12), Value::Int(7)]);
    }
}
