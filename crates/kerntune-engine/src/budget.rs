//! When a tuning run stops.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// Limits of a run; any that is set can end it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budget {
    /// Distinct configurations evaluated (a failed one counts, as it cost a compile).
    pub max_fevals: Option<usize>,
    /// On the backend's clock (simulated time in simulation).
    pub time_limit: Option<Duration>,
    /// Stop once the best objective is at least this good.
    pub target: Option<f64>,
    /// Stop once the strategy estimates that more evaluations are unlikely to pay: its
    /// [`improvement_chance`](kerntune_search::Strategy::improvement_chance) is below
    /// [`AUTO_STOP_CHANCE`]. Strategies without such an estimate ignore it.
    pub auto_stop: bool,
}

/// The estimated chance of beating the best by more than the noise below which a run that
/// stops by itself stops (docs/design-notes.md, "Stopping by itself").
pub const AUTO_STOP_CHANCE: f64 = 0.05;

/// Evaluations a run that stops by itself makes at least: the budget such a run had before
/// it could stop by itself ([`crate::DEFAULT_MAX_FEVALS`]), so it never does less.
pub const AUTO_STOP_FLOOR: usize = crate::DEFAULT_MAX_FEVALS;

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    MaxFevals,
    TimeLimit,
    Target,
    /// Every configuration of the space has been evaluated.
    Exhausted,
    /// The strategy had nothing more to propose.
    StrategyFinished,
    /// The strategy kept proposing only configurations already known.
    StrategyStalled,
    Interrupted,
    /// The first configurations all failed for one reason (`Summary::common_failure`), and
    /// none worked: the kernel, not a configuration, is at fault.
    AllFailed,
    /// The run stops by itself: the strategy estimated that an unevaluated configuration
    /// is unlikely to beat the best by more than the noise.
    Converged,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopReason::MaxFevals => "evaluation budget reached",
            StopReason::TimeLimit => "time limit reached",
            StopReason::Target => "target objective reached",
            StopReason::Exhausted => "every configuration evaluated",
            StopReason::StrategyFinished => "the strategy had nothing more to propose",
            StopReason::StrategyStalled => "the strategy proposed only known configurations",
            StopReason::Interrupted => "interrupted",
            StopReason::AllFailed => "every configuration failed the same way",
            StopReason::Converged => "converged: more evaluations are unlikely to beat the best by more than the noise",
        })
    }
}

/// Parses durations such as `30s`, `5m`, `1h30m`, `250ms` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration '{text}' (examples: 90, 30s, 5m, 1h30m, 250ms)");
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<f64>() {
        return if seconds.is_finite() && seconds >= 0.0 { Ok(Duration::from_secs_f64(seconds)) } else { Err(bad()) };
    }
    let mut total = 0.0;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let (number, tail) = rest.split_at(split);
        let value: f64 = number.parse().map_err(|_| bad())?;
        let unit_end = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        total += value
            * match unit.trim() {
                "ms" => 1e-3,
                "s" | "sec" => 1.0,
                "m" | "min" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad()),
            };
        rest = tail;
    }
    if trimmed.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_common_spellings() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        for bad in ["", "ten", "5 parsecs", "-1", "s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
