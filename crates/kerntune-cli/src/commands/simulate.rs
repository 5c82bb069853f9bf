//! `kerntune simulate`: tune on a recorded landscape as if it were a device.

use anyhow::{Context, Result};
use kerntune_engine::{Event, SimBackend, StopReason, Summary, Tuner};
use kerntune_store::{Landscape, Store};
use serde_json::json;
use std::process::ExitCode;

use crate::args::SimulateArgs;
use crate::commands::search_setup;
use crate::{interrupt, render};
use kerntune_engine::Search;

/// The landscape `kerntune simulate` uses when given none.
const DEFAULT_LANDSCAPE: &[u8] = include_bytes!("../../../../data/landscapes/convolution_A100.json.gz");
const DEFAULT_NAME: &str = "convolution_A100.json.gz (shipped with kerntune)";

pub fn run(args: SimulateArgs) -> Result<ExitCode> {
    let (landscape, source) = match &args.landscape {
        Some(path) => (Landscape::read(path)?, path.display().to_string()),
        None => (Landscape::parse(DEFAULT_LANDSCAPE, DEFAULT_NAME, "convolution_A100")?, DEFAULT_NAME.to_string()),
    };
    let space = landscape.space().with_context(|| source.clone())?;
    let Search { strategy_name, strategy, budget, seed } = search_setup(&args.search, &Default::default())?;
    if let Some(speed) = args.realtime {
        anyhow::ensure!(speed.is_finite() && speed > 0.0, "--realtime needs a positive speed, not {speed}");
    }
    let store = args.db.as_deref().map(Store::open).transpose()?;
    let tuning = store.as_ref().map(|s| s.tuning(&landscape.tuning()).map(|t| (s, t))).transpose()?;
    let mut backend = SimBackend::new(&landscape, &space)?;
    if let Some(speed) = args.realtime {
        backend = backend.with_realtime_speed(speed);
    }

    if !args.json {
        println!(
            "Simulating {} on {} from the recorded landscape {source}: no GPU is used, each evaluation \
             returns its recorded outcome and advances a simulated clock by its recorded cost.",
            landscape.kernel_name, landscape.device_name
        );
        let limit = match (budget.max_fevals, budget.time_limit) {
            (Some(n), _) => format!("{n} evaluations"),
            (None, Some(t)) => format!("{} of simulated time", render::duration(t)),
            (None, None) => "the whole space".to_string(),
        };
        println!("Space: {} configurations. Strategy {}, seed {}, budget {limit}.", space.len(), strategy_name, seed);
    }
    let bar = render::progress(budget.max_fevals.map(|n| n.min(space.len()) as u64), args.json);
    let objective = landscape.objective.clone();
    let mut on_event = |event: Event<'_>| match event {
        Event::Started { from_store, .. } if from_store > 0 => {
            bar.println(format!("{from_store} evaluations of this landscape are already in the store"));
        }
        Event::Evaluated { point, .. } => {
            render::advance(&bar, &objective, point.feval, point.best);
        }
        Event::Started { .. } => {}
    };
    let summary = Tuner {
        space: &space,
        strategy,
        backend: &mut backend,
        store: tuning,
        reuse_stored: true,
        objective: landscape.objective.clone(),
        budget,
        seed,
        interrupt: Some(&interrupt::requested),
    }
    .run(&mut on_event)?;
    bar.finish_and_clear();

    if args.json {
        println!("{}", summary_json(&summary, &landscape, &strategy_name, seed));
    } else {
        print_summary(&summary, &landscape, &space, args.db.is_some());
    }
    Ok(render::exit_code(&summary))
}

fn summary_json(summary: &Summary, landscape: &Landscape, strategy: &str, seed: u64) -> serde_json::Value {
    json!({
        "best": summary.best.as_ref().map(|b| json!({"config": b.config, "objective": b.objective})),
        "evaluations": summary.evaluations,
        "failed": summary.failed,
        "trace": summary.trace,
        "objective": landscape.objective.name,
        "higher_is_better": landscape.objective.higher_is_better,
        "optimum": landscape.optimum(),
        "strategy": strategy,
        "seed": seed,
        "from_store": summary.from_store,
        "stop": summary.stop,
        "simulated_seconds": summary.elapsed.as_secs_f64(),
    })
}

fn print_summary(summary: &Summary, landscape: &Landscape, space: &kerntune_space::Space, kept: bool) {
    let objective = &landscape.objective;
    match &summary.best {
        Some(best) => {
            let found_at = summary.trace.iter().position(|p| p.objective == Some(best.objective)).map_or(0, |i| i + 1);
            let optimum = landscape
                .optimum()
                .map(|o| {
                    let ratio = if objective.higher_is_better { best.objective / o } else { o / best.objective };
                    format!(
                        " (the landscape's optimum is {}: {:.1}% of it)",
                        render::objective(objective, o),
                        100.0 * ratio
                    )
                })
                .unwrap_or_default();
            println!("\nBest: {} after {found_at} evaluations{optimum}", render::objective(objective, best.objective));
            println!("  {}", space.describe(best.id));
        }
        None => println!("\nNo configuration succeeded."),
    }
    println!(
        "Evaluations: {} ({} failed, {} answered by the store); stopped: {}.",
        summary.evaluations, summary.failed, summary.from_store, summary.stop
    );
    println!("Simulated tuning time: {} ({}).", render::duration(summary.elapsed), render::costs(&summary.costs));
    if summary.stop == StopReason::Interrupted {
        if kept {
            println!("Interrupted: every finished evaluation is in the store; run the same command again to resume.");
        } else {
            println!("Interrupted. (Without --db nothing was kept.)");
        }
    }
}
