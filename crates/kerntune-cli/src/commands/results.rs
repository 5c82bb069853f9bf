//! `kerntune results DB`: the best stored configurations of each tuning.

use std::process::ExitCode;

use anyhow::{Context, Result};
use kerntune_engine::objective;
use kerntune_run::report;
use kerntune_store::formats::deploy::ranked;
use kerntune_store::{Store, TuningSummary};
use serde_json::json;

use crate::args::ResultsArgs;
use crate::render;

pub fn run(args: ResultsArgs) -> Result<ExitCode> {
    anyhow::ensure!(args.db.exists(), "{}: no such results database", args.db.display());
    let store = Store::open(&args.db)?;
    let tunings: Vec<TuningSummary> = store
        .tunings()?
        .into_iter()
        .filter(|t| args.kernel.as_deref().is_none_or(|k| t.info.kernel_name.contains(k)))
        .collect();
    let mut json_out = Vec::new();
    if tunings.is_empty() && !args.json {
        println!(
            "{}: no tunings stored{}",
            args.db.display(),
            if args.kernel.is_some() { " for that kernel" } else { "" }
        );
    }
    for tuning in &tunings {
        let rows = store.evaluations(tuning.id).with_context(|| tuning.info.kernel_name.clone())?;
        let best = ranked(&tuning.info, &rows, usize::try_from(args.top).unwrap_or(usize::MAX));
        if args.json {
            json_out.push(json!({
                "tuning": tuning.id.get(),
                "kernel_name": tuning.info.kernel_name,
                "kernel": tuning.info.kernel,
                "device": tuning.info.device,
                "problem": tuning.info.problem,
                "objective": tuning.info.objective.name,
                "higher_is_better": tuning.info.objective.higher_is_better,
                "evaluations": tuning.evaluations,
                "failed": tuning.failed,
                "best": best.iter().map(|r| {
                    let mut entry = json!({"config": r.config, "objective": r.evaluation.objective});
                    let observed = objective::observed(&r.evaluation.metrics);
                    if !observed.is_empty() {
                        entry["observables"] = serde_json::Value::Object(observed);
                    }
                    entry
                }).collect::<Vec<_>>(),
            }));
            continue;
        }
        let info = &tuning.info;
        let direction = if info.objective.higher_is_better { "higher is better" } else { "lower is better" };
        println!(
            "\nTuning {}: {} on {} (problem {}): {} evaluations, {} failed; objective {} ({direction})",
            tuning.id.get(),
            info.kernel_name,
            info.device,
            info.problem,
            tuning.evaluations,
            tuning.failed,
            info.objective.name
        );
        if best.is_empty() {
            println!("  no successful evaluation yet");
            continue;
        }
        let mut header = vec!["#".to_string(), info.objective.name.clone()];
        // Energy, power and clocks where any of these configurations has them.
        let observed: Vec<_> = best.iter().map(|r| objective::observed(&r.evaluation.metrics)).collect();
        let measured: Vec<&str> = objective::OBSERVABLES
            .iter()
            .map(|o| o.key)
            .filter(|key| observed.iter().any(|values| values.contains_key(*key)))
            .collect();
        header.extend(measured.iter().map(|k| k.to_string()));
        header.extend(info.params.iter().map(|p| p.name().to_string()));
        let table_rows: Vec<Vec<String>> = best
            .iter()
            .enumerate()
            .zip(&observed)
            .map(|((rank, row), values)| {
                let mut cells = vec![
                    (rank + 1).to_string(),
                    row.evaluation.objective.map(|o| render::objective(&info.objective, o)).unwrap_or_default(),
                ];
                cells.extend(measured.iter().map(|key| {
                    values.get(*key).and_then(serde_json::Value::as_f64).map(report::significant).unwrap_or_default()
                }));
                cells.extend(
                    info.params.iter().map(|p| row.config.get(p.name()).map(|v| v.to_string()).unwrap_or_default()),
                );
                cells
            })
            .collect();
        println!("{}", render::table(&header, &table_rows));
    }
    if args.json {
        println!("{}", serde_json::Value::Array(json_out));
    }
    Ok(ExitCode::SUCCESS)
}
