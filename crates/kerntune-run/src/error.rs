//! Why a run could not be done, by kind. Failures of single configurations are not errors:
//! they are outcomes in the summary. A setting is named through [`Setting`], which each
//! front spells its own way (`--realtime`, `realtime=`).

use kerntune_device::driver::CudaError;
use kerntune_device::DeviceError;
use kerntune_engine::{BackendError, SearchOptionsError, TuneError};
use kerntune_pipeline::{CompileError, LanguageError, MixedModels, ScheduleError};
use kerntune_space::Setting;
use kerntune_store::StoreError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No driver, or the GPU asked for cannot be opened.
    #[error(transparent)]
    NoGpu(#[from] NoGpu),
    /// A tool the run needs (NVRTC, a chosen ptxas) is missing, or rejects the run's
    /// settings.
    #[error(transparent)]
    Toolchain(LanguageError),
    #[error("no configuration satisfies the restrictions")]
    EmptySpace,
    /// The architecture to compile for is not one.
    #[error(transparent)]
    Arch(#[from] DeviceError),
    #[error("no configuration compiled for {arch}: {reason}")]
    NothingCompiled { arch: String, reason: String },
    #[error(transparent)]
    Search(#[from] SearchOptionsError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// The GPU pipeline (or the simulation) could not go on.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The compile pool of a compile-only run could not go on.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The schedule stage could not tune the best configuration's schedule.
    #[error(transparent)]
    Schedule(ScheduleError),
    /// A compiler-controls search asked to try no candidate.
    #[error("{}: the controls search needs a budget of 1 or more candidate ACF files", Setting::CONTROLS_BUDGET.with(0))]
    NoControlsBudget,
    /// A simulation's replay speed that is not a positive number.
    #[error("{} needs a positive speed, not {}", Setting::REALTIME, .0)]
    Realtime(f64),
    /// The front's check of the best configurations at the edge sizes could not run (it
    /// raised, or was interrupted): its reason.
    #[error("checking the best configurations at the edge sizes: {0}")]
    EdgeCheck(String),
    /// A stage's report could not be passed on as JSON.
    #[error("the {what}: {source}")]
    Report { what: &'static str, source: serde_json::Error },
}

impl From<ScheduleError> for RunError {
    /// Ctrl-C and a lost worker are the run's backend errors, in whichever stage they came.
    fn from(error: ScheduleError) -> RunError {
        match error {
            ScheduleError::Backend(error) => RunError::Backend(error),
            other => RunError::Schedule(other),
        }
    }
}

/// Why no GPU can serve the run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoGpu {
    /// No NVIDIA driver is installed; the front's advice for working without a GPU.
    #[error("no NVIDIA driver on this machine: tuning needs a GPU. {0}")]
    NoDriver(String),
    /// The driver failed before any GPU could be named.
    #[error(transparent)]
    Driver(CudaError),
    #[error("the driver sees no GPU")]
    NoneSeen,
    /// A GPU number beyond the driver's GPUs.
    #[error("there is no GPU #{ordinal}: {}", match count {
        0 => "the driver sees no GPU".to_string(),
        1 => "this machine has one GPU, #0".to_string(),
        n => format!("this machine has {n} GPUs, #0 to #{}", n - 1),
    })]
    NoSuchGpu { ordinal: usize, count: usize },
    /// A GPU that exists but cannot be opened.
    #[error("GPU #{ordinal}: {error}")]
    Unopenable { ordinal: usize, error: CudaError },
    #[error(transparent)]
    MixedModels(#[from] MixedModels),
}
