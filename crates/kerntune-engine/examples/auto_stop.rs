//! Where a `default` run without a budget stops by itself, on recorded landscapes.
//!
//! For every landscape and seed, runs `default` in simulation with [`Budget::auto_stop`] and
//! no other limit, and prints one JSON line: the landscape, the seed, the configurations in
//! the space, the evaluations used, optimum / best found at the stop, and why it stopped.
//!
//! ```sh
//! cargo run --release -p kerntune-engine --example auto_stop -- LANDSCAPE...
//! ```
//! Environment: `SEEDS` (default 10), `FIRST_SEED` (default 0), `BATCH` (default 1), `OPTIONS`
//! (`default`'s options, `NAME=VALUE,...` with JSON values; default none).

use std::error::Error;
use std::path::Path;

use kerntune_engine::{Budget, SimBackend, Tuner};
use kerntune_search::build_strategy;
use kerntune_store::Landscape;
use serde_json::json;

fn main() -> Result<(), Box<dyn Error>> {
    let env_number =
        |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (seeds, first, batch) = (env_number("SEEDS", 10), env_number("FIRST_SEED", 0), env_number("BATCH", 1));
    let mut options = serde_json::Map::new();
    for pair in std::env::var("OPTIONS").unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').ok_or_else(|| format!("OPTIONS: {pair} is not NAME=VALUE"))?;
        options.insert(name.to_string(), serde_json::from_str(value)?);
    }
    for path in std::env::args().skip(1) {
        let name = Path::new(&path).file_name().and_then(|n| n.to_str()).unwrap_or(&path);
        let name = name.trim_end_matches(".gz").trim_end_matches(".json");
        let landscape = Landscape::read(Path::new(&path))?;
        let space = landscape.space()?;
        let optimum = landscape.optimum().ok_or("a landscape without a valid configuration")?;
        for seed in first..first + seeds {
            let mut backend = SimBackend::new(&landscape, &space)?.with_batch(batch as usize);
            let summary = Tuner {
                space: &space,
                strategy: build_strategy("default", &options)?,
                backend: &mut backend,
                store: None,
                reuse_stored: true,
                objective: landscape.objective.clone(),
                budget: Budget { auto_stop: true, ..Budget::default() },
                seed,
                interrupt: None,
            }
            .run(&mut |_| {})?;
            let ratio = summary.best.as_ref().map_or(0.0, |best| match landscape.objective.higher_is_better {
                true => best.objective / optimum,
                false => optimum / best.objective,
            });
            let line = json!({
                "landscape": name, "seed": seed, "configurations": space.len(),
                "evaluations": summary.evaluations, "ratio": ratio, "stop": summary.stop,
            });
            println!("{line}");
        }
    }
    Ok(())
}
