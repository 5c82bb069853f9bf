//! One module per subcommand; each turns parsed arguments into library calls and output.

mod compare;
mod report;
mod results;
mod sass;
mod simulate;
mod space;
mod strategies;
mod table;
mod transfer;
mod tune;

use std::process::ExitCode;

use anyhow::Result;

use crate::args::{Cli, Command};

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Tune(args) => tune::run(*args),
        Command::Worker(args) => Ok(tune::worker(args)),
        Command::Simulate(args) => simulate::run(args),
        Command::Space(args) => space::run(args),
        Command::Results(args) => results::run(args),
        Command::Report(args) => report::run(args),
        Command::Import(args) => transfer::import(args),
        Command::Export(args) => transfer::export(args),
        Command::Table(command) => table::run(command),
        Command::Strategies(args) => strategies::run(args),
        Command::Sass(command) => sass::run(command),
        Command::CompareStrategies(args) => compare::run(args),
    }
}
