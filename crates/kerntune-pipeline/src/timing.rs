//! The measurement protocol of the benchmark worker: how many samples, how long, when to
//! stop a configuration early, whether L2 is flushed, the deadlines of compiling and
//! launching. Both kernel languages read it from the same `[timing]` table.

use std::time::Duration;

use kerntune_engine::parse_duration;
use serde::Deserialize;
use serde_json::Value as Json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flush {
    /// Write a buffer of twice the device's L2 size before each timed launch.
    L2,
    None,
}

/// Whether and how a configuration clearly slower than the best is stopped after its
/// first samples ([`crate::early_stop`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EarlyStop {
    /// The factor follows the noise this run measures.
    Auto,
    /// A fixed factor of the best median.
    Fixed(f64),
    Off,
}

/// The measurement protocol.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    pub flush: Flush,
    pub min_samples: usize,
    pub max_samples: usize,
    /// Stop sampling once the 95% confidence half-width of the median is below this
    /// fraction of the median.
    pub ci_target: f64,
    /// Kernel time per configuration after which sampling stops (past `min_samples`).
    pub time_cap: Duration,
    /// Stop a configuration whose samples are all above a factor times the best median.
    pub early_stop: EarlyStop,
    pub early_stop_samples: usize,
    pub launch_timeout: Duration,
    /// The longest a compile may take.
    pub compile_timeout: Duration,
    /// The limit adapts to the run's compile times, within `compile_timeout`
    /// ([`crate::pool::CompileLimit`]).
    #[serde(default)]
    pub compile_timeout_adapts: bool,
    /// Seed of the random input data.
    pub seed: u64,
    /// Time each sample as one CUDA graph of many launches (time per launch = the graph's
    /// time / its launches): for kernels of a few microseconds, whose single-launch
    /// events measure mostly launch overhead. Off by default.
    #[serde(default)]
    pub graph: bool,
    /// Whether the benchmark worker measures energy and power (an extra block of
    /// launches per configuration, see `bench::energy`).
    #[serde(default)]
    pub energy: EnergyMode,
}

/// When energy and power are measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnergyMode {
    /// Not measured: no extra launches.
    #[default]
    Off,
    /// Measured where NVML reads the energy counter, absent from the results elsewhere
    /// (`[timing] energy = true`, an observer, a Pareto front over energy).
    Observe,
    /// The objective needs it: a worker that cannot read the energy counter refuses to start.
    Require,
}

impl EnergyMode {
    /// The stronger of two needs.
    pub fn at_least(self, other: EnergyMode) -> EnergyMode {
        match (self, other) {
            (EnergyMode::Require, _) | (_, EnergyMode::Require) => EnergyMode::Require,
            (EnergyMode::Observe, _) | (_, EnergyMode::Observe) => EnergyMode::Observe,
            _ => EnergyMode::Off,
        }
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            flush: Flush::L2,
            min_samples: 7,
            max_samples: 200,
            ci_target: 0.01,
            time_cap: Duration::from_secs(1),
            early_stop: EarlyStop::Auto,
            early_stop_samples: 2,
            launch_timeout: Duration::from_secs(10),
            compile_timeout: Duration::from_secs(60),
            compile_timeout_adapts: true,
            seed: 0,
            graph: false,
            energy: EnergyMode::Off,
        }
    }
}

impl Timing {
    /// The protocol from a table in the spec's `[timing]` format (as JSON).
    pub fn from_json(table: &Json) -> Result<Timing, String> {
        let raw: RawTiming = serde_json::from_value(table.clone()).map_err(|e| e.to_string())?;
        Timing::from_raw(&raw)
    }

    /// The protocol from the `[timing]` table as written; absent keys keep their defaults.
    pub fn from_raw(raw: &RawTiming) -> Result<Timing, String> {
        let mut timing = Timing::default();
        let duration = |text: &Option<String>, key: &str, default: Duration| -> Result<Duration, String> {
            text.as_deref().map_or(Ok(default), |t| parse_duration(t).map_err(|e| format!("{key}: {e}")))
        };
        timing.flush = match raw.flush.as_deref() {
            None | Some("l2") => Flush::L2,
            Some("none") => Flush::None,
            Some(other) => return Err(format!("flush '{other}': use \"l2\" or \"none\"")),
        };
        timing.min_samples = raw.min_samples.unwrap_or(timing.min_samples).max(1);
        timing.max_samples = raw.max_samples.unwrap_or(timing.max_samples).max(timing.min_samples);
        timing.ci_target = raw.ci_target.unwrap_or(timing.ci_target);
        timing.time_cap = duration(&raw.time_cap, "time_cap", timing.time_cap)?;
        timing.early_stop = match &raw.early_stop {
            None => timing.early_stop,
            Some(Json::String(text)) if text == "auto" => EarlyStop::Auto,
            Some(Json::Bool(false)) => EarlyStop::Off,
            Some(Json::Number(n)) => match n.as_f64() {
                Some(f) if f > 0.0 => EarlyStop::Fixed(f.max(1.0)),
                _ => EarlyStop::Off,
            },
            Some(other) => return Err(format!("early_stop: {other} (\"auto\", a factor such as 1.1, or false)")),
        };
        timing.early_stop_samples = raw.early_stop_samples.unwrap_or(timing.early_stop_samples).max(1);
        timing.launch_timeout = duration(&raw.launch_timeout, "launch_timeout", timing.launch_timeout)?;
        if raw.compile_timeout.as_deref().is_some_and(|text| text != "auto") {
            timing.compile_timeout = duration(&raw.compile_timeout, "compile_timeout", timing.compile_timeout)?;
            timing.compile_timeout_adapts = false;
        }
        timing.seed = raw.seed.unwrap_or(timing.seed);
        timing.graph = raw.graph.unwrap_or(timing.graph);
        if raw.energy == Some(true) {
            timing.energy = EnergyMode::Observe;
        }
        Ok(timing)
    }
}

/// The `[timing]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTiming {
    #[serde(default)]
    pub flush: Option<String>,
    #[serde(default)]
    pub min_samples: Option<usize>,
    #[serde(default)]
    pub max_samples: Option<usize>,
    #[serde(default)]
    pub ci_target: Option<f64>,
    #[serde(default)]
    pub time_cap: Option<String>,
    /// Stop measuring a configuration once it is clearly slower than a factor times the
    /// best median: `"auto"` (the factor follows this run's noise), a factor, or `false`
    /// (0 too) to turn it off.
    #[serde(default)]
    pub early_stop: Option<Json>,
    #[serde(default)]
    pub early_stop_samples: Option<usize>,
    #[serde(default)]
    pub launch_timeout: Option<String>,
    /// `"auto"` (the default): at most 60 s, and once 16 compiles succeeded, 4 x the 90th
    /// percentile of this run's compile times (at least 10 s); a duration fixes it.
    #[serde(default)]
    pub compile_timeout: Option<String>,
    #[serde(default)]
    pub seed: Option<u64>,
    /// Time each sample as a CUDA graph of many launches (for kernels of a few µs).
    #[serde(default)]
    pub graph: Option<bool>,
    /// Measure energy and power with every configuration, whatever the objective.
    #[serde(default)]
    pub energy: Option<bool>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn early_stop(value: Json) -> Result<EarlyStop, String> {
        Timing::from_json(&json!({ "early_stop": value })).map(|t| t.early_stop)
    }

    #[test]
    fn early_stop_is_auto_unless_told_otherwise() {
        assert_eq!(Timing::from_json(&json!({})).unwrap().early_stop, EarlyStop::Auto);
        assert_eq!(early_stop(json!("auto")), Ok(EarlyStop::Auto));
        assert_eq!(early_stop(json!(1.2)), Ok(EarlyStop::Fixed(1.2)));
        // A factor below 1 would stop configurations faster than the best.
        assert_eq!(early_stop(json!(0.5)), Ok(EarlyStop::Fixed(1.0)));
        assert_eq!(early_stop(json!(false)), Ok(EarlyStop::Off));
        assert_eq!(early_stop(json!(0)), Ok(EarlyStop::Off));
        let error = early_stop(json!("fast")).unwrap_err();
        assert!(error.contains("\"auto\""), "{error}");
    }

    #[test]
    fn the_compile_timeout_adapts_unless_a_duration_fixes_it() {
        let auto = Timing::from_json(&json!({})).unwrap();
        assert!(auto.compile_timeout_adapts);
        assert_eq!(auto.compile_timeout, Duration::from_secs(60));
        assert!(Timing::from_json(&json!({ "compile_timeout": "auto" })).unwrap().compile_timeout_adapts);
        let fixed = Timing::from_json(&json!({ "compile_timeout": "10s" })).unwrap();
        assert!(!fixed.compile_timeout_adapts);
        assert_eq!(fixed.compile_timeout, Duration::from_secs(10));
    }
}
