//! `kerntune space FILE`: build a space and count it, or draw `--sample N` configurations
//! from it without building it.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use kerntune_space::{Rng, SpaceSpec};
use serde_json::json;

use crate::args::SpaceArgs;

pub fn run(args: SpaceArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("{}", args.file.display()))?;
    let spec: SpaceSpec =
        serde_json::from_str(&text).with_context(|| format!("{}: not a space file", args.file.display()))?;
    if let Some(count) = args.sample {
        let configs =
            spec.sample(count, &mut Rng::seeded(args.seed)).with_context(|| format!("{}", args.file.display()))?;
        for config in configs {
            println!("{}", serde_json::Value::Object(config));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let clock = Instant::now();
    let space = match args.max_memory {
        Some(cap) => spec.build_with_memory_cap(cap),
        None => spec.build(),
    };
    let space = space.with_context(|| format!("{}", args.file.display()))?;
    let seconds = clock.elapsed().as_secs_f64();
    let product: f64 = space.params().iter().map(|p| p.len() as f64).product();
    if args.json {
        println!(
            "{}",
            json!({"count": space.len(), "seconds": seconds, "product": product, "params": space.params().len()})
        );
    } else {
        let name = spec.name.as_deref().unwrap_or("space");
        println!(
            "{name}: {} valid configurations of {product:.0} ({:.1}%), {} parameters, {} restrictions, built in {:.1} ms",
            space.len(),
            100.0 * space.len() as f64 / product.max(1.0),
            space.params().len(),
            space.restrictions().len(),
            seconds * 1e3
        );
    }
    Ok(ExitCode::SUCCESS)
}
