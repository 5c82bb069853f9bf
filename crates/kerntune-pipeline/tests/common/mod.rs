//! What the pipeline's stage tests share: a language whose every configuration is one
//! kernel (assembled by a chosen ptxas where `ptxas` names one), for fake workers to compile
//! and time.

use std::time::Duration;

use kerntune_device::DeviceInfo;
use kerntune_pipeline::protocol::{Bytes, CompileJob, KernelImage, PtxasStep, Setup};
use kerntune_pipeline::{Binary, Geometry, Language, LanguageError, Timing};
use kerntune_space::Value;
use kerntune_store::TuningInfo;

pub fn gpu() -> DeviceInfo {
    DeviceInfo::compile_target("sm_90").unwrap_or_else(|e| panic!("{e}"))
}

/// A language whose every configuration is one kernel, timed by its time.
pub struct Fake {
    /// The chosen ptxas of every compile job, if any.
    pub ptxas: Option<PtxasStep>,
    /// Compile workers a tuning starts with, where fewer than it may have.
    pub first_compile_workers: Option<usize>,
}

impl Language for Fake {
    fn kernel_name(&self) -> &str {
        "k"
    }

    fn tuning_info(&self, _device: &str) -> TuningInfo {
        unreachable!("the pipeline does not ask for the tuning's identity")
    }

    fn verified_sets(&self) -> u32 {
        0
    }

    fn compile_job(&self, config: &[Value], _device: &DeviceInfo) -> Result<CompileJob, LanguageError> {
        Ok(CompileJob::Cuda {
            // A source of its own per configuration (as a real kernel's), so that the memo
            // of this process's compiles does not answer one test with another's.
            source: format!("k {config:?} {:?}", self.first_compile_workers),
            name: "k".into(),
            options: vec![],
            arch: "sm_90".into(),
            ptxas: self.ptxas.clone(),
        })
    }

    fn kernel_image(&self, _config: &[Value], binary: Binary) -> Result<KernelImage, LanguageError> {
        Ok(KernelImage {
            cubin: Bytes(binary.cubin),
            name: "k".into(),
            geometry: Geometry { grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0 },
            params: None,
            cluster_x: 1,
            edges: vec![],
        })
    }

    fn objective(
        &self,
        _config: &[Value],
        time_ms: f64,
        _metrics: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<f64, LanguageError> {
        Ok(time_ms)
    }

    fn early_stop_applies(&self) -> bool {
        true
    }

    fn setup(
        &self,
        _device: &DeviceInfo,
        _compile: &mut dyn FnMut(CompileJob) -> Result<Binary, String>,
    ) -> Result<Setup, LanguageError> {
        Ok(Setup {
            args: vec![],
            timing: Timing::default(),
            reference: None,
            tolerances: vec![],
            bitwise: false,
            verify_sets: 0,
            constants: vec![],
            outputs_dir: None,
            edges: vec![],
            relocations: vec![],
        })
    }

    fn launch_timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    fn compile_timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    fn compile_workers_to_start(&self, most: usize) -> usize {
        self.first_compile_workers.map_or(most, |first| first.min(most))
    }
}
