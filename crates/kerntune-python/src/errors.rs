//! One Python exception class per kind of error, all under `kerntune.KerntuneError`, with
//! the Rust error's own message (never its Debug text): the one place where Rust's error
//! kinds become Python's exceptions. Settings in those messages read as keyword arguments
//! (`target=`), the spelling this module chooses for its process.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(kerntune, KerntuneError, PyException, "Base class of kerntune's errors.");
create_exception!(kerntune, SpaceError, KerntuneError, "Bad parameters or restrictions.");
create_exception!(kerntune, SpecError, KerntuneError, "A kernel description kerntune cannot use.");
create_exception!(kerntune, StrategyError, KerntuneError, "An unknown strategy or bad strategy options.");
create_exception!(kerntune, StoreError, KerntuneError, "The results database cannot be read or written.");
create_exception!(
    kerntune,
    BackendError,
    KerntuneError,
    "The GPU pipeline cannot go on (no GPU, no compiler, a broken reference...)."
);
create_exception!(kerntune, NoGpuError, BackendError, "No usable NVIDIA GPU or driver on this machine.");

/// Registers the exception classes, and makes every message of this process name a
/// setting as Python passes it (`target=`, not the CLI's `--target`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    kerntune_space::Spelling::Keyword.choose();
    let py = m.py();
    m.add("KerntuneError", py.get_type::<KerntuneError>())?;
    m.add("SpaceError", py.get_type::<SpaceError>())?;
    m.add("SpecError", py.get_type::<SpecError>())?;
    m.add("StrategyError", py.get_type::<StrategyError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("BackendError", py.get_type::<BackendError>())?;
    m.add("NoGpuError", py.get_type::<NoGpuError>())?;
    Ok(())
}

pub fn space(error: impl std::fmt::Display) -> PyErr {
    SpaceError::new_err(error.to_string())
}

pub fn spec(error: impl std::fmt::Display) -> PyErr {
    SpecError::new_err(error.to_string())
}

pub fn strategy(error: impl std::fmt::Display) -> PyErr {
    StrategyError::new_err(error.to_string())
}

/// Why a configuration cannot launch (the reason it is invalid), as the `ValueError` the
/// Kernel Tuner front turns into that configuration's `InvalidConfig`.
pub fn launch(error: kerntune_lang_cuda::LaunchError) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(error.to_string())
}

pub fn store(error: impl std::fmt::Display) -> PyErr {
    StoreError::new_err(error.to_string())
}

pub fn backend(error: impl std::fmt::Display) -> PyErr {
    BackendError::new_err(error.to_string())
}

pub fn no_gpu(message: impl Into<String>) -> PyErr {
    NoGpuError::new_err(message.into())
}

/// An error of the tuning loop, by kind.
pub fn tune(error: kerntune_engine::TuneError) -> PyErr {
    match error {
        kerntune_engine::TuneError::EmptySpace => SpaceError::new_err(error.to_string()),
        kerntune_engine::TuneError::Store(e) => store(e),
        kerntune_engine::TuneError::Backend(e) => GpuError::from(e).into(),
        other => backend(other),
    }
}

/// A run that could not be done, by kind.
pub fn run(error: kerntune_run::RunError) -> PyErr {
    use kerntune_run::RunError;
    match error {
        RunError::NoGpu(e) => no_gpu(e.to_string()),
        RunError::EmptySpace => space(error),
        RunError::Search(e) => strategy(e),
        RunError::Store(e) => store(e),
        RunError::Tune(e) => tune(e),
        RunError::Arch(_) | RunError::Realtime(_) => spec(error),
        RunError::Backend(e) => GpuError::from(e).into(),
        other => backend(other),
    }
}

/// An error of the GPU half on its way to Python, as polars's `PyPolarsErr`: `From` each
/// Rust error, then `Into<PyErr>` by kind. (`From<BackendError> for PyErr` itself cannot
/// be written here: neither type is this crate's.)
#[derive(Debug)]
pub enum GpuError {
    Backend(kerntune_engine::BackendError),
    Driver(kerntune_device::driver::CudaError),
}

impl From<kerntune_engine::BackendError> for GpuError {
    fn from(error: kerntune_engine::BackendError) -> Self {
        GpuError::Backend(error)
    }
}

impl From<kerntune_device::driver::CudaError> for GpuError {
    fn from(error: kerntune_device::driver::CudaError) -> Self {
        GpuError::Driver(error)
    }
}

impl From<GpuError> for PyErr {
    /// No driver or no such GPU is a `NoGpuError`; every other failure of the GPU half
    /// (a worker that cannot start, a lost device, a worker breaking the protocol) is a
    /// `BackendError`, with the Rust error's message.
    fn from(error: GpuError) -> PyErr {
        match error {
            GpuError::Driver(error) if error.no_gpu() => NoGpuError::new_err(error.to_string()),
            GpuError::Driver(error) => BackendError::new_err(error.to_string()),
            GpuError::Backend(error) => BackendError::new_err(error.to_string()),
        }
    }
}

/// A report the store cannot give (no tunings, an unknown tuning) is a `StoreError`; a
/// chart that could not be drawn a `KerntuneError`.
pub fn report(error: kerntune_run::report::html::ReportError) -> PyErr {
    use kerntune_run::report::html::ReportError;
    match error {
        ReportError::Chart(e) => KerntuneError::new_err(e.to_string()),
        other => store(other),
    }
}
