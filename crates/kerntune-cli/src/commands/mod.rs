//! One module per subcommand; each turns parsed arguments into library calls and output.

mod results;
mod simulate;
mod space;
mod strategies;
mod transfer;

use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use kerntune_engine::{parse_duration, Budget};
use kerntune_search::{build_strategy, Strategy};
use serde_json::{Map, Value as Json};

use crate::args::{Cli, Command, SearchArgs};

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Space(args) => space::run(args),
        Command::Results(args) => results::run(args),
        Command::Import(args) => transfer::import(args),
        Command::Export(args) => transfer::export(args),
        Command::Strategies(args) => strategies::run(args),
    }
}

/// The strategy and budget a search asks for; `space_size` fills in brute force's budget.
pub fn search_setup(args: &SearchArgs) -> Result<(Box<dyn Strategy>, Budget)> {
    let mut options = Map::new();
    for option in &args.options {
        let Some((name, value)) = option.split_once('=') else {
            bail!("strategy option '{option}' is not NAME=VALUE");
        };
        // JSON where it parses (numbers, true, lists), a plain string otherwise.
        let value = serde_json::from_str(value).unwrap_or_else(|_| Json::String(value.to_string()));
        options.insert(name.trim().to_string(), value);
    }
    let strategy = build_strategy(&args.strategy, &options)?;
    let max_fevals = match args.max_fevals {
        Some(0) => None,
        Some(n) => Some(n),
        None if args.strategy == "brute_force" || args.time_limit.is_some() || args.target.is_some() => None,
        None => Some(100),
    };
    let time_limit = args
        .time_limit
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(anyhow::Error::msg)
        .context("--time-limit")?;
    Ok((strategy, Budget { max_fevals, time_limit, target: args.target }))
}
