//! `kerntune simulate`: tune on a recorded landscape as if it were a device.

use std::process::ExitCode;

use anyhow::{Context, Result};
use kerntune_engine::{objective, Event};
use kerntune_run::{report, Simulation};
use kerntune_store::{Landscape, Store};

use crate::args::SimulateArgs;
use crate::{interrupt, render};

/// The landscape `kerntune simulate` uses when given none.
const DEFAULT_LANDSCAPE: &[u8] = include_bytes!("../../../../data/landscapes/convolution_A100.json.gz");
const DEFAULT_NAME: &str = "convolution_A100.json.gz (shipped with kerntune)";

pub fn run(args: SimulateArgs) -> Result<ExitCode> {
    let (mut landscape, source) = match &args.landscape {
        Some(path) => (Landscape::read(path)?, path.display().to_string()),
        None => (Landscape::parse(DEFAULT_LANDSCAPE, DEFAULT_NAME, "convolution_A100")?, DEFAULT_NAME.to_string()),
    };
    if let Some(text) = &args.objective {
        let requested = objective::requested(text, args.objective_higher_is_better.then_some(true), &[])
            .map_err(anyhow::Error::msg)?;
        objective::rescore(&mut landscape, &requested).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    }
    let space = landscape.space().with_context(|| source.clone())?;
    let store = args.db.as_deref().map(Store::open).transpose()?;
    let simulation = Simulation {
        landscape: &landscape,
        space: &space,
        search: args.search.clone(),
        store: store.as_ref(),
        realtime: args.realtime,
        batch: args.batch as usize,
        transfer: None,
    };
    let search = simulation.search()?;
    let budget = search.budget.clone();
    if !args.json {
        println!(
            "Simulating {} on {} from the recorded landscape {source}: no GPU is used, each evaluation \
             returns its recorded outcome and advances a simulated clock by its recorded cost.",
            landscape.kernel_name, landscape.device_name
        );
        let limit = match (budget.max_fevals, budget.time_limit) {
            (Some(n), _) => format!("{n} evaluations"),
            (None, Some(t)) => format!("{} of simulated time", render::duration(t)),
            (None, None) if budget.auto_stop => "none: stops when more evaluations are unlikely to pay".to_string(),
            (None, None) => "the whole space".to_string(),
        };
        let (strategy, seed) = (&search.strategy_name, search.seed);
        let batch = match args.batch {
            1 => String::new(),
            n => format!(", {n} evaluations at a time"),
        };
        println!("Space: {} configurations. Strategy {strategy}, seed {seed}, budget {limit}{batch}.", space.len());
    }
    let bar = render::progress(budget.max_fevals.map(|n| n.min(space.len()) as u64), "evaluations", args.json);
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
    let run = simulation.run(search, &mut on_event, &interrupt::requested)?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", report::simulation_json(&run, &landscape));
    } else {
        print!("{}", report::simulation_text(&run, &landscape, &space, args.db.is_some()));
    }
    Ok(render::exit_code(run.summary.stop, run.summary.failure_message().as_deref()))
}
