//! Checks a front runs itself on the best configurations before a winner is chosen. The
//! Triton front checks edge sizes this way: a size that is no multiple of 16 is another
//! specialization, so another compile, which it does through Triton's own launch in its
//! process, for the few configurations that can win rather than for every one the search
//! measured (see docs/design-notes.md). The best configurations are checked in the
//! objective's order until enough pass; one that fails is recorded `invalid_output` with
//! the reason, in the run and in the store, and can never be the best.

use kerntune_space::{Space, Value};
use kerntune_store::{Evaluation, Status, Store, TuningId};

use crate::summary::{ResultRow, RunSummary};
use crate::RunError;

/// A configuration's check at sizes it was not measured at.
pub type VetFn<'a> = Box<dyn Fn(&[Value]) -> Result<(), Unvetted> + 'a>;

/// Why a configuration did not pass its check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unvetted {
    /// It computes other outputs there, or does not run there: it is wrong, and recorded so.
    Wrong(String),
    /// The check itself could not run (it raised, or Ctrl-C came): nothing is known of the
    /// configuration, so nothing is recorded and the run stops with this reason.
    Broken(String),
}

/// What a front checks on the best configurations, and how.
pub struct Vetting<'a> {
    /// What each check covers, one label per edge size (`n = 4095`).
    pub sizes: Vec<String>,
    pub check: VetFn<'a>,
}

impl std::fmt::Debug for Vetting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vetting").field("sizes", &self.sizes).finish_non_exhaustive()
    }
}

impl RunSummary {
    /// Checks the best configurations that worked, in the objective's order, until `count`
    /// have passed or the next is not within `within` (a fraction) of the best that passed.
    /// Returns the rows that failed, as they now read, or why the check could not run.
    pub(crate) fn vet(
        &mut self,
        vetting: &Vetting<'_>,
        space: &Space,
        count: usize,
        within: f64,
    ) -> Result<Vec<ResultRow>, String> {
        let ranked: Vec<ResultRow> = self.ranked().into_iter().cloned().collect();
        let mut passed: Vec<&ResultRow> = Vec::new();
        let mut failed = Vec::new();
        for row in &ranked {
            let best = passed.first().and_then(|r| r.objective);
            let beyond = |best: f64| row.objective.is_none_or(|o| (o - best).abs() > within * best.abs());
            if passed.len() >= count.max(1) || best.is_some_and(beyond) {
                break;
            }
            let values: Vec<Value> = space.values(row.id).into_iter().cloned().collect();
            match (vetting.check)(&values) {
                Ok(()) => {
                    self.mark(row.id, |r| r.verified_sets = r.verified_sets.map(|n| n + vetting.sizes.len() as u32));
                    passed.push(row);
                }
                Err(Unvetted::Broken(reason)) => return Err(reason),
                Err(Unvetted::Wrong(reason)) => {
                    self.fail(row.id, &reason);
                    failed.extend(self.results.iter().rev().find(|r| r.id == row.id).cloned());
                }
            }
        }
        self.edge_checked = Some(passed.len() + failed.len());
        if self.best.as_ref().is_some_and(|best| failed.iter().any(|r| r.id == best.id)) {
            match passed.first() {
                Some(row) => self.replace_best(row, space),
                None => {
                    self.best = None;
                    let reasons = failed.first().and_then(|r| r.reason.clone()).unwrap_or_default();
                    self.failure = Some(format!(
                        "every configuration checked at the edge sizes failed there ({} of them; the first: {reasons})",
                        failed.len()
                    ));
                }
            }
        }
        Ok(failed)
    }

    /// Applies `change` to every row of configuration `id`.
    fn mark(&mut self, id: kerntune_space::ConfigId, change: impl Fn(&mut ResultRow)) {
        self.results.iter_mut().filter(|r| r.id == id).for_each(change);
    }

    /// Makes every row of configuration `id` an `invalid_output` for `reason`, counts
    /// included.
    fn fail(&mut self, id: kerntune_space::ConfigId, reason: &str) {
        let wrong = Status::InvalidOutput.as_str();
        for row in self.results.iter_mut().filter(|r| r.id == id && r.status != wrong) {
            if let Some(count) = self.statuses.get_mut(row.status) {
                *count -= 1;
            }
            *self.statuses.entry(wrong).or_default() += 1;
            self.failed += 1;
            row.status = wrong;
            row.reason = Some(reason.to_string());
            row.objective = None;
        }
        self.statuses.retain(|_, count| *count > 0);
    }
}

/// Records the rows that failed the check in the store, so that a run the store answers
/// knows them wrong.
pub(crate) fn record_failures(store: &Store, tuning: TuningId, failed: &[ResultRow]) -> Result<(), RunError> {
    for row in failed {
        let mut evaluation =
            Evaluation::failed(Status::InvalidOutput, row.reason.clone().unwrap_or_default(), row.costs);
        evaluation.samples = row.samples.clone();
        if let Some(sets) = row.verified_sets {
            evaluation.metrics.insert("verified_sets".into(), sets.into());
        }
        store.record(tuning, &row.config, &evaluation)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    use kerntune_device::DeviceInfo;
    use kerntune_engine::StopReason;
    use kerntune_space::{params_from_json, ConfigId, Space, Value};
    use kerntune_store::{Costs, Status};
    use serde_json::{json, Map, Value as Json};

    use super::{Unvetted, Vetting};
    use crate::summary::{BestSummary, ResultRow, RunSummary};

    fn space() -> Space {
        let Json::Object(params) = json!({"a": [0, 1, 2, 3, 4]}) else { unreachable!() };
        Space::new::<&str>(params_from_json(&params).expect("params"), &[]).expect("space")
    }

    /// A run whose configuration `a` = i took `times[i]` ms, all verified on one set.
    fn run(space: &Space, times: &[f64]) -> RunSummary {
        let results: Vec<ResultRow> = times
            .iter()
            .enumerate()
            .map(|(i, time)| ResultRow {
                id: ConfigId(i as u32),
                config: space.config_json(ConfigId(i as u32)),
                status: Status::Ok.as_str(),
                reason: None,
                objective: Some(*time),
                time_ms: Some(json!(time)),
                samples: vec![*time],
                verified_sets: Some(1),
                costs: Costs::default(),
                from_store: false,
                early_stop_factor: None,
                observables: Map::new(),
            })
            .collect();
        let best = results.iter().min_by(|a, b| a.objective.partial_cmp(&b.objective).expect("numbers"));
        let best = best.map(|r| BestSummary::new(r.id, r.config.clone(), r.objective.expect("timed"), &results, space));
        RunSummary {
            kernel: "k".into(),
            device: DeviceInfo::compile_target("sm_90").expect("a target"),
            objective: "time".into(),
            higher_is_better: false,
            strategy: "brute_force".into(),
            seed: 0,
            best,
            verified: true,
            verified_sets: 1,
            verified_sizes: vec!["n = 4095".into()],
            edge_checked: None,
            evaluations: results.len(),
            failed: 0,
            from_store: 0,
            statuses: BTreeMap::from([(Status::Ok.as_str(), results.len())]),
            stop: StopReason::Exhausted,
            failure: None,
            wall_s: 0.0,
            costs: Costs::default(),
            compile_workers: None,
            workers: None,
            prepare: None,
            framework_median_ms: None,
            gpu_busy_timed_runs: None,
            gpu_busy_tuned_kernels: None,
            db: String::new(),
            tuning: 1,
            trace: Vec::new(),
            results,
            finalists: None,
            schedule: None,
            controls: None,
            compiler: None,
            pareto: None,
            shape: None,
            finalists_failed: None,
        }
    }

    /// A check that fails the configurations `a` in `wrong` and records what it was asked.
    fn vetting<'a>(wrong: &'a [i64], asked: &'a RefCell<Vec<i64>>) -> Vetting<'a> {
        Vetting {
            sizes: vec!["n = 4095".into()],
            check: Box::new(move |config: &[Value]| {
                let Value::Int(a) = config[0] else { panic!("an integer") };
                asked.borrow_mut().push(a);
                match a {
                    _ if wrong.contains(&a) => {
                        Err(Unvetted::Wrong(format!("at the edge size n = 4095: a = {a} drops the tail")))
                    }
                    4 => Err(Unvetted::Broken("KeyboardInterrupt".into())),
                    _ => Ok(()),
                }
            }),
        }
    }

    #[test]
    fn the_best_are_checked_in_order_until_enough_pass_and_a_wrong_best_gives_way() {
        let space = space();
        let mut run = run(&space, &[1.0, 1.01, 1.02, 1.03, 1.04]);
        let asked = RefCell::new(Vec::new());
        let failed = run.vet(&vetting(&[0, 2], &asked), &space, 2, 0.05).expect("checked");
        assert_eq!(*asked.borrow(), [0, 1, 2, 3], "0 and 2 fail; 1 and 3 make the two that pass");
        assert_eq!(failed.iter().map(|r| r.id.0).collect::<Vec<_>>(), [0, 2]);
        assert!(failed.iter().all(|r| r.status == "invalid_output" && r.objective.is_none()));
        assert_eq!(run.best.as_ref().map(|b| b.id.0), Some(1), "the fastest that passed");
        assert_eq!(run.edge_checked, Some(4));
        assert_eq!((run.failed, run.statuses["invalid_output"], run.statuses["ok"]), (2, 2, 3));
        let passed: Vec<Option<u32>> = run.results.iter().map(|r| r.verified_sets).collect();
        assert_eq!(passed, [Some(1), Some(2), Some(1), Some(2), Some(1)], "those that passed count the size");
    }

    #[test]
    fn checking_stops_at_configurations_beyond_the_window_of_the_best_that_passed() {
        let space = space();
        let mut run = run(&space, &[1.0, 1.5, 2.0, 3.0, 4.0]);
        let asked = RefCell::new(Vec::new());
        let failed = run.vet(&vetting(&[], &asked), &space, 4, 0.05).expect("checked");
        assert!(failed.is_empty());
        assert_eq!(*asked.borrow(), [0], "1.5 ms is beyond 5% of 1.0 ms: it cannot win");
        assert_eq!(run.best.as_ref().map(|b| b.id.0), Some(0));
    }

    #[test]
    fn when_every_configuration_checked_fails_there_is_no_best_and_the_failure_says_why() {
        let space = space();
        let mut run = run(&space, &[1.0, 1.01]);
        let asked = RefCell::new(Vec::new());
        let failed = run.vet(&vetting(&[0, 1], &asked), &space, 4, 0.05).expect("checked");
        assert_eq!(failed.len(), 2);
        assert!(run.best.is_none());
        let failure = run.failure.expect("a failure");
        assert!(
            failure.starts_with("every configuration checked at the edge sizes failed there (2 of them"),
            "{failure}"
        );
        assert!(failure.contains("a = 0 drops the tail"), "{failure}");
    }

    #[test]
    fn a_check_that_cannot_run_stops_the_run_and_marks_nothing() {
        let space = space();
        let mut run = run(&space, &[1.04, 1.03, 1.02, 1.01, 1.0]);
        let asked = RefCell::new(Vec::new());
        let broken = run.vet(&vetting(&[], &asked), &space, 4, 0.05);
        assert_eq!(broken.expect_err("stopped"), "KeyboardInterrupt");
        assert_eq!(*asked.borrow(), [4], "the best, 4, could not be checked");
        assert!(run.results.iter().all(|r| r.status == "ok" && r.verified_sets == Some(1)), "nothing is marked");
        assert_eq!(run.best.as_ref().map(|b| b.id.0), Some(4));
    }
}
