//! `kerntune space FILE`: build a space and count it, or draw `--sample N` configurations
//! from it without building it.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use kerntune_space::{Expression, MemoryCap, Param, Rng, Space, SpaceSpec, Value};
use serde_json::json;

use crate::args::SpaceArgs;
use crate::render;

pub fn run(args: SpaceArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("{}", args.file.display()))?;
    let spec: SpaceSpec =
        serde_json::from_str(&text).with_context(|| format!("{}: not a space file", args.file.display()))?;
    if let Some(count) = args.sample {
        let configs = spec
            .sample(usize::try_from(count).unwrap_or(usize::MAX), &mut Rng::seeded(args.seed))
            .with_context(|| format!("{}", args.file.display()))?;
        for config in configs {
            println!("{}", serde_json::Value::Object(config));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let clock = Instant::now();
    let cap = match args.max_memory {
        Some(cap) => cap,
        None => MemoryCap::from_env().map_err(anyhow::Error::msg)?,
    };
    // A bar for builds that take a while, drawn from half a second on.
    let bar = render::share_progress(args.json);
    let space = spec.build_with_progress(cap, &mut |done| {
        if clock.elapsed().as_secs_f64() > 0.5 {
            bar.set_position((done * 1000.0) as u64);
        }
    });
    bar.finish_and_clear();
    let space = space.with_context(|| format!("{}", args.file.display()))?;
    if space.is_empty() {
        let why = spec.params().map(|params| why_empty(params, &spec.all_restrictions())).unwrap_or_default();
        bail!("{}: no configuration satisfies the restrictions{why}", args.file.display());
    }
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

/// Which restriction empties the space on its own, and the error it raises on the first
/// configuration if it raises one (a restriction that raises excludes the configuration).
/// `kerntune tune` says the same of a kernel spec's space.
pub(super) fn why_empty(params: Vec<Param>, restrictions: &[String]) -> String {
    let names: Vec<&str> = params.iter().map(|p| p.name()).collect();
    let first: Vec<Value> = params.iter().filter_map(|p| p.values().first().cloned()).collect();
    for restriction in restrictions {
        let alone = Space::new(params.clone(), std::slice::from_ref(restriction));
        if !alone.is_ok_and(|space| space.is_empty()) {
            continue;
        }
        let raised = Expression::parse(restriction, &names).ok().and_then(|e| e.evaluate_with(&first).err());
        return match raised {
            Some(error) => format!(": '{restriction}' raises for every configuration (on the first: {error})"),
            None => format!(": '{restriction}' holds for none"),
        };
    }
    " (each holds for some, but never all together)".to_string()
}
