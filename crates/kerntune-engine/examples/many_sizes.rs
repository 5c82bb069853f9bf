//! Many sizes of one kernel in one run, each size started from the best configurations found
//! at the sizes tuned before it, against each size tuned from nothing: what a many-shape run
//! can gain from its own earlier sizes, in simulation on recorded landscapes of one kernel
//! at several sizes (data/landscapes/h200/sizes).
//!
//! The landscapes are tuned in the order given. With each seed and each budget, `default` tunes
//! every size twice: cold, and started ([`kerntune_search::Started`]) from the bests found at
//! the `STARTS` sizes tuned last (the nearest, when the order is by size). Prints, per budget,
//! each size's median over seeds of optimum / best found, cold and started, and their means
//! over the sizes after the first (which has nothing to start from).
//!
//! ```sh
//! cargo run --release -p kerntune-engine --example many_sizes -- LANDSCAPE...
//! ```
//! Environment: `SEEDS` (default 10), `BUDGETS` (default `10,25,50`), `STARTS` (default 2).

use std::error::Error;
use std::path::Path;

use kerntune_engine::{Budget, SimBackend, Tuner};
use kerntune_search::{build_strategy, Started, Strategy};
use kerntune_space::{ConfigId, Space, Value};
use kerntune_store::Landscape;

struct Size {
    name: String,
    landscape: Landscape,
    space: Space,
    optimum: f64,
}

/// What one run found: optimum / best found, and the best's values.
struct Found {
    ratio: f64,
    best: Option<Vec<Value>>,
}

/// What `strategy` finds within `budget` evaluations.
fn tune(size: &Size, strategy: Box<dyn Strategy>, budget: usize, seed: u64) -> Result<Found, Box<dyn Error>> {
    let mut backend = SimBackend::new(&size.landscape, &size.space)?;
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
    Ok(match summary.best {
        None => Found { ratio: 0.0, best: None },
        Some(best) => Found {
            ratio: match size.landscape.objective.higher_is_better {
                true => best.objective / size.optimum,
                false => size.optimum / best.objective,
            },
            best: Some(size.space.values(best.id).into_iter().cloned().collect()),
        },
    })
}

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
    let starts: usize = env("STARTS", "2").parse()?;
    let budgets: Vec<usize> = env("BUDGETS", "10,25,50").split(',').map(str::parse).collect::<Result<_, _>>()?;
    let mut sizes = Vec::new();
    for path in std::env::args().skip(1) {
        let name = Path::new(&path).file_name().and_then(|n| n.to_str()).unwrap_or(&path);
        let landscape = Landscape::read(Path::new(&path))?;
        let space = landscape.space()?;
        let optimum = landscape.optimum().ok_or("a landscape without a valid configuration")?;
        sizes.push(Size {
            name: name.trim_end_matches(".gz").trim_end_matches(".json").into(),
            landscape,
            space,
            optimum,
        });
    }
    if sizes.len() < 2 {
        return Err("give two landscapes or more, in the order they are tuned".into());
    }
    for budget in budgets {
        let (mut cold, mut started) = (vec![Vec::new(); sizes.len()], vec![Vec::new(); sizes.len()]);
        for seed in 0..seeds {
            let mut found: Vec<Vec<Value>> = Vec::new();
            for (index, size) in sizes.iter().enumerate() {
                // Each size draws its own random configurations, as separate runs would: with
                // one seed for all, every size would draw the same ones.
                let seed = seed * 1000 + index as u64;
                cold[index].push(tune(size, build_strategy("default", &Default::default())?, budget, seed)?.ratio);
                let first: Vec<ConfigId> =
                    found.iter().rev().take(starts).filter_map(|values| size.space.id_of_values(values)).collect();
                let strategy = Box::new(Started::new(first, build_strategy("default", &Default::default())?));
                let run = tune(size, strategy, budget, seed)?;
                started[index].push(run.ratio);
                found.extend(run.best);
            }
        }
        println!("budget {budget}, {seeds} seeds, started from the bests of the last {starts} sizes: cold / started");
        let (mut cold_sum, mut started_sum) = (0.0, 0.0);
        for (index, size) in sizes.iter().enumerate() {
            let (c, s) = (median(cold[index].clone()), median(started[index].clone()));
            println!("  {:<28} {c:.3} / {s:.3}", size.name);
            if index > 0 {
                cold_sum += c;
                started_sum += s;
            }
        }
        let later = (sizes.len() - 1) as f64;
        println!("  mean over the sizes after the first: {:.3} / {:.3}", cold_sum / later, started_sum / later);
    }
    Ok(())
}
