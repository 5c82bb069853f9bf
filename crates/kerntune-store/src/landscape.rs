//! Recorded tuning landscapes: every configuration of a brute-force run with its outcome
//! and what it cost, as the readers of `formats` give them from a Kernel Tuner cache
//! file or a T4 file (plain or gzipped). The simulation backend replays one as a device.

use kerntune_space::{Param, Space};
use serde_json::Value as Json;

use crate::{fingerprint, Evaluation, Objective, TuningInfo};

/// The file format a landscape came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    KernelTunerCache,
    T4,
}

/// One configuration of a landscape: its value indexes and recorded outcome.
#[derive(Debug, Clone)]
pub struct Record {
    pub config: Vec<usize>,
    pub evaluation: Evaluation,
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Landscape {
    pub kernel_name: String,
    pub device_name: String,
    pub problem_size: Json,
    pub params: Vec<Param>,
    pub objective: Objective,
    pub records: Vec<Record>,
    pub format: Format,
}

impl Landscape {
    /// The search space of a landscape: exactly the configurations it records.
    pub fn space(&self) -> Result<Space, kerntune_space::SpaceError> {
        Space::from_configs(self.params.clone(), self.records.iter().map(|r| r.config.clone()))
    }

    /// The identity this landscape's results have in a store, shared by `simulate`,
    /// `import` and `export`.
    pub fn tuning(&self) -> TuningInfo {
        let params = crate::params_json(&self.params).to_string();
        TuningInfo {
            kernel: format!("landscape:{}", fingerprint(&[self.kernel_name.as_str(), params.as_str()])),
            kernel_name: self.kernel_name.clone(),
            device: self.device_name.clone(),
            problem: self.problem_size.to_string(),
            params: self.params.clone(),
            objective: self.objective.clone(),
        }
    }

    /// The best valid objective recorded, the optimum a search can reach.
    pub fn optimum(&self) -> Option<f64> {
        self.records.iter().filter_map(|r| r.evaluation.valid_objective()).reduce(|best, o| {
            if self.objective.is_better(o, best) {
                o
            } else {
                best
            }
        })
    }
}
