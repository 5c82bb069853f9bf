//! Comparing strategies on recorded landscapes.
//!
//! [`compare_strategies`] runs every [`Contender`] on every [`NamedLandscape`] with each
//! seed of a range, in simulation, and reports for each evaluation budget how close to the
//! recorded optimum the search got: the mean over landscapes of the median over seeds of
//! `optimum / best found` (1.0 = the optimum was found), the share of runs within 2% of
//! the optimum, and the evaluations used. [`ContenderResult::curve`] holds best-so-far
//! against evaluations, which `kerntune_run::report::plot` draws.
//!
//! Each (landscape, contender, seed) runs once, at the largest budget, and the smaller
//! budgets are read from its trace. That is exact because a strategy never looks at the
//! budget ([`kerntune_search::Context::remaining`]): a run stopped at 50 evaluations makes
//! the same proposals as the first 50 of a run stopped at 200. The strategy tests check
//! that property for every strategy.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use kerntune_search::{build_strategy, SearchError};
use kerntune_space::{Space, SpaceError};
use kerntune_store::Landscape;
use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::stats::median;
use crate::{Budget, SimBackend, TuneError, Tuner};

/// A run counts as a hit when its best is at least this share of the optimum.
pub const WITHIN: f64 = 0.98;

/// A strategy with its options, under the name the comparison shows.
#[derive(Debug, Clone, Serialize)]
pub struct Contender {
    pub label: String,
    pub strategy: String,
    pub options: Map<String, Json>,
}

impl Contender {
    /// The strategy with its default options, labelled by its name.
    pub fn named(strategy: &str) -> Contender {
        Contender { label: strategy.to_string(), strategy: strategy.to_string(), options: Map::new() }
    }
}

/// A recorded landscape and the name it has in reports (usually its file stem).
#[derive(Debug)]
pub struct NamedLandscape {
    pub name: String,
    pub landscape: Landscape,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    #[error("nothing to compare: give at least one landscape, strategy, budget and seed")]
    Empty,
    #[error("landscape {name}: {source}")]
    Space { name: String, source: SpaceError },
    #[error("landscape {name} has no valid configuration, so no optimum to compare with")]
    NoOptimum { name: String },
    #[error(transparent)]
    Strategy(#[from] SearchError),
    #[error("{label} on {landscape}, seed {seed}: {source}")]
    Run { label: String, landscape: String, seed: u64, source: Box<TuneError> },
}

/// One contender at one budget.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetResult {
    pub budget: usize,
    /// Mean over landscapes of the median over seeds of optimum / best found.
    pub score: f64,
    /// Share of (landscape, seed) runs whose best is within 2% of the optimum.
    pub within_2_percent: f64,
    /// Mean over runs of the evaluations used (below the budget only when a run ended
    /// early, for instance on a space smaller than the budget).
    pub mean_evaluations: f64,
    /// The median over seeds on each landscape, in the order of `Comparison::landscapes`.
    pub per_landscape: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ContenderResult {
    pub label: String,
    pub strategy: String,
    pub options: Map<String, Json>,
    /// One entry per budget, in the order of `Comparison::budgets`.
    pub budgets: Vec<BudgetResult>,
    /// Mean over landscapes and seeds of the best-so-far ratio after 1, 2, ... evaluations,
    /// up to the largest budget.
    pub curve: Vec<f64>,
    /// Mean time the strategy itself spent per run, in seconds.
    pub strategy_seconds: f64,
}

/// The outcome of [`compare_strategies`], serializable as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub landscapes: Vec<String>,
    pub budgets: Vec<usize>,
    pub seeds: Range<u64>,
    /// Evaluations in flight at once (1: one after another).
    pub batch: usize,
    pub contenders: Vec<ContenderResult>,
}

/// What one run leaves for the report.
#[derive(Debug, Clone)]
struct Run {
    /// Best-so-far ratio after each evaluation.
    ratios: Vec<f64>,
    strategy_seconds: f64,
}

impl Run {
    /// The ratio after `evaluations`, holding the last value when the run ended sooner.
    fn ratio_at(&self, evaluations: usize) -> f64 {
        match self.ratios.len() {
            0 => 0.0,
            len => self.ratios[evaluations.clamp(1, len) - 1],
        }
    }
}

/// A landscape prepared for runs: its space and optimum.
struct Prepared<'a> {
    named: &'a NamedLandscape,
    space: Space,
    optimum: f64,
}

/// Runs every contender on every landscape with every seed of `seeds` (in parallel, one
/// thread per core) and summarises them at each of `budgets`. `progress` hears (runs done, runs
/// in all) after each run.
pub fn compare_strategies(
    landscapes: &[NamedLandscape],
    contenders: &[Contender],
    budgets: &[usize],
    seeds: Range<u64>,
    batch: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Comparison, CompareError> {
    let largest = budgets.iter().copied().max().unwrap_or(0);
    let seed_count = seeds.end.saturating_sub(seeds.start) as usize;
    if landscapes.is_empty() || contenders.is_empty() || largest == 0 || seed_count == 0 {
        return Err(CompareError::Empty);
    }
    for contender in contenders {
        build_strategy(&contender.strategy, &contender.options)?;
    }
    let prepared = landscapes
        .iter()
        .map(|named| {
            let space =
                named.landscape.space().map_err(|source| CompareError::Space { name: named.name.clone(), source })?;
            let optimum =
                named.landscape.optimum().ok_or_else(|| CompareError::NoOptimum { name: named.name.clone() })?;
            Ok(Prepared { named, space, optimum })
        })
        .collect::<Result<Vec<_>, CompareError>>()?;

    // Jobs in (contender, landscape, seed) order, so results index back directly.
    let per_contender = prepared.len() * seed_count;
    let total = contenders.len() * per_contender;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Run, CompareError>>>> = Mutex::new((0..total).map(|_| None).collect());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(total);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let job = next.fetch_add(1, Ordering::Relaxed);
                if job >= total {
                    break;
                }
                let contender = &contenders[job / per_contender];
                let case = &prepared[(job % per_contender) / seed_count];
                let seed = seeds.start + (job % seed_count) as u64;
                let run = run_one(case, contender, seed, largest, batch);
                results.lock().unwrap_or_else(|poisoned| poisoned.into_inner())[job] = Some(run);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            });
        }
    });
    // Every slot is filled: a worker that panicked would have ended the scope with its panic.
    let runs: Vec<Run> = results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .into_iter()
        .flatten()
        .collect::<Result<_, _>>()?;

    let contenders = contenders
        .iter()
        .zip(runs.chunks(per_contender))
        .map(|(contender, runs)| summarise(contender, runs, prepared.len(), budgets, largest))
        .collect();
    Ok(Comparison {
        landscapes: landscapes.iter().map(|l| l.name.clone()).collect(),
        budgets: budgets.to_vec(),
        seeds,
        batch: batch.max(1),
        contenders,
    })
}

fn run_one(
    case: &Prepared<'_>,
    contender: &Contender,
    seed: u64,
    budget: usize,
    batch: usize,
) -> Result<Run, CompareError> {
    let failure = |source: TuneError| CompareError::Run {
        label: contender.label.clone(),
        landscape: case.named.name.clone(),
        seed,
        source: Box::new(source),
    };
    let landscape = &case.named.landscape;
    let mut backend = SimBackend::new(landscape, &case.space).map_err(|e| failure(e.into()))?.with_batch(batch);
    let summary = Tuner {
        space: &case.space,
        strategy: build_strategy(&contender.strategy, &contender.options)?,
        backend: &mut backend,
        store: None,
        reuse_stored: true,
        objective: landscape.objective.clone(),
        budget: Budget { max_fevals: Some(budget), ..Budget::default() },
        seed,
        interrupt: None,
    }
    .run(&mut |_| {})
    .map_err(failure)?;
    let higher_is_better = landscape.objective.higher_is_better;
    let ratio = |best: Option<f64>| match best {
        Some(best) if higher_is_better => best / case.optimum,
        Some(best) => case.optimum / best,
        None => 0.0,
    };
    Ok(Run {
        ratios: summary.trace.iter().map(|point| ratio(point.best)).collect(),
        strategy_seconds: summary.costs.strategy_s,
    })
}

/// `runs` holds one contender's runs, landscape by landscape, seeds in order.
fn summarise(
    contender: &Contender,
    runs: &[Run],
    landscapes: usize,
    budgets: &[usize],
    largest: usize,
) -> ContenderResult {
    let seeds = runs.len() / landscapes;
    let count = runs.len() as f64;
    let budgets = budgets
        .iter()
        .map(|&budget| {
            let per_landscape: Vec<f64> = runs
                .chunks(seeds)
                .map(|seeded| median(&seeded.iter().map(|run| run.ratio_at(budget)).collect::<Vec<_>>()))
                .collect();
            let hits = runs.iter().filter(|run| run.ratio_at(budget) >= WITHIN).count();
            let used: usize = runs.iter().map(|run| run.ratios.len().min(budget)).sum();
            BudgetResult {
                budget,
                score: per_landscape.iter().sum::<f64>() / landscapes as f64,
                within_2_percent: hits as f64 / count,
                mean_evaluations: used as f64 / count,
                per_landscape,
            }
        })
        .collect();
    let curve = (1..=largest).map(|k| runs.iter().map(|run| run.ratio_at(k)).sum::<f64>() / count).collect();
    ContenderResult {
        label: contender.label.clone(),
        strategy: contender.strategy.clone(),
        options: contender.options.clone(),
        budgets,
        curve,
        strategy_seconds: runs.iter().map(|run| run.strategy_seconds).sum::<f64>() / count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_holds_its_last_ratio() {
        let run = Run { ratios: vec![0.5, 0.8], strategy_seconds: 0.0 };
        assert_eq!((run.ratio_at(1), run.ratio_at(2), run.ratio_at(100)), (0.5, 0.8, 0.8));
        assert_eq!(Run { ratios: vec![], strategy_seconds: 0.0 }.ratio_at(5), 0.0);
    }
}
