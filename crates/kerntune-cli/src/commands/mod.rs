//! One module per subcommand; each turns parsed arguments into library calls and output.

mod compare;
mod results;
mod sass;
mod simulate;
mod space;
mod strategies;
mod transfer;
mod tune;

use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use kerntune_engine::spec::SearchDefaults;
use kerntune_engine::{parse_duration, Budget};
use kerntune_search::{build_strategy, Strategy};
use serde_json::{Map, Value as Json};

use crate::args::{Cli, Command, SearchArgs};

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Tune(args) => tune::run(args),
        Command::Worker(args) => Ok(tune::worker(args)),
        Command::Simulate(args) => simulate::run(args),
        Command::Space(args) => space::run(args),
        Command::Results(args) => results::run(args),
        Command::Import(args) => transfer::import(args),
        Command::Export(args) => transfer::export(args),
        Command::Strategies(args) => strategies::run(args),
        Command::Sass(command) => sass::run(command),
        Command::CompareStrategies(args) => compare::run(args),
    }
}

/// The strategy and budget a search asks for: command-line flags first, then the spec's
/// suggestions (`defaults`), then kerntune's defaults.
pub fn search_setup(args: &SearchArgs, defaults: &SearchDefaults) -> Result<(String, Box<dyn Strategy>, Budget)> {
    let strategy_name =
        args.strategy.clone().or_else(|| defaults.strategy.clone()).unwrap_or_else(|| "default".to_string());
    let max_fevals = args.max_fevals.or(defaults.max_fevals);
    let time_limit = args.time_limit.clone().or_else(|| defaults.time_limit.clone());
    let mut options = Map::new();
    for option in &args.options {
        let Some((name, value)) = option.split_once('=') else {
            bail!("strategy option '{option}' is not NAME=VALUE");
        };
        // JSON where it parses (numbers, true, lists), a plain string otherwise.
        let value = serde_json::from_str(value).unwrap_or_else(|_| Json::String(value.to_string()));
        options.insert(name.trim().to_string(), value);
    }
    if let Some(target) = args.target.filter(|target| !target.is_finite()) {
        bail!("--target must be a finite number, got {target}");
    }
    let strategy = build_strategy(&strategy_name, &options)?;
    let max_fevals = match max_fevals {
        Some(0) => None,
        Some(n) => Some(n),
        None if strategy_name == "brute_force" || time_limit.is_some() || args.target.is_some() => None,
        None => Some(100),
    };
    let time_limit =
        time_limit.as_deref().map(parse_duration).transpose().map_err(anyhow::Error::msg).context("--time-limit")?;
    Ok((strategy_name, strategy, Budget { max_fevals, time_limit, target: args.target }))
}
