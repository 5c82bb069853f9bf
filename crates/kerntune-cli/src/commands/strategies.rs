//! `kerntune strategies`: every strategy with its options, from their declarations.

use std::process::ExitCode;

use anyhow::Result;
use kerntune_search::STRATEGIES;
use serde_json::json;

use crate::args::StrategiesArgs;

pub fn run(args: StrategiesArgs) -> Result<ExitCode> {
    if args.json {
        let list: Vec<_> = STRATEGIES
            .iter()
            .map(|s| {
                let options: Vec<_> = (s.options)()
                    .into_iter()
                    .map(|o| json!({"name": o.name, "type": o.kind, "default": o.default, "range": o.range, "help": o.help}))
                    .collect();
                json!({"name": s.name, "summary": s.summary, "options": options})
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
        return Ok(ExitCode::SUCCESS);
    }
    for strategy in STRATEGIES {
        println!("{:<20} {}", strategy.name, strategy.summary);
        for option in (strategy.options)() {
            let range = option.range.map(|range| format!(", {range}")).unwrap_or_default();
            println!(
                "    --option {}=<{}>  (default {}{range})  {}",
                option.name, option.kind, option.default, option.help
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
