//! What a run's summary says to people and to programs: the text the CLI prints, the
//! JSON both fronts read, the formatting of durations, objectives and tables, the HTML
//! report of a store ([`html`]) and the charts ([`charts`], [`plot`]). One place, so that
//! the CLI, the Python package and reports say the same thing.

pub mod charts;
pub mod html;
pub mod plot;

use std::time::Duration;

use kerntune_engine::StopReason;
use kerntune_pipeline::controls::ControlsReport;
use kerntune_pipeline::finalists::Verdict;
use kerntune_pipeline::schedule::ScheduleReport;
use kerntune_pipeline::ClockSpan;
use kerntune_space::{Setting, Space};
use kerntune_store::{Costs, Landscape, Objective};
use serde_json::{json, Value as Json};

use crate::{Compilation, CompileReport, Finalists, RunSummary, SimulationSummary};

/// Appends one line to a report.
macro_rules! say {
    ($out:ident, $($arg:tt)*) => {{
        $out.push_str(&format!($($arg)*));
        $out.push('\n');
    }};
}

/// `350 ms`, `4.2 s`, `4m 39s`, `2h 05m`.
pub fn duration(d: Duration) -> String {
    let seconds = d.as_secs_f64();
    if seconds < 1.0 {
        format!("{:.0} ms", seconds * 1e3)
    } else if seconds < 60.0 {
        format!("{seconds:.1} s")
    } else if seconds < 3600.0 {
        format!("{}m {:02}s", (seconds / 60.0) as u64, (seconds % 60.0) as u64)
    } else {
        format!("{}h {:02}m", (seconds / 3600.0) as u64, ((seconds % 3600.0) / 60.0) as u64)
    }
}

/// An objective value with its unit when the unit is known.
pub fn objective(objective: &Objective, value: f64) -> String {
    if value != 0.0 && value.abs() < 1e-3 {
        // Joules per launch and the like: four decimals would show nothing.
        let unit = if objective.name == "time" { "ms" } else { objective.name.as_str() };
        return format!("{} {unit}", Significant(value));
    }
    let digits = if value.abs() >= 100.0 {
        1
    } else if value.abs() >= 1.0 {
        3
    } else {
        4
    };
    match objective.name.as_str() {
        "time" => format!("{value:.digits$} ms"),
        name => format!("{value:.digits$} {name}"),
    }
}

/// Where the time went, as one line.
pub fn costs(costs: &Costs) -> String {
    let parts = [
        ("compile", costs.compile_s),
        ("verify", costs.verify_s),
        ("benchmark", costs.benchmark_s),
        ("framework", costs.framework_s),
        ("strategy", costs.strategy_s),
    ];
    parts
        .iter()
        .map(|(name, s)| format!("{name} {}", duration(Duration::from_secs_f64(*s))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A left-aligned text table with a header row.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(header)];
    out.extend(rows.iter().map(|r| line(r)));
    out.join("\n")
}

/// What re-timing the finalists found, as lines.
pub fn finalists_text(finalists: &Finalists) -> String {
    let mut out = String::new();
    let report = &finalists.report;
    let control = &report.control;
    say!(
        out,
        "The best {} timed again, each against the search's best in {} interleaved rounds over {} reloads; \
         control, the best against a copy of itself: {:.4} (95% CI {:.4} to {:.4}).",
        finalists.configs.len(),
        report.rounds,
        report.blocks,
        control.ratio,
        control.low,
        control.high
    );
    for (description, ratio) in finalists.descriptions.iter().skip(1).zip(&report.contenders) {
        say!(
            out,
            "  {description}: {:.4} of the best's time (95% CI {:.4} to {:.4})",
            ratio.ratio,
            ratio.low,
            ratio.high
        );
    }
    if let Some(clocks) = &report.clocks {
        say!(out, "{}", clock_span(clocks));
    }
    say!(
        out,
        "{}",
        match report.verdict {
            Verdict::LeadHolds => "The search's best holds its lead beyond the control's noise.".to_string(),
            Verdict::Tie => "A tie within noise: the search's best is kept.".to_string(),
            Verdict::Overtaken => format!(
                "{} is faster beyond the control's noise and becomes the best.",
                finalists.descriptions[report.winner]
            ),
        }
    );
    out
}

/// The clocks over interleaved rounds, as one line.
pub fn clock_span(clocks: &ClockSpan) -> String {
    let mut line = match (clocks.sm_mhz_low, clocks.sm_mhz_high) {
        (Some(low), Some(high)) if low == high => format!("SM clock {high} MHz throughout"),
        (Some(low), Some(high)) => format!("SM clock {low} to {high} MHz"),
        _ => "SM clock not read".to_string(),
    };
    if let Some(celsius) = clocks.temperature_c_high {
        line.push_str(&format!(", up to {celsius} °C"));
    }
    if !clocks.throttle_reasons.is_empty() {
        line.push_str(&format!(", slowed by {}", clocks.throttle_reasons.join(", ")));
    }
    if clocks.moved() {
        line.push_str(
            ": the clocks moved, but each round runs both kernels under the same clocks, so the ratios stand",
        );
    }
    format!("Clocks over the rounds: {line}.")
}

/// The line that opens the schedule stage.
pub fn schedule_start_text(options: &kerntune_pipeline::schedule::ScheduleOptions) -> String {
    format!(
        "\nTuning the native schedule of the best configuration ({} candidates, {})...\n",
        options.budget, options.method
    )
}

/// What each configuration's outputs are checked on, as a sentence: `sets` input sets in
/// all (as [`RunSummary::verified_sets`] counts them), of which one per edge size in
/// `sizes`; `own` names the setup's inputs ("the spec's").
pub fn verification_text(sets: u32, sizes: &[String], own: &str) -> String {
    if sets == 0 {
        return "Outputs are not checked.".to_string();
    }
    let redrawn = sets as usize - 1 - sizes.len();
    let mut parts = vec![own.to_string()];
    if redrawn > 0 {
        parts.push(format!("{redrawn} redrawn"));
    }
    match sizes.len() {
        0 => {}
        1 => parts.push(format!("1 at the edge size {}", sizes[0])),
        n => parts.push(format!("{n} at the edge sizes {}", sizes.join("; "))),
    }
    match parts.len() {
        1 => format!("Outputs are checked on {own} inputs."),
        2 => format!("Outputs are checked on {sets} input sets: {} and {}.", parts[0], parts[1]),
        _ => format!("Outputs are checked on {sets} input sets: {}, {} and {}.", parts[0], parts[1], parts[2]),
    }
}

/// A tuning's summary, as lines.
pub fn tuning_text(run: &RunSummary) -> String {
    let mut out = String::new();
    let objective = Objective { name: run.objective.clone(), higher_is_better: run.higher_is_better };
    let statuses: Vec<String> =
        run.statuses.iter().filter(|(s, _)| **s != "ok").map(|(s, n)| format!("{n} {s}")).collect();
    say!(
        out,
        "\n{} configurations evaluated ({} answered by the store){}; stopped: {}.",
        run.evaluations,
        run.from_store,
        if statuses.is_empty() { String::new() } else { format!(", of which {}", statuses.join(", ")) },
        run.stop
    );
    match &run.best {
        Some(best) => {
            let timing = best
                .time_ms
                .map(|ms| format!(" (median {ms:.4} ms of {} timed runs)", best.samples))
                .unwrap_or_default();
            say!(out, "Best: {}{timing}", self::objective(&objective, best.objective));
            say!(out, "  {}", best.description);
            let measured = run.results.iter().rev().find(|r| r.id == best.id && !r.observables.is_empty());
            if let Some(row) = measured {
                say!(out, "  measured: {}", observables_text(&row.observables));
            }
        }
        None => say!(out, "No configuration passed verification."),
    }
    if !run.verified_sizes.is_empty() {
        // The run's opening line says what is checked; this reminds that the winner was
        // also right at sizes it was not timed at.
        say!(out, "{}", verification_text(run.verified_sets, &run.verified_sizes, "the spec's"));
    }
    if let Some(compiler) = &run.compiler {
        say!(out, "Compiled with {compiler}.");
    }
    let costs: &Costs = &run.costs;
    let seconds = Duration::from_secs_f64;
    let compile = match run.compile_workers {
        Some(n) => format!("compile {} summed over {n} workers", duration(seconds(costs.compile_s))),
        None => "nothing compiled".to_string(),
    };
    say!(
        out,
        "Wall time {}: {compile}; verify {}, benchmark {}, framework {}{}.",
        duration(seconds(run.wall_s)),
        duration(seconds(costs.verify_s)),
        duration(seconds(costs.benchmark_s)),
        duration(seconds(costs.framework_s)),
        run.framework_median_ms.map(|m| format!(" (median {m:.2} ms per configuration)")).unwrap_or_default()
    );
    if let (Some(timed), Some(all)) = (run.gpu_busy_timed_runs, run.gpu_busy_tuned_kernels) {
        say!(
            out,
            "While benchmarking, the GPU ran the tuned kernels {:.0}% of the time ({:.0}% in timed runs, the rest in checked runs).",
            all * 100.0,
            timed * 100.0
        );
    }
    if let Some(finalists) = &run.finalists {
        out.push_str(&finalists_text(finalists));
    }
    if let Some(why) = &run.finalists_failed {
        out.push_str(&format!("The finalists could not be timed again ({why}); the search's best stands.\n"));
    }
    if let Some(pareto) = &run.pareto {
        out.push_str(&pareto_text(pareto));
    }
    if run.stop == StopReason::Interrupted {
        say!(out, "Interrupted: every finished evaluation is stored; run the same command again to resume.");
    }
    out
}

/// Energy, power and clocks as `energy_J 0.00021, power_W 312.4, clock_MHz 1980`.
pub fn observables_text(observables: &serde_json::Map<String, Json>) -> String {
    let value = |v: &Json| v.as_f64().map_or_else(|| v.to_string(), |f| format!("{}", Significant(f)));
    observables.iter().map(|(k, v)| format!("{k} {}", value(v))).collect::<Vec<_>>().join(", ")
}

/// A measured value with four significant digits, as reports print them.
pub fn significant(value: f64) -> String {
    Significant(value).to_string()
}

/// Four significant digits, without an exponent for everyday magnitudes.
struct Significant(f64);

impl std::fmt::Display for Significant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        if v == 0.0 || !v.is_finite() {
            return write!(f, "{v}");
        }
        let magnitude = v.abs().log10().floor() as i32;
        if (-4..6).contains(&magnitude) {
            write!(f, "{v:.*}", (3 - magnitude).max(0) as usize)
        } else {
            write!(f, "{v:.3e}")
        }
    }
}

/// The Pareto front, one configuration a line, ordered by the first axis.
pub fn pareto_text(pareto: &crate::Pareto) -> String {
    let mut out = String::new();
    let [a, b] = &pareto.axes;
    say!(out, "Pareto front of {a} and {b} (lower is better on both): {} configurations.", pareto.front.len());
    for point in &pareto.front {
        say!(
            out,
            "  {a} {}, {b} {}: {}",
            Significant(point.values[0]),
            Significant(point.values[1]),
            point.description
        );
    }
    if pareto.unmeasured > 0 {
        say!(out, "  {} configurations lack {a} or {b} and take no part.", pareto.unmeasured);
    }
    out
}

/// A tuning's summary as `kerntune tune --json` prints it and the Python package reads it.
pub fn tuning_json(run: &RunSummary) -> Json {
    serde_json::to_value(run).unwrap_or(Json::Null)
}

/// The compiler-controls stage in a line: what CompileIQ tried and what was kept.
pub fn controls_text(report: &ControlsReport) -> String {
    let kept = match (&report.best_acf, report.kept) {
        (Some(acf), true) => format!("kept {acf}: faster than the best without an ACF beyond the A/A control"),
        (Some(acf), false) => format!("kept none: the fastest, {acf}, did not beat the A/A control"),
        (None, _) => "kept none: every candidate failed".to_string(),
    };
    format!(
        "CompileIQ: {} ACF files in {} generations, {} failed; {kept}.\n",
        report.evaluations, report.generations, report.failed
    )
}

/// The schedule stage's report, as lines.
pub fn schedule_text(report: &ScheduleReport) -> String {
    let mut out = String::new();
    say!(
        out,
        "Schedule of {}: {} instructions, {} legal moves at the start; {} candidates in {:.1} s ({} rejected for differing outputs).",
        report.kernel, report.instructions, report.legal_moves, report.evaluations, report.search_seconds, report.rejected
    );
    for reason in &report.rejected_reasons {
        say!(out, "  rejected: {reason}");
    }
    let [fastest, median, slowest] = report.search_range;
    say!(
        out,
        "Candidates timed at {fastest:.4} to {slowest:.4} of the original in the search (median {median:.4}), each a single measurement."
    );
    if let Some(best) = report.finalists.iter().map(|f| f.ratio).min_by(f64::total_cmp) {
        say!(
        out,
            "The {} fastest timed again ({} rounds each, interleaved with the original): ratios {best:.4} to {:.4}; the lowest goes on.",
            report.finalists.len(),
            report.finalist_rounds,
            report.finalists.iter().map(|f| f.ratio).max_by(f64::total_cmp).unwrap_or(best)
        );
    }
    say!(
        out,
        "Interleaved A/B over {} rounds in {} reloads: original {:.4} ms, winner {:.4} ms ({} moves): time ratio {:.4} (95% CI {:.4} to {:.4}).",
        report.ab_rounds, report.ab_blocks, report.original_median_ms, report.candidate_median_ms, report.moves, report.ratio, report.ratio_low, report.ratio_high
    );
    say!(
        out,
        "Control, the original against a copy of itself: time ratio {:.4} (95% CI {:.4} to {:.4}).",
        report.control_ratio,
        report.control_low,
        report.control_high
    );
    match (&report.cubin, report.checked_sets) {
        (Some(_), sets) => say!(
            out,
            "Kept: outputs identical bit for bit on {sets} random input sets; stored as the configuration's schedule."
        ),
        (None, 0) => say!(out, "No schedule beat the original; the original is kept."),
        (None, sets) => say!(
            out,
            "Not kept: {} of {sets} input sets differed or the interval does not lie below the control's{}.",
            report.differing_sets,
            report.first_difference.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
        ),
    }
    out
}

/// A simulation's summary as `kerntune simulate --json` prints it.
pub fn simulation_json(run: &SimulationSummary, landscape: &Landscape) -> Json {
    let (summary, strategy, seed) = (&run.summary, &run.strategy, run.seed);
    json!({
        "best": summary.best.as_ref().map(|b| json!({"config": b.config, "objective": b.objective})),
        "evaluations": summary.evaluations,
        "failed": summary.failed,
        "trace": summary.trace,
        "objective": landscape.objective.name,
        "higher_is_better": landscape.objective.higher_is_better,
        "optimum": landscape.optimum(),
        "strategy": strategy,
        "seed": seed,
        "from_store": summary.from_store,
        "stop": summary.stop,
        "simulated_seconds": summary.elapsed.as_secs_f64(),
    })
}

/// A simulation's summary, as lines; `kept` says whether a store keeps the evaluations.
pub fn simulation_text(run: &SimulationSummary, landscape: &Landscape, space: &Space, kept: bool) -> String {
    let summary = &run.summary;
    let mut out = String::new();
    let objective = &landscape.objective;
    match &summary.best {
        Some(best) => {
            let found_at = summary.trace.iter().position(|p| p.objective == Some(best.objective)).map_or(0, |i| i + 1);
            let optimum = landscape
                .optimum()
                .map(|o| {
                    let ratio = if objective.higher_is_better { best.objective / o } else { o / best.objective };
                    format!(
                        " (the landscape's optimum is {}: {:.1}% of it)",
                        self::objective(objective, o),
                        100.0 * ratio
                    )
                })
                .unwrap_or_default();
            say!(out, "\nBest: {} after {found_at} evaluations{optimum}", self::objective(objective, best.objective));
            say!(out, "  {}", space.describe(best.id));
        }
        None => say!(out, "\nNo configuration succeeded."),
    }
    say!(
        out,
        "Evaluations: {} ({} failed, {} answered by the store); stopped: {}.",
        summary.evaluations,
        summary.failed,
        summary.from_store,
        summary.stop
    );
    say!(out, "Simulated tuning time: {} ({}).", duration(summary.elapsed), costs(&summary.costs));
    if summary.stop == StopReason::Interrupted {
        if kept {
            say!(out, "Interrupted: every finished evaluation is in the store; run the same command again to resume.");
        } else {
            say!(out, "Interrupted. (Without {} nothing was kept.)", Setting::DB);
        }
    }
    out
}

/// A compile-only run, as lines.
pub fn compile_text(report: &CompileReport, space: &Space, arch: &str, db: &str) -> String {
    let mut out = String::new();
    say!(
        out,
        "Compiled {} of {} configurations for {arch} ({} already in the store) in {:.1} s ({:.1} s of compiling on {} workers); {} failed. Cubins stored in {db}.",
        report.compiled(),
        space.len(),
        report.from_store(),
        report.wall_s,
        report.compile_s,
        report.workers,
        report.failures().count()
    );
    for (config, reason) in report.failures().take(3) {
        say!(out, "  {}: {}", space.describe(config.id), reason.lines().next().unwrap_or_default());
    }
    out
}

/// A compile-only run as `kerntune tune --compile-only --json` prints it.
pub fn compile_json(report: &CompileReport, space: &Space, arch: &str) -> Json {
    json!({"count": space.len(), "compiled": report.compiled(), "from_store": report.from_store(),
           "failed": report.failures().count(), "wall_s": report.wall_s, "compile_s": report.compile_s,
           "workers": report.workers, "arch": arch, "interrupted": report.interrupted})
}

/// One configuration of a compile-only run, as the Python package reads it.
pub fn compiled_json(config: &crate::CompiledConfig) -> Json {
    let mut row = json!({"config": config.config, "seconds": config.seconds, "from_store": config.from_store});
    match &config.outcome {
        Compilation::Compiled { cubin, symbol, launch } => {
            row["status"] = json!("compiled");
            row["symbol"] = json!(symbol);
            row["launch"] = json!(launch);
            row["cubin"] = cubin.as_ref().map_or(Json::Null, |c| json!(kerntune_pipeline::protocol::Bytes(c.clone())));
        }
        Compilation::Failed { status, reason } => {
            row["status"] = json!(status.as_str());
            row["reason"] = json!(reason);
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controls_line_says_which_acf_was_kept_or_why_none_was() {
        let report: ControlsReport = serde_json::from_value(json!({
            "evaluations": 12, "failed": 3, "generations": 2, "best_acf": "/acf/7.acf", "best_ms": 1.5,
            "failures": [], "directory": "/acf", "ab": null, "kept": true
        }))
        .expect("a report");
        let kept = "CompileIQ: 12 ACF files in 2 generations, 3 failed; kept /acf/7.acf: faster than the best without an ACF beyond the A/A control.\n";
        assert_eq!(controls_text(&report), kept);
        let tie = ControlsReport { kept: false, ..report.clone() };
        assert!(controls_text(&tie).ends_with("kept none: the fastest, /acf/7.acf, did not beat the A/A control.\n"));
        let failed = ControlsReport { best_acf: None, best_ms: None, ..report };
        assert!(controls_text(&failed).ends_with("kept none: every candidate failed.\n"));
    }

    #[test]
    fn small_measured_values_keep_four_significant_digits() {
        let energy = Objective { name: "energy".into(), higher_is_better: false };
        assert_eq!(objective(&energy, 2.134e-4), "0.0002134 energy");
        assert_eq!(objective(&Objective::time(), 0.0523), "0.0523 ms");
        assert_eq!(significant(312.44), "312.4");
        assert_eq!(significant(1.5e-7), "1.500e-7");
        let Json::Object(observed) = json!({"energy_J": 2.5e-4, "power_W": 312.44}) else { unreachable!() };
        assert_eq!(observables_text(&observed), "energy_J 0.0002500, power_W 312.4");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(Duration::from_millis(350)), "350 ms");
        assert_eq!(duration(Duration::from_secs_f64(4.24)), "4.2 s");
        assert_eq!(duration(Duration::from_secs(279)), "4m 39s");
        assert_eq!(duration(Duration::from_secs(7500)), "2h 05m");
    }

    #[test]
    fn a_clock_span_reads_as_one_line() {
        let steady = ClockSpan {
            sm_mhz_low: Some(1980),
            sm_mhz_high: Some(1980),
            temperature_c_high: Some(51),
            throttle_reasons: Vec::new(),
        };
        assert_eq!(clock_span(&steady), "Clocks over the rounds: SM clock 1980 MHz throughout, up to 51 °C.");
        let moved = ClockSpan { sm_mhz_low: Some(1605), throttle_reasons: vec!["sw_power_cap".into()], ..steady };
        let line = clock_span(&moved);
        assert!(line.starts_with("Clocks over the rounds: SM clock 1605 to 1980 MHz, up to 51 °C, slowed by sw_power_cap: the clocks moved"), "{line}");
    }

    #[test]
    fn tables_align_columns() {
        let t = table(&["a".into(), "bb".into()], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t, "a     bb\nlong  x");
    }
}
