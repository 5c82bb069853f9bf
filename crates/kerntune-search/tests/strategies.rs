//! Every strategy, run through the engine on a synthetic landscape: a known objective with a
//! unique optimum and a band of failing configurations, evaluated by a backend that can
//! hold one or eight configurations in flight.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kerntune_engine::{Backend, BackendError, Budget, StopReason, Summary, Tuner};
use kerntune_search::{build_strategy, Context, Observation, Strategy, STRATEGIES};
use kerntune_space::{ConfigId, Param, Space, Value};
use kerntune_store::{Costs, Evaluation, Objective, Status};

/// 8 × 8 × 4 × 3 values under one restriction: 648 configurations, 8% of them failing.
fn space() -> Space {
    space_of(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3, 4, 5, 6, 7], "a + b <= 10")
}

/// The same parameters over fewer values: 42 configurations.
fn tiny_space() -> Space {
    space_of(&[3, 4, 5, 6], &[1, 2, 3], "a + b <= 8")
}

fn space_of(a: &[i64], b: &[i64], restriction: &str) -> Space {
    let ints =
        |name: &str, values: &[i64]| Param::new(name, values.iter().map(|v| Value::Int(*v)).collect()).expect("param");
    let modes = Param::new("mode", ["x", "y", "z"].map(|m| Value::Str(m.into())).to_vec()).expect("param");
    let params = vec![ints("a", a), ints("b", b), ints("unroll", &[1, 2, 4, 8]), modes];
    Space::new(params, &[restriction]).expect("space")
}

/// The objective (a time: lower is better) or `None` for a failing configuration. The
/// optimum, 1.0, is at a=5, b=2, unroll=4, mode=y.
fn objective(space: &Space, id: ConfigId) -> Option<f64> {
    let value = |param: usize| space.value(id, param).as_int().unwrap_or_default();
    let (a, b, unroll, mode) = (value(0), value(1), space.index(id, 2), space.index(id, 3));
    if (a + 2 * b) % 13 == 12 {
        return None;
    }
    let (a, b, unroll) = (a as f64, b as f64, unroll as f64);
    Some(
        1.0 + 0.3 * (a - 5.0).powi(2)
            + 0.5 * (b - 2.0).powi(2)
            + 0.8 * (unroll - 2.0).abs()
            + if mode == 1 { 0.0 } else { 0.7 },
    )
}

/// Evaluates the synthetic objective, `capacity` configurations at a time, first in
/// first out.
struct Synthetic<'a> {
    space: &'a Space,
    capacity: usize,
    queue: VecDeque<ConfigId>,
    clock: Duration,
}

impl Backend for Synthetic<'_> {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        if id.index() >= self.space.len() {
            return Err(BackendError::UnknownConfig(id));
        }
        self.queue.push_back(id);
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        let id = self.queue.pop_front().ok_or(BackendError::Misuse("nothing in flight"))?;
        self.clock += Duration::from_secs(1);
        let evaluation = match objective(self.space, id) {
            Some(time) => Evaluation::ok(time, vec![time], Costs::default()),
            None => Evaluation::failed(Status::RuntimeFailed, "synthetic failure", Costs::default()),
        };
        Ok((id, evaluation))
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }
}

/// What a strategy proposed, as seen at the moment of asking.
#[derive(Debug, Default)]
struct Proposals {
    count: usize,
    /// Proposals of a configuration already observed or in flight.
    known: usize,
    /// Proposals of an id outside the space.
    invalid: usize,
}

/// Passes every call on to the strategy under test and audits its proposals.
struct Audited {
    inner: Box<dyn Strategy>,
    proposals: Arc<Mutex<Proposals>>,
}

impl Strategy for Audited {
    fn ask(&mut self, context: &mut Context<'_>, n: usize) -> Vec<ConfigId> {
        let batch = self.inner.ask(context, n);
        let mut proposals = self.proposals.lock().expect("audit log");
        assert!(batch.len() <= n, "asked for {n}, got {}", batch.len());
        for (i, id) in batch.iter().enumerate() {
            proposals.count += 1;
            if id.index() >= context.space.len() {
                proposals.invalid += 1;
            } else if context.history.is_known(*id) || batch[..i].contains(id) {
                proposals.known += 1;
            }
        }
        batch
    }

    fn tell(&mut self, context: &mut Context<'_>, observation: Observation) {
        self.inner.tell(context, observation);
    }
}

fn run(space: &Space, name: &str, max_fevals: usize, capacity: usize, seed: u64) -> (Summary, Proposals) {
    let proposals = Arc::new(Mutex::new(Proposals::default()));
    let strategy =
        Audited { inner: build_strategy(name, &Default::default()).expect("strategy"), proposals: proposals.clone() };
    let mut backend = Synthetic { space, capacity, queue: VecDeque::new(), clock: Duration::ZERO };
    let summary = Tuner {
        space,
        strategy: Box::new(strategy),
        backend: &mut backend,
        store: None,
        reuse_stored: true,
        objective: Objective::time(),
        budget: Budget { max_fevals: Some(max_fevals), ..Budget::default() },
        seed,
        interrupt: None,
    }
    .run(&mut |_| {})
    .expect("runs");
    let proposals = std::mem::take(&mut *proposals.lock().expect("audit log"));
    (summary, proposals)
}

fn ids(summary: &Summary) -> Vec<ConfigId> {
    summary.trace.iter().map(|p| p.id).collect()
}

/// Per strategy: its module of tests, its name, and the evaluations it gets to find the
/// optimum (strategies that do not learn need the whole space).
macro_rules! strategy_tests {
    ($($module:ident => $name:literal finds the optimum within $budget:expr),* $(,)?) => {
        #[test]
        fn every_registered_strategy_is_tested() {
            let tested: HashSet<&str> = [$($name),*].into_iter().collect();
            let registered: HashSet<&str> = STRATEGIES.iter().map(|s| s.name).collect();
            assert_eq!(tested, registered);
        }

        $(mod $module {
            use super::*;

            #[test]
            fn the_same_seed_repeats_the_same_search() {
                let space = space();
                for capacity in [1, 8] {
                    let (first, _) = run(&space, $name, 60, capacity, 7);
                    let (second, _) = run(&space, $name, 60, capacity, 7);
                    assert_eq!(ids(&first), ids(&second), "batches of {capacity}");
                }
            }

            #[test]
            fn the_budget_is_used_exactly_with_batches_of_one_and_eight() {
                let space = space();
                for capacity in [1, 8] {
                    let (summary, _) = run(&space, $name, 37, capacity, 1);
                    assert_eq!((summary.stop, summary.evaluations), (StopReason::MaxFevals, 37), "batches of {capacity}");
                }
            }

            #[test]
            fn proposals_are_valid_and_never_already_known() {
                let space = space();
                for capacity in [1, 8] {
                    let (summary, proposals) = run(&space, $name, 120, capacity, 2);
                    assert_eq!(proposals.invalid, 0, "batches of {capacity}");
                    assert_eq!(proposals.known, 0, "batches of {capacity}: {proposals:?}");
                    let distinct: HashSet<ConfigId> = ids(&summary).into_iter().collect();
                    assert_eq!(distinct.len(), summary.evaluations);
                }
            }

            #[test]
            fn a_shorter_budget_makes_the_same_first_proposals() {
                // What lets a comparison read every budget off one run of the largest.
                let space = space();
                let (short, _) = run(&space, $name, 30, 1, 3);
                let (long, _) = run(&space, $name, 90, 1, 3);
                assert_eq!(ids(&short)[..], ids(&long)[..30]);
            }

            #[test]
            fn finds_the_optimum_of_a_small_landscape() {
                let space = space();
                let budget: usize = $budget;
                for seed in 0..3 {
                    let (summary, _) = run(&space, $name, budget.min(space.len()), 1, seed);
                    assert_eq!(summary.best.map(|b| b.objective), Some(1.0), "seed {seed}");
                }
            }

            #[test]
            fn keeps_going_until_the_space_is_exhausted() {
                let space = tiny_space();
                let (summary, _) = run(&space, $name, space.len() + 10, 8, 4);
                assert_eq!((summary.stop, summary.evaluations), (StopReason::Exhausted, space.len()));
            }
        })*
    };
}

strategy_tests! {
    default => "default" finds the optimum within 150,
    brute_force => "brute_force" finds the optimum within usize::MAX,
    random_sample => "random_sample" finds the optimum within usize::MAX,
    genetic_algorithm => "genetic_algorithm" finds the optimum within 300,
    diff_evo => "diff_evo" finds the optimum within 300,
    pso => "pso" finds the optimum within 300,
    firefly_algorithm => "firefly_algorithm" finds the optimum within 300,
    simulated_annealing => "simulated_annealing" finds the optimum within 300,
    basinhopping => "basinhopping" finds the optimum within 300,
    greedy_ils => "greedy_ils" finds the optimum within 300,
    mls => "mls" finds the optimum within 300,
    bayes_opt => "bayes_opt" finds the optimum within 150,
}
