//! `kerntune report DB`: the HTML report of a results database.

use std::process::ExitCode;

use anyhow::{Context, Result};
use kerntune_run::report::html;
use kerntune_store::Store;

use crate::args::ReportArgs;

/// The exit code of a report the store cannot give (no tunings, an unknown tuning): bad
/// input, as for a usage mistake.
const BAD_INPUT: u8 = 2;

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    anyhow::ensure!(args.db.exists(), "{}: no such results database", args.db.display());
    let store = Store::open(&args.db)?;
    let page = match html::page(&store, args.tuning) {
        Ok(page) => page,
        Err(error) if error.is_bad_input() => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(BAD_INPUT));
        }
        Err(error) => return Err(error.into()),
    };
    std::fs::write(&args.output, page).with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!("Wrote the report to {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
