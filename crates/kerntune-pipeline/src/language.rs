//! The seam between the pipeline and a kernel language (CUDA C, Triton): how a
//! configuration becomes a compile job, how a compiled kernel is launched and checked, and
//! what its objective is; each method that can fail says why with a [`LanguageError`] of
//! the kind the pipeline acts on. Everything else (workers, deadlines, timing) is the pipeline's.

use std::time::Duration;

use kerntune_device::DeviceInfo;
use kerntune_space::Value;
use kerntune_store::TuningInfo;

use crate::error::LanguageError;
use crate::pool::Binary;
use crate::protocol::{CompileJob, KernelImage, Setup};

/// What a language contributes to the pipeline.
pub trait Language {
    /// The kernel's name, as users call it.
    fn kernel_name(&self) -> &str;

    /// The tuning's identity in the results store on the GPU named `device`.
    fn tuning_info(&self, device: &str) -> TuningInfo;

    /// On how many input sets each configuration's outputs are checked: 0 when they are
    /// not (a run without a check says so), 1 for the setup's inputs alone (expected
    /// outputs given as data fit only those), 1 + [`Setup::verify_sets`] where a reference
    /// kernel computes the outputs of redrawn random inputs.
    fn verified_sets(&self) -> u32;

    /// The other problem sizes at which each configuration is also checked (`n = 4095`),
    /// each counted among [`Language::verified_sets`].
    fn verified_sizes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether outputs are checked against a reference.
    fn verifies(&self) -> bool {
        self.verified_sets() > 0
    }

    /// Checks, before any work, that the tools this language compiles with are there and
    /// accept the run's settings; an error says what is missing.
    fn preflight(&self) -> Result<(), LanguageError> {
        Ok(())
    }

    /// The compile job of a configuration, or why the configuration cannot run on this
    /// device (recorded `invalid_config` without compiling).
    fn compile_job(&self, config: &[Value], device: &DeviceInfo) -> Result<CompileJob, LanguageError>;

    /// The compiler that builds the binaries, where the user chose one (`ptxas 13.3.73
    /// (PATH)`): shown in results.
    fn compiler(&self) -> Option<String> {
        None
    }

    /// How to launch a compiled configuration; an error is a reason it is invalid.
    fn kernel_image(&self, config: &[Value], binary: Binary) -> Result<KernelImage, LanguageError>;

    /// The objective of a configuration whose median kernel time is `time_ms`, with the
    /// evaluation's `metrics` (energy, power, clocks where they were measured).
    fn objective(
        &self,
        config: &[Value],
        time_ms: f64,
        metrics: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<f64, LanguageError>;

    /// Whether stopping a configuration that is clearly slower in time is sound: the
    /// objective is the time, or a function of it (and of nothing else measured, such as
    /// energy) that no parameter changes.
    fn early_stop_applies(&self) -> bool;

    /// The benchmark worker's setup; may compile a reference through `compile`.
    fn setup(
        &self,
        device: &DeviceInfo,
        compile: &mut dyn FnMut(CompileJob) -> Result<Binary, String>,
    ) -> Result<Setup, LanguageError>;

    /// Checks the outputs of a configuration's checked run (files by argument position),
    /// where the setup asked the benchmark worker for them ([`Setup::outputs_dir`]); an
    /// error is why they are wrong.
    fn check_outputs(&self, _config: &[Value], _outputs: &[(usize, std::path::PathBuf)]) -> Result<(), LanguageError> {
        Ok(())
    }

    /// Timeouts of the protocol.
    fn launch_timeout(&self) -> Duration;
    fn compile_timeout(&self) -> Duration;
    /// Whether the compile limit adapts to the run's compile times within that timeout.
    fn compile_timeout_adapts(&self) -> bool {
        false
    }
    /// Compile workers a tuning starts with when it may use `most`: all of them, unless
    /// the compiler is costly to start in many processes at once and quick once started
    /// (NVRTC). Where it starts fewer, the pipeline adds workers, up to `most`, while GPUs
    /// wait for compiles that the started workers, each past its first compile, do not
    /// keep up with.
    fn compile_workers_to_start(&self, most: usize) -> usize {
        most
    }
}
