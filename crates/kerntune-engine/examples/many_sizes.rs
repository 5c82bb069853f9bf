//! Many sizes of one kernel in one run, each size started from the best configurations found
//! at the sizes tuned before it, against each size tuned from nothing: what a many-shape run
//! can gain from its own earlier sizes, in simulation on recorded landscapes of one kernel
//! at several sizes (data/landscapes/h200/sizes).
//!
//! The landscapes are tuned in the order given. With each seed and each budget, `default` tunes
//! every size four ways: cold; started ([`kerntune_search::Started`]) from the `FIRST` best
//! configurations found at each of the `STARTS` sizes tuned last (the nearest, when the order
//! is by size), best first; started so, with every outcome of those sizes fitted beside
//! its own ([`kerntune_search::Prior`]); and started so, with every outcome of every size tuned
//! before fitted beside its own, each with its problem size as a feature of the model (the
//! numbers among the landscape's `problem_size` arguments). Each way chains its own runs.
//! Prints, per budget, each size's median over seeds of optimum / best found, and the means
//! over the sizes after the first (which has nothing to start from).
//!
//! ```sh
//! cargo run --release -p kerntune-engine --example many_sizes -- LANDSCAPE...
//! ```
//! Environment: `SEEDS` (default 10), `BUDGETS` (default `10,25,50`), `STARTS` (default 1),
//! `FIRST` (default 1), `BATCH` (evaluations in flight at once, default 1; a GPU run's first
//! batch is as wide as its compile pool, 16 or more), `MEASURED_FIRST` (a JSON file: a list of
//! configurations, as objects, that every run of every way measures before anything else, as
//! `kerntune.torch` measures Inductor's DEFAULT list first).

use std::error::Error;
use std::path::Path;

use kerntune_engine::{Budget, SimBackend, Tuner};
use kerntune_search::{build_strategy, default_with_prior, Prior, Started, Strategy};
use kerntune_space::{ConfigId, Space, Value};
use kerntune_store::Landscape;

struct Size {
    name: String,
    landscape: Landscape,
    space: Space,
    optimum: f64,
    /// The problem's numeric variables (the numbers among `problem_size`'s `args`), by name.
    variables: Vec<f64>,
    /// `MEASURED_FIRST`'s configurations in this size's space.
    measured_first: Vec<ConfigId>,
}

/// The numbers among a landscape's `problem_size` (its `args` where it has them), by name.
fn problem_variables(landscape: &Landscape) -> Vec<f64> {
    let problem = landscape.problem_size.get("args").unwrap_or(&landscape.problem_size);
    let mut named: Vec<(&String, f64)> = match problem.as_object() {
        Some(map) => map.iter().filter_map(|(name, value)| Some((name, value.as_f64()?))).collect(),
        None => Vec::new(),
    };
    named.sort_by(|a, b| a.0.cmp(b.0));
    named.into_iter().map(|(_, value)| value).collect()
}

/// What one run found: optimum / best found, and every outcome (values, score relative to
/// the run's best, or `None` where it failed).
struct Found {
    ratio: f64,
    outcomes: Vec<(Vec<Value>, Option<f64>)>,
}

impl Found {
    /// The values of the `count` best configurations that succeeded, best first.
    fn bests(&self, count: usize) -> Vec<&Vec<Value>> {
        let mut succeeded: Vec<(&Vec<Value>, f64)> =
            self.outcomes.iter().filter_map(|(values, relative)| relative.map(|r| (values, r))).collect();
        succeeded.sort_by(|a, b| a.1.total_cmp(&b.1));
        succeeded.into_iter().take(count).map(|(values, _)| values).collect()
    }
}

/// What `strategy` finds within `budget` evaluations.
fn tune(
    size: &Size,
    strategy: Box<dyn Strategy>,
    budget: usize,
    seed: u64,
    batch: usize,
) -> Result<Found, Box<dyn Error>> {
    let mut backend = SimBackend::new(&size.landscape, &size.space)?.with_batch(batch);
    let summary = Tuner {
        space: &size.space,
        strategy,
        backend: &mut backend,
        store: None,
        reuse_stored: true,
        objective: size.landscape.objective.clone(),
        budget: Budget { max_fevals: Some(budget), ..Budget::default() },
        seed,
        interrupt: None,
    }
    .run(&mut |_| {})?;
    let values = |id: ConfigId| size.space.values(id).into_iter().cloned().collect::<Vec<Value>>();
    Ok(match summary.best {
        None => Found { ratio: 0.0, outcomes: Vec::new() },
        Some(best) => Found {
            ratio: match size.landscape.objective.higher_is_better {
                true => best.objective / size.optimum,
                false => size.optimum / best.objective,
            },
            outcomes: summary
                .trace
                .iter()
                .map(|point| (values(point.id), point.objective.map(|o| (o / best.objective).ln().abs())))
                .collect(),
        },
    })
}

/// The ways each size is tuned: cold, started, started and learning from the last sizes, and
/// started and learning from every earlier size with the size as a feature.
const VARIANTS: usize = 4;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() % 2 {
        0 => (values[middle - 1] + values[middle]) / 2.0,
        _ => values[middle],
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_string());
    let seeds: u64 = env("SEEDS", "10").parse()?;
    let starts: usize = env("STARTS", "1").parse()?;
    let first_count: usize = env("FIRST", "1").parse()?;
    let batch: usize = env("BATCH", "1").parse()?;
    let budgets: Vec<usize> = env("BUDGETS", "10,25,50").split(',').map(str::parse).collect::<Result<_, _>>()?;
    let measured_first: Vec<serde_json::Map<String, serde_json::Value>> = match std::env::var("MEASURED_FIRST") {
        Ok(path) => serde_json::from_str(&std::fs::read_to_string(path)?)?,
        Err(_) => Vec::new(),
    };
    let mut sizes = Vec::new();
    for path in std::env::args().skip(1) {
        let name = Path::new(&path).file_name().and_then(|n| n.to_str()).unwrap_or(&path);
        let landscape = Landscape::read(Path::new(&path))?;
        let space = landscape.space()?;
        let optimum = landscape.optimum().ok_or("a landscape without a valid configuration")?;
        let measured_first =
            measured_first.iter().filter_map(|config| space.id_of_values(&space.values_of_json(config)?)).collect();
        sizes.push(Size {
            measured_first,
            name: name.trim_end_matches(".gz").trim_end_matches(".json").into(),
            variables: problem_variables(&landscape),
            landscape,
            space,
            optimum,
        });
    }
    if sizes.len() < 2 {
        return Err("give two landscapes or more, in the order they are tuned".into());
    }
    for budget in budgets {
        // Per variant (see VARIANTS), per size, the ratio of each seed.
        let mut ratios = vec![vec![Vec::new(); sizes.len()]; VARIANTS];
        for seed in 0..seeds {
            // Per variant, the runs of the sizes done so far, in order.
            let mut done: Vec<Vec<Found>> = (0..VARIANTS).map(|_| Vec::new()).collect();
            for (index, size) in sizes.iter().enumerate() {
                // Each size draws its own random configurations, as separate runs would: with
                // one seed for all, every size would draw the same ones.
                let seed = seed * 1000 + index as u64;
                for variant in 0..VARIANTS {
                    let recent: Vec<&Found> = done[variant].iter().rev().take(starts).collect();
                    let first: Vec<ConfigId> = recent
                        .iter()
                        .flat_map(|run| run.bests(first_count))
                        .filter_map(|values| size.space.id_of_values(values))
                        .collect();
                    // An outcome at another size as a prior of this one, with that size's variables.
                    let as_prior = |(values, relative): &(Vec<Value>, Option<f64>), at: Vec<f64>| {
                        let id = size.space.id_of_values(values)?;
                        let indexes = size.space.indexes(id).into_iter().map(|i| i as u32).collect();
                        Some(Prior { indexes, relative: *relative, size: at })
                    };
                    let prior: Vec<Prior> =
                        recent.iter().flat_map(|run| &run.outcomes).filter_map(|o| as_prior(o, Vec::new())).collect();
                    let every: Vec<Prior> = done[variant]
                        .iter()
                        .zip(&sizes)
                        .flat_map(|(run, at)| run.outcomes.iter().filter_map(|o| as_prior(o, at.variables.clone())))
                        .collect();
                    let strategy: Box<dyn Strategy> = match variant {
                        0 => build_strategy("default", &Default::default())?,
                        1 => Box::new(Started::new(first, build_strategy("default", &Default::default())?)),
                        2 => Box::new(Started::new(first, default_with_prior(&Default::default(), prior, &[])?)),
                        _ => Box::new(Started::new(
                            first,
                            default_with_prior(&Default::default(), every, &size.variables)?,
                        )),
                    };
                    let strategy: Box<dyn Strategy> = match size.measured_first.is_empty() {
                        true => strategy,
                        false => Box::new(Started::new(size.measured_first.clone(), strategy)),
                    };
                    let run = tune(size, strategy, budget, seed, batch)?;
                    ratios[variant][index].push(run.ratio);
                    done[variant].push(run);
                }
            }
        }
        println!(
            "budget {budget}, {seeds} seeds, the last {starts} sizes' results: cold / started from their bests / \
             started and learning from their outcomes / started and learning from every earlier size's, the size a feature"
        );
        let mut sums = [0.0; VARIANTS];
        let shown = |values: &[f64]| values.iter().map(|v| format!("{v:.3}")).collect::<Vec<_>>().join(" / ");
        for (index, size) in sizes.iter().enumerate() {
            let medians: Vec<f64> = (0..VARIANTS).map(|v| median(ratios[v][index].clone())).collect();
            println!("  {:<28} {}", size.name, shown(&medians));
            if index > 0 {
                (0..VARIANTS).for_each(|v| sums[v] += medians[v]);
            }
        }
        let later = (sizes.len() - 1) as f64;
        println!("  mean over the sizes after the first: {}", shown(&sums.map(|sum| sum / later)));
    }
    Ok(())
}
