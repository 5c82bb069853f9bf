//! Rendering for people: durations, objectives, tables and the progress bar.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kerntune_store::{Costs, Objective};

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

/// A progress bar on standard error; drawn only when that is a terminal.
/// A bar over a share of work done, in thousandths (building a space).
pub fn share_progress(hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(1000);
    if let Ok(style) =
        ProgressStyle::with_template("building the space {bar:30.cyan/blue} {percent}%  [{elapsed_precise}]")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

pub fn progress(total: Option<u64>, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(total) => ProgressBar::new(total),
        None => ProgressBar::new_spinner(),
    };
    let template = if total.is_some() {
        "{bar:30.cyan/blue} {pos}/{len} evaluations  {msg}  [{elapsed_precise}]"
    } else {
        "{spinner} {pos} evaluations  {msg}  [{elapsed_precise}]"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Moves the bar to evaluation `feval` and shows the best objective so far.
pub fn advance(bar: &ProgressBar, objective: &Objective, feval: usize, best: Option<f64>) {
    bar.set_position(feval as u64);
    if let Some(best) = best {
        bar.set_message(format!("best {}", self::objective(objective, best)));
    }
}

/// A tuning run's exit code: 130 when interrupted, 1 (with the reason on standard error)
/// when it found no configuration that runs and passes its check, else 0.
pub fn exit_code(summary: &kerntune_engine::Summary) -> std::process::ExitCode {
    if summary.stop == kerntune_engine::StopReason::Interrupted {
        return std::process::ExitCode::from(crate::interrupt::INTERRUPTED_EXIT);
    }
    match summary.failure_message() {
        Some(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
        None => std::process::ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(Duration::from_millis(350)), "350 ms");
        assert_eq!(duration(Duration::from_secs_f64(4.24)), "4.2 s");
        assert_eq!(duration(Duration::from_secs(279)), "4m 39s");
        assert_eq!(duration(Duration::from_secs(7500)), "2h 05m");
    }

    #[test]
    fn tables_align_columns() {
        let t = table(&["a".into(), "bb".into()], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t, "a     bb\nlong  x");
    }
}
