//! Tuning calls: a Triton job, and compiling a Triton space without a GPU (the CUDA C
//! kernels of Kernel Tuner's `tune_kernel` are in [`crate::kernel_tuner`]). Each is a call
//! of `kerntune_run`, the one run path every front shares.
//! Each releases the GIL while it runs and takes it back only to call the user's grid
//! function, to report progress and to check for Ctrl-C after every evaluation.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kerntune_device::driver_available;
use kerntune_engine::{Event, SearchOptions};
use kerntune_lang_triton::{TritonJob, TritonLanguage};
use kerntune_pipeline::protocol::Bytes;
use kerntune_pipeline::WorkerCommand;
use kerntune_run::vetting::{Unvetted, VetFn, Vetting};
use kerntune_run::{report, CompileOnly, CompileReport, Forecast, Front, Prepared, Progress, Request, Tuning, Workers};
use kerntune_space::{params_from_json, Space, Value};
use kerntune_store::{Objective, Store};
use pyo3::prelude::*;
use pyo3::types::PyList;
use serde_json::{Map, Value as Json};

use crate::errors;

/// The space of a JSON object of `name: [values]` under restrictions.
pub fn space_of(params: &str, restrictions: &[String]) -> PyResult<Space> {
    let table: Map<String, Json> = serde_json::from_str(params).map_err(errors::space)?;
    let params = params_from_json(&table).map_err(errors::space)?;
    Space::new(params, restrictions).map_err(errors::space)
}

/// The request of a call (JSON of a [`Request`], the keyword arguments the user gave).
pub(crate) fn request_of(text: &str) -> PyResult<Request> {
    serde_json::from_str(text).map_err(errors::spec)
}

/// The defaults of a request from `front` (`"python"` or `"kernel_tuner"`), as JSON, for the
/// Python package's signatures.
#[pyfunction]
pub fn request_defaults(front: &str) -> PyResult<String> {
    let front = match front {
        "python" => Front::Python,
        "kernel_tuner" => Front::KernelTuner,
        other => return Err(errors::spec(format!("no front named {other:?}: python or kernel_tuner"))),
    };
    Ok(front.defaults().to_string())
}

pub(crate) fn worker_command(argv: &[String], env: Vec<(String, String)>) -> PyResult<WorkerCommand> {
    WorkerCommand::from_argv(argv, env).ok_or_else(|| errors::spec("an empty worker command"))
}

pub(crate) fn py_value(py: Python<'_>, value: &Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
    })
}

/// How a front warns of a long brute force ([`Forecast`]): its words for what bounds a
/// search, and the frame of the caller's stack the warning names (1: the caller of the
/// extension function).
pub(crate) struct LongSearch {
    pub bounds: &'static str,
    pub stacklevel: i32,
}

/// Runs one tuning through the run facade with Python's Ctrl-C and progress callback.
/// Called with the GIL released.
/// `before_search` runs once the pre-flight checks have passed (the store is open).
/// With `long_search`, a long brute force is forecast in a `kerntune.LongSearchWarning`;
/// where warnings are errors, that error ends the run.
pub(crate) fn run(
    tuning: Tuning<'_>,
    progress: Option<&Py<PyAny>>,
    before_search: &dyn Fn(&Prepared<'_>) -> PyResult<()>,
    long_search: Option<&LongSearch>,
) -> PyResult<Json> {
    let space_len = tuning.space().len();
    let prepared = tuning.prepare().map_err(errors::run)?;
    before_search(&prepared)?;
    let mut forecast = long_search.and_then(|_| Forecast::of(&prepared.search, space_len));
    let interruption = Interruption::watch();
    let interrupted = || interruption.requested();
    let total = prepared.search.budget.max_fevals.unwrap_or(space_len).min(space_len);
    let mut on_progress = |event: Progress<'_>| {
        let Progress::Search(event) = event else { return };
        let pace = forecast.as_mut().and_then(|forecast| forecast.on_event(&event));
        if let (Some(pace), Some(long_search)) = (pace, long_search) {
            if let Err(error) = warn_long_search(&pace.line(long_search.bounds), long_search.stacklevel) {
                interruption.stop_with(error);
            }
        }
        let (Some(progress), Event::Evaluated { point, .. }) = (progress, event) else { return };
        // A failing progress callback must not end the run; Ctrl-C must.
        Python::attach(|py| {
            if let Err(error) = progress.call1(py, (point.feval, total, point.best)) {
                keep_interrupt(py, &error);
            }
        });
    };
    let summary = prepared.run(&mut on_progress, &interrupted);
    if let Some(error) = interruption.into_error() {
        return Err(error);
    }
    let summary = summary.map_err(errors::run)?;
    let mut out = report::tuning_json(&summary);
    if let Some(cubin) = summary.schedule.as_ref().and_then(|s| s.cubin.clone()) {
        out["schedule"]["cubin"] = serde_json::to_value(Bytes(cubin)).map_err(errors::backend)?;
    }
    Ok(out)
}

/// Warns `line` as a `kerntune.LongSearchWarning`, pointing at frame `stacklevel`.
fn warn_long_search(line: &str, stacklevel: i32) -> PyResult<()> {
    Python::attach(|py| {
        let category = py.import("kerntune._errors")?.getattr("LongSearchWarning")?;
        PyErr::warn(py, &category, &std::ffi::CString::new(line)?, stacklevel)
    })
}

/// Checks search settings (JSON of [`SearchOptions`]) as a tuning would read them, with
/// `default_strategy` where none is named, so that Python refuses a bad strategy, option or
/// budget before any GPU is probed or anything compiled. `target` comes apart from the JSON,
/// which cannot carry a NaN or an infinity, so that those reach the rule that refuses them.
#[pyfunction]
#[pyo3(signature = (search, default_strategy, target=None))]
pub fn check_search(search: &str, default_strategy: &str, target: Option<f64>) -> PyResult<()> {
    let search: Json = serde_json::from_str(search).map_err(errors::spec)?;
    let mut search: SearchOptions = serde_json::from_value(search).map_err(errors::spec)?;
    search.target = target.or(search.target);
    search.resolve(default_strategy).map(|_| ()).map_err(errors::strategy)
}

/// The properties of GPU `device`, as JSON.
#[pyfunction]
pub fn device_info(device: usize) -> PyResult<String> {
    serde_json::to_string(&require_gpu(device)?).map_err(errors::backend)
}

pub(crate) fn require_gpu(device: usize) -> PyResult<kerntune_device::DeviceInfo> {
    if !driver_available() {
        let without_gpu = Front::Python.without_gpu();
        return Err(errors::no_gpu(format!("no NVIDIA driver on this machine: tuning needs a GPU ({without_gpu})")));
    }
    kerntune_device::driver::probe(device)
        .map(|(_, info)| info)
        .map_err(|e| errors::no_gpu(format!("GPU #{device}: {e}")))
}

/// Tunes a Triton kernel described by `job` (JSON, see `kerntune._job`) as `request`
/// (JSON, a [`Request`]) asks. `grid` maps a configuration (a list of parameter values)
/// to the launch grid in programs. `vet`, where given, checks a configuration at the
/// `edge_sizes` (their labels, `n = 4095`) through Triton (`None` when right there, else why
/// not); it is asked of the best configurations after the search (see
/// `kerntune_run::vetting`). Returns the run's summary as JSON.
/// `descriptors`, where the kernel takes host-side tensor descriptors, maps a
/// configuration to their block shapes (`{name: [rows, columns]}`). `bench_workers`: that
/// many benchmark workers on a Ray cluster's GPUs (`ray_gpus=`), the job's bench worker
/// being the relay that holds one GPU each; `None` for this machine's.
#[pyfunction]
#[pyo3(signature = (job, request, grid, progress, vet = None, edge_sizes = Vec::new(), descriptors = None, bench_workers = None))]
#[allow(clippy::too_many_arguments)]
pub fn tune_triton(
    py: Python<'_>,
    job: &str,
    request: &str,
    grid: Py<PyAny>,
    progress: Option<Py<PyAny>>,
    vet: Option<Py<PyAny>>,
    edge_sizes: Vec<String>,
    descriptors: Option<Py<PyAny>>,
    bench_workers: Option<usize>,
) -> PyResult<String> {
    // The user's settings are checked first: a misspelt one is named whatever the job.
    let request = request_of(request)?;
    let job = TritonJob::from_json(job).map_err(errors::spec)?;
    let workers = Workers::new(
        job.worker(&job.bench_worker).map_err(errors::spec)?,
        job.worker(&job.compile_worker).map_err(errors::spec)?,
    )
    .elsewhere(bench_workers);
    let result = py.detach(|| -> PyResult<Json> {
        let language = with_descriptors(
            TritonLanguage::new(&job, triton_grid(&grid)).map_err(errors::spec)?,
            descriptors.as_ref(),
        );
        let space = job.space(language.params().to_vec()).map_err(errors::space)?;
        let mut tuning = crate::crew::keeping(Tuning::new(&language, &space, request, Front::Python, workers));
        if let Some(check) = vet.as_ref() {
            tuning = tuning.with_vetting(Vetting { sizes: edge_sizes, check: triton_vet(check) });
        }
        run(tuning, progress.as_ref(), &|_| Ok(()), None)
    })?;
    Ok(result.to_string())
}

/// Compiles every configuration of a Triton job for the `request`'s `arch` (JSON, a
/// [`Request`]) with no GPU, keeping the cubins in its `db` when it names one and answering
/// from it what an earlier call kept there. Returns, per configuration, what the compile
/// produced.
#[pyfunction]
#[pyo3(signature = (job, request, descriptors = None))]
pub fn compile_triton(py: Python<'_>, job: &str, request: &str, descriptors: Option<Py<PyAny>>) -> PyResult<String> {
    // The user's settings are checked first: a misspelt one is named whatever the job.
    let request = request_of(request)?;
    let job = TritonJob::from_json(job).map_err(errors::spec)?;
    let params = job.param_list().map_err(errors::spec)?;
    let space = job.space(params.clone()).map_err(errors::space)?;
    let worker = job.worker(&job.compile_worker).map_err(errors::spec)?;
    let rows = py.detach(|| -> PyResult<Vec<Json>> {
        let store = request.db.as_deref().map(Store::open).transpose().map_err(errors::store)?;
        let language = with_descriptors(
            TritonLanguage::new(&job, Box::new(|_: &[Value]| Ok([1, 1, 1]))).map_err(errors::spec)?,
            descriptors.as_ref(),
        );
        let info = job.tuning_info(&format!("compile-only {}", request.arch), params.clone(), Objective::time());
        let mut compile = CompileOnly::new(&language, &space, &request, worker);
        if let Some(store) = store.as_ref() {
            compile = compile.keeping_in(store, store.tuning(&info).map_err(errors::store)?);
        }
        let report = compile_interruptibly(&compile)?;
        Ok(report.configs.iter().map(report::compiled_json).collect())
    })?;
    Ok(Json::Array(rows).to_string())
}

/// Runs a compile-only run; Ctrl-C stops it and is raised once the pool has stopped, what
/// was compiled being in the store already.
pub(crate) fn compile_interruptibly(compile: &CompileOnly<'_>) -> PyResult<CompileReport> {
    let interruption = Interruption::watch();
    let report = compile.run(&mut |_| {}, &|| interruption.requested());
    if let Some(error) = interruption.into_error() {
        return Err(error);
    }
    report.map_err(errors::run)
}

/// Ctrl-C during a run that holds no GIL. Python runs its signal handlers when asked, on
/// this (the main) thread, and a run asks about every 0.1 s. Python may also run them
/// inside any Python code the run calls (a grid function, a destructor) and lose the
/// KeyboardInterrupt there, so a handler of our own, chained before Python's, keeps a flag
/// that cannot be lost.
struct Interruption {
    signalled: Arc<AtomicBool>,
    registration: Option<signal_hook::SigId>,
    /// What to raise instead of the run's answer, once known.
    error: RefCell<Option<PyErr>>,
}

impl Interruption {
    fn watch() -> Interruption {
        let signalled = Arc::new(AtomicBool::new(false));
        let registration = signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&signalled)).ok();
        Interruption { signalled, registration, error: RefCell::new(None) }
    }

    /// Whether the run must stop; takes the GIL to let Python's handlers run.
    fn requested(&self) -> bool {
        if self.error.borrow().is_none() {
            match Python::attach(|py| py.check_signals()) {
                Err(error) => *self.error.borrow_mut() = Some(error),
                Ok(()) if self.signalled.load(Ordering::SeqCst) => {
                    *self.error.borrow_mut() = Some(pyo3::exceptions::PyKeyboardInterrupt::new_err(()));
                }
                Ok(()) => {}
            }
        }
        self.error.borrow().is_some()
    }

    /// Stops the run with `error` (unless it already stops with another).
    fn stop_with(&self, error: PyErr) {
        self.error.borrow_mut().get_or_insert(error);
    }

    /// The error to raise instead of the run's answer. Asks once more: a Ctrl-C that a
    /// callback caught after the run's last check (one that stopped the edge-size check) is
    /// still the answer, ahead of the error it caused.
    fn into_error(self) -> Option<PyErr> {
        self.requested();
        self.error.borrow_mut().take()
    }
}

impl Drop for Interruption {
    fn drop(&mut self) {
        if let Some(registration) = self.registration.take() {
            signal_hook::low_level::unregister(registration);
        }
    }
}

/// Python runs pending signal handlers whenever it runs code, so Ctrl-C can surface as a
/// `KeyboardInterrupt` from a callback (the grid function, the progress callback), where it
/// would count as that callback's failure. This puts the interrupt back, for the tuner's
/// next check to see.
pub(crate) fn keep_interrupt(py: Python<'_>, error: &PyErr) {
    if error.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
        // SAFETY: PyErr_SetInterrupt only sets the flag a SIGINT would set; it may be
        // called from any thread, with or without the GIL.
        unsafe { pyo3::ffi::PyErr_SetInterrupt() };
    }
}

/// The edge-size check of `kerntune._edges` as the run calls it (taking the GIL): a
/// configuration's values in; `None` back when it is right there, else the reason it is
/// wrong. A check that raises (Ctrl-C included) says nothing of the configuration: the run
/// stops with the error.
fn triton_vet(check: &Py<PyAny>) -> VetFn<'_> {
    Box::new(move |config: &[Value]| -> Result<(), Unvetted> {
        Python::attach(|py| {
            let broken = |e: PyErr| Unvetted::Broken(e.to_string());
            let values = config.iter().map(|v| py_value(py, v)).collect::<PyResult<Vec<_>>>().map_err(broken)?;
            let answer = check.call1(py, (PyList::new(py, values).map_err(broken)?,)).map_err(|e| {
                keep_interrupt(py, &e);
                Unvetted::Broken(e.to_string())
            })?;
            match answer.extract::<Option<String>>(py) {
                Ok(None) => Ok(()),
                Ok(Some(reason)) => Err(Unvetted::Wrong(reason)),
                Err(e) => Err(Unvetted::Broken(format!("the check must return None or a reason: {e}"))),
            }
        })
    })
}

/// `language` with the front's descriptor block shapes, where the kernel has descriptors.
fn with_descriptors<'a>(language: TritonLanguage<'a>, descriptors: Option<&'a Py<PyAny>>) -> TritonLanguage<'a> {
    match descriptors {
        Some(blocks) => language.with_descriptors(triton_descriptors(blocks)),
        None => language,
    }
}

/// Calls the front's function `f` of a configuration (its values, as a list), with the GIL;
/// a failure is `failed` and Python's message.
fn call_with_config(py: Python<'_>, f: &Py<PyAny>, config: &[Value], failed: &str) -> Result<Py<PyAny>, String> {
    let values = config.iter().map(|v| py_value(py, v)).collect::<PyResult<Vec<_>>>().map_err(|e| e.to_string())?;
    f.call1(py, (PyList::new(py, values).map_err(|e| e.to_string())?,)).map_err(|e| {
        keep_interrupt(py, &e);
        format!("{failed}: {e}")
    })
}

/// The front's descriptor block shapes as the Triton language asks for them (taking the
/// GIL): a configuration's values in, `{name: [dims]}` back.
fn triton_descriptors(blocks: &Py<PyAny>) -> kerntune_lang_triton::DescriptorFn<'_> {
    Box::new(move |config: &[Value]| -> Result<serde_json::Map<String, Json>, String> {
        Python::attach(|py| {
            let failed = "the pre_hook that sets the tensor descriptors' block shapes failed";
            let answer = call_with_config(py, blocks, config, failed)?;
            let text: String = answer.extract(py).map_err(|e| format!("descriptor block shapes: {e}"))?;
            serde_json::from_str(&text).map_err(|e| format!("descriptor block shapes: {e}"))
        })
    })
}

/// The user's grid function as the Triton language calls it (taking the GIL).
fn triton_grid(grid: &Py<PyAny>) -> kerntune_lang_triton::GridFn<'_> {
    Box::new(move |config: &[Value]| -> Result<[u64; 3], String> {
        Python::attach(|py| {
            let answer = call_with_config(py, grid, config, "the grid function failed")?;
            let dims: Vec<u64> =
                answer.extract(py).map_err(|e| format!("the grid function must return up to 3 integers: {e}"))?;
            let mut grid = [1u64; 3];
            for (axis, value) in dims.iter().take(3).enumerate() {
                grid[axis] = *value;
            }
            Ok(grid)
        })
    })
}
