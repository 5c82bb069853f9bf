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
    /// Stop a configuration whose samples are all above this factor times the best median.
    pub early_stop: Option<f64>,
    pub early_stop_samples: usize,
    pub launch_timeout: Duration,
    pub compile_timeout: Duration,
    /// Seed of the random input data.
    pub seed: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            flush: Flush::L2,
            min_samples: 7,
            max_samples: 200,
            ci_target: 0.01,
            time_cap: Duration::from_secs(1),
            early_stop: Some(1.1),
            early_stop_samples: 2,
            launch_timeout: Duration::from_secs(10),
            compile_timeout: Duration::from_secs(60),
            seed: 0,
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
            Some(Json::Bool(false)) => None,
            Some(Json::Number(n)) => n.as_f64().filter(|f| *f > 0.0).map(|f| f.max(1.0)),
            Some(other) => return Err(format!("early_stop: {other} (a factor such as 1.1, or false)")),
        };
        timing.early_stop_samples = raw.early_stop_samples.unwrap_or(timing.early_stop_samples).max(1);
        timing.launch_timeout = duration(&raw.launch_timeout, "launch_timeout", timing.launch_timeout)?;
        timing.compile_timeout = duration(&raw.compile_timeout, "compile_timeout", timing.compile_timeout)?;
        timing.seed = raw.seed.unwrap_or(timing.seed);
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
    /// Stop measuring a configuration once it is clearly slower than this factor times the
    /// best median; `false` or 0 turns it off.
    #[serde(default)]
    pub early_stop: Option<Json>,
    #[serde(default)]
    pub early_stop_samples: Option<usize>,
    #[serde(default)]
    pub launch_timeout: Option<String>,
    #[serde(default)]
    pub compile_timeout: Option<String>,
    #[serde(default)]
    pub seed: Option<u64>,
}
