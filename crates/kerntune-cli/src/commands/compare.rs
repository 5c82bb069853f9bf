//! `kerntune compare-strategies`: strategies against each other on recorded landscapes.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Context as _, Result};
use kerntune_engine::compare::WITHIN;
use kerntune_engine::{compare_strategies, Comparison, Contender, NamedLandscape};
use kerntune_run::report::plot;
use kerntune_search::{build_strategy, STRATEGIES};
use kerntune_store::Landscape;

use crate::args::CompareArgs;
use crate::render;

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    ensure!(args.seeds > 0, "--seeds must be at least 1");
    ensure!(args.budgets.iter().all(|b| *b > 0), "--budgets must be positive numbers of evaluations");
    let landscapes = args
        .landscapes
        .iter()
        .map(|path| Ok(NamedLandscape { name: stem(path), landscape: Landscape::read(path)? }))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = if args.strategies.is_empty() {
        STRATEGIES.iter().map(|s| s.name.to_string()).filter(|name| name != "brute_force").collect()
    } else {
        args.strategies.iter().map(|s| s.trim().to_string()).collect()
    };
    let mut contenders: Vec<Contender> = names.iter().map(|name| Contender::named(name)).collect();
    for variant in &args.variant {
        // A misspelt strategy or option is refused here, before any run.
        build_strategy(&variant.strategy, &variant.options).with_context(|| format!("--variant {}", variant.label))?;
        let (label, strategy, options) = (variant.label.clone(), variant.strategy.clone(), variant.options.clone());
        contenders.push(Contender { label, strategy, options });
    }
    let largest = args.budgets.iter().copied().max().unwrap_or(0);
    let runs = contenders.len() * landscapes.len() * args.seeds as usize;
    let bar = render::progress(Some(runs as u64), "runs", args.json);
    bar.set_message(format!("{runs} runs of up to {largest} evaluations"));
    let seeds = args.first_seed..args.first_seed + args.seeds;
    let comparison =
        compare_strategies(&landscapes, &contenders, &args.budgets, seeds, args.batch as usize, &|done, _| {
            bar.set_position(done as u64)
        })?;
    bar.finish_and_clear();
    if let Some(path) = &args.plot {
        std::fs::write(path, plot::svg(&comparison)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&comparison)?);
    } else {
        print_table(&comparison);
    }
    Ok(ExitCode::SUCCESS)
}

/// The file name without `.json.gz` / `.json`, as landscapes are named in the report.
fn stem(path: &Path) -> String {
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    name.trim_end_matches(".gz").trim_end_matches(".json").to_string()
}

fn print_table(comparison: &Comparison) {
    let batch = match comparison.batch {
        1 => String::new(),
        n => format!(" Evaluations ran in batches of {n}."),
    };
    println!(
        "Mean over {} landscapes of the median over {} seeds of optimum / best found (1.000 = the optimum), \
         with the share of runs within {:.0}% of the optimum:{batch}\n",
        comparison.landscapes.len(),
        comparison.seeds.end - comparison.seeds.start,
        100.0 * (1.0 - WITHIN)
    );
    let mut header = vec!["strategy".to_string()];
    header.extend(comparison.budgets.iter().map(|b| format!("{b} evals")));
    header.push("strategy time per run".to_string());
    let rows: Vec<Vec<String>> = comparison
        .contenders
        .iter()
        .map(|contender| {
            let mut row = vec![contender.label.clone()];
            row.extend(
                contender.budgets.iter().map(|b| format!("{:.3} ({:.0}%)", b.score, 100.0 * b.within_2_percent)),
            );
            row.push(render::duration(Duration::from_secs_f64(contender.strategy_seconds)));
            row
        })
        .collect();
    println!("{}", render::table(&header, &rows));
    let short: Vec<String> = comparison
        .contenders
        .iter()
        .filter(|c| c.budgets.iter().any(|b| b.mean_evaluations + 1e-9 < b.budget as f64))
        .map(|c| c.label.clone())
        .collect();
    if !short.is_empty() {
        println!("\nUsed fewer evaluations than a budget (the space ran out): {}", short.join(", "));
    }
}
