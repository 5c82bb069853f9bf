//! The outcome of evaluating one configuration, as it is stored and reported.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// How an evaluation ended. Only `Ok` has an objective that can win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// The compiler failed, crashed or timed out.
    CompileFailed,
    /// The kernel could not be loaded or launched, or it crashed.
    RuntimeFailed,
    /// The kernel ran but its output differs from the reference.
    InvalidOutput,
    /// The kernel did not finish within the time allowed.
    Timeout,
    /// The configuration exceeds a device limit (threads, shared memory, registers).
    InvalidConfig,
    /// Measurement stopped once the configuration was clearly slower than the best.
    EarlyStopped,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Ok,
        Status::CompileFailed,
        Status::RuntimeFailed,
        Status::InvalidOutput,
        Status::Timeout,
        Status::InvalidConfig,
        Status::EarlyStopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::CompileFailed => "compile_failed",
            Status::RuntimeFailed => "runtime_failed",
            Status::InvalidOutput => "invalid_output",
            Status::Timeout => "timeout",
            Status::InvalidConfig => "invalid_config",
            Status::EarlyStopped => "early_stopped",
        }
    }

    /// A failure in the sense of the tuning budget: the configuration produced no
    /// usable measurement. Early-stopped configurations were measured (and were slow).
    pub fn is_failure(self) -> bool {
        !matches!(self, Status::Ok | Status::EarlyStopped)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Status::ALL.into_iter().find(|s| s.as_str() == text).ok_or_else(|| format!("unknown status '{text}'"))
    }
}

/// Where the time of one evaluation went, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    pub compile_s: f64,
    pub verify_s: f64,
    pub benchmark_s: f64,
    pub framework_s: f64,
    pub strategy_s: f64,
}

impl Costs {
    pub fn total(&self) -> f64 {
        self.compile_s + self.verify_s + self.benchmark_s + self.framework_s + self.strategy_s
    }

    pub fn add(&mut self, other: &Costs) {
        self.compile_s += other.compile_s;
        self.verify_s += other.verify_s;
        self.benchmark_s += other.benchmark_s;
        self.framework_s += other.framework_s;
        self.strategy_s += other.strategy_s;
    }
}

/// One evaluated configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub status: Status,
    /// Why it failed, in words a user can act on; `None` when it did not.
    pub reason: Option<String>,
    /// The objective's value (kernel time in ms unless the objective says otherwise).
    pub objective: Option<f64>,
    /// Every timed run of the kernel, in ms.
    pub samples: Vec<f64>,
    pub costs: Costs,
    /// Further named observations (metrics such as `"GFLOP/s"`).
    pub metrics: Map<String, Json>,
}

impl Evaluation {
    pub fn ok(objective: f64, samples: Vec<f64>, costs: Costs) -> Evaluation {
        Evaluation { status: Status::Ok, reason: None, objective: Some(objective), samples, costs, metrics: Map::new() }
    }

    pub fn failed(status: Status, reason: impl Into<String>, costs: Costs) -> Evaluation {
        Evaluation {
            status,
            reason: Some(reason.into()),
            objective: None,
            samples: Vec::new(),
            costs,
            metrics: Map::new(),
        }
    }

    /// The objective, if this evaluation may compete for best.
    pub fn valid_objective(&self) -> Option<f64> {
        if self.status == Status::Ok {
            self.objective.filter(|o| o.is_finite())
        } else {
            None
        }
    }

    /// The objective as measured, for a search to learn from: also that of a configuration
    /// stopped early (measured from fewer samples, and slower than the best by the early
    /// stop's bar), which cannot compete for best; never a failure's.
    pub fn measured_objective(&self) -> Option<f64> {
        match self.status {
            Status::Ok | Status::EarlyStopped => self.objective.filter(|o| o.is_finite()),
            _ => None,
        }
    }
}

/// What is optimised and in which direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    pub name: String,
    pub higher_is_better: bool,
}

impl Objective {
    pub fn time() -> Objective {
        Objective { name: "time".to_string(), higher_is_better: false }
    }

    /// The direction a name implies when nobody said: rates (`GFLOP/s`, `GB/s`) go up,
    /// everything else (time, energy) goes down.
    pub fn named(name: &str) -> Objective {
        let lower = name.to_lowercase();
        let higher_is_better = lower.ends_with("/s") || lower.contains("flops") || lower.contains("throughput");
        Objective { name: name.to_string(), higher_is_better }
    }

    /// Lower is better, whatever the objective: what strategies minimise.
    pub fn score(&self, objective: f64) -> f64 {
        if self.higher_is_better {
            -objective
        } else {
            objective
        }
    }

    pub fn is_better(&self, candidate: f64, incumbent: f64) -> bool {
        self.score(candidate) < self.score(incumbent)
    }
}
