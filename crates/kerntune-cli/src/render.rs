//! Rendering on a terminal: progress bars and the exit code. What a run's summary says
//! is `kerntune_run::report`'s.

pub use kerntune_run::report::{duration, objective, table};

use indicatif::{ProgressBar, ProgressStyle};
use kerntune_store::Objective;

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

/// A progress bar on standard error over `total` things counted in `unit`s (a spinner when
/// the total is unknown). It is drawn only when standard error is a terminal (indicatif
/// hides it elsewhere) and never when `hidden` (`--json`): a run without a terminal
/// prints nothing while it goes, then its summary.
pub fn progress(total: Option<u64>, unit: &str, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(total) => ProgressBar::new(total),
        None => ProgressBar::new_spinner(),
    };
    let template = if total.is_some() {
        format!("{{bar:30.cyan/blue}} {{pos}}/{{len}} {unit}  {{msg}}  [{{elapsed_precise}}]")
    } else {
        format!("{{spinner}} {{pos}} {unit}  {{msg}}  [{{elapsed_precise}}]")
    };
    if let Ok(style) = ProgressStyle::with_template(&template) {
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
/// How a run that ended with `stop` (and `failure`, when every configuration failed)
/// exits; the failure is said on standard error.
pub fn exit_code(stop: kerntune_engine::StopReason, failure: Option<&str>) -> std::process::ExitCode {
    if stop == kerntune_engine::StopReason::Interrupted {
        return std::process::ExitCode::from(crate::interrupt::INTERRUPTED_EXIT);
    }
    match failure {
        Some(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
        None => std::process::ExitCode::SUCCESS,
    }
}
