//! Leave-one-kernel-out cross-validation of a strategy's options on recorded landscapes.
//!
//! Reads a grid of options (`{"strategy": NAME, "grid": {OPTION: [VALUES...]}}`), runs every
//! combination on every landscape with [`compare_strategies`], and then, holding out one
//! kernel at a time (landscapes are grouped by the part of their file name before the first
//! `_`), picks the combination that scores best on the other kernels and reports how it does
//! on the held-out one. The score of a combination on a set of landscapes is the mean over
//! budgets of the mean over landscapes of the median over seeds of optimum / best found.
//! The combination recommended is the one most folds picked (ties: the better mean score on
//! the folds' training kernels).
//!
//! ```sh
//! cargo run --release -p kerntune-engine --example cross_validate -- \
//!     bench/default_grid.json ../shared/data/landscapes/{convolution_A100,dedispersion_A100,gemm_RTX_3090,pnpoly_RTX_3090}.json.gz
//! ```
//! Environment: `BUDGETS` (default `25,50,100,200`), `SEEDS` (default 50), `FIRST_SEED`
//! (default 100, so the seeds differ from the 0..9 of the published comparison) and `BATCH`
//! (evaluations in flight at once, default 1).

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;

use kerntune_engine::{compare_strategies, Comparison, Contender, NamedLandscape};
use kerntune_store::Landscape;
use serde_json::{Map, Value as Json};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let grid_file = args.next().ok_or("usage: cross_validate GRID.json LANDSCAPE...")?;
    let landscapes = args
        .map(|path| {
            let name = Path::new(&path).file_name().and_then(|n| n.to_str()).unwrap_or(&path);
            let name = name.trim_end_matches(".gz").trim_end_matches(".json").to_string();
            Ok(NamedLandscape { name, landscape: Landscape::read(Path::new(&path))? })
        })
        .collect::<Result<Vec<_>, Box<dyn Error>>>()?;
    let env_number =
        |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let budgets: Vec<usize> = std::env::var("BUDGETS")
        .unwrap_or_else(|_| "25,50,100,200".into())
        .split(',')
        .map(|b| b.trim().parse())
        .collect::<Result<_, _>>()?;
    let (seeds, first) = (env_number("SEEDS", 50), env_number("FIRST_SEED", 100));
    let batch = env_number("BATCH", 1) as usize;

    let spec: Json = serde_json::from_str(&std::fs::read_to_string(&grid_file)?)?;
    let strategy = spec["strategy"].as_str().ok_or("the grid file names no \"strategy\"")?;
    let grid = spec["grid"].as_object().ok_or("the grid file has no \"grid\" object")?;
    let contenders = combinations(grid)
        .into_iter()
        .map(|options| Contender {
            label: Json::Object(options.clone()).to_string(),
            strategy: strategy.to_string(),
            options,
        })
        .collect::<Vec<_>>();
    eprintln!("{} combinations × {} landscapes × {seeds} seeds", contenders.len(), landscapes.len());
    let comparison =
        compare_strategies(&landscapes, &contenders, &budgets, first..first + seeds, batch, &|done, total| {
            if done % 100 == 0 || done == total {
                eprintln!("{done}/{total} runs");
            }
        })?;
    report(&comparison);
    Ok(())
}

/// Every combination of the grid's values, in the order the grid lists them.
fn combinations(grid: &Map<String, Json>) -> Vec<Map<String, Json>> {
    let mut all = vec![Map::new()];
    for (name, values) in grid {
        let values = values.as_array().cloned().unwrap_or_else(|| vec![values.clone()]);
        all = all
            .into_iter()
            .flat_map(|partial| {
                values.iter().map(move |value| {
                    let mut next = partial.clone();
                    next.insert(name.clone(), value.clone());
                    next
                })
            })
            .collect();
    }
    all
}

/// The kernel a landscape belongs to: its name up to the first `_`.
fn kernel(landscape: &str) -> &str {
    landscape.split('_').next().unwrap_or(landscape)
}

/// Mean over budgets of the mean over the chosen landscapes of the median over seeds.
fn score(comparison: &Comparison, contender: usize, landscapes: &[usize]) -> f64 {
    let budgets = &comparison.contenders[contender].budgets;
    let per_budget =
        budgets.iter().map(|b| landscapes.iter().map(|l| b.per_landscape[*l]).sum::<f64>() / landscapes.len() as f64);
    per_budget.sum::<f64>() / budgets.len() as f64
}

fn report(comparison: &Comparison) {
    let mut kernels: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, name) in comparison.landscapes.iter().enumerate() {
        kernels.entry(kernel(name)).or_default().push(index);
    }
    let all: Vec<usize> = (0..comparison.landscapes.len()).collect();
    let budgets: Vec<String> = comparison.budgets.iter().map(|b| b.to_string()).collect();
    println!("| held-out kernel | chosen on the other kernels | held-out score at {} | held-out mean | best any combination reaches there |", budgets.join(" / "));
    println!("|---|---|---|---:|---:|");
    let mut votes: BTreeMap<usize, (usize, f64)> = BTreeMap::new();
    let mut held_out_means = Vec::new();
    for (held_out, test) in &kernels {
        let train: Vec<usize> = all.iter().copied().filter(|l| !test.contains(l)).collect();
        let chosen = (0..comparison.contenders.len())
            .max_by(|a, b| score(comparison, *a, &train).total_cmp(&score(comparison, *b, &train)).then(b.cmp(a)))
            .unwrap_or(0);
        let vote = votes.entry(chosen).or_default();
        vote.0 += 1;
        vote.1 += score(comparison, chosen, &train);
        let per_budget: Vec<String> = comparison.contenders[chosen]
            .budgets
            .iter()
            .map(|b| format!("{:.3}", test.iter().map(|l| b.per_landscape[*l]).sum::<f64>() / test.len() as f64))
            .collect();
        let oracle = (0..comparison.contenders.len()).map(|c| score(comparison, c, test)).fold(0.0, f64::max);
        let held = score(comparison, chosen, test);
        held_out_means.push(held);
        println!(
            "| {held_out} | `{}` | {} | {held:.3} | {oracle:.3} |",
            comparison.contenders[chosen].label,
            per_budget.join(" / ")
        );
    }
    let estimate = held_out_means.iter().sum::<f64>() / held_out_means.len() as f64;
    println!("\nCross-validated estimate (mean of the held-out scores): {estimate:.3}");
    let recommended = votes
        .iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(a.1 .1.total_cmp(&b.1 .1)))
        .map(|(c, (count, _))| (*c, *count));
    if let Some((contender, count)) = recommended {
        println!(
            "Recommended (picked by {count} of {} folds): `{}`",
            kernels.len(),
            comparison.contenders[contender].label
        );
    }
    println!("\nEvery combination, scored on all landscapes (for reference, not for choosing):\n");
    println!("| options | {} | mean |", budgets.join(" | "));
    println!("|---|{}---:|", "---:|".repeat(budgets.len()));
    for (index, contender) in comparison.contenders.iter().enumerate() {
        let cells: Vec<String> = contender.budgets.iter().map(|b| format!("{:.3}", b.score)).collect();
        println!("| `{}` | {} | {:.3} |", contender.label, cells.join(" | "), score(comparison, index, &all));
    }
}
