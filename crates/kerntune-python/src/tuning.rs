//! Tuning calls: a Triton job, and compiling a Triton space without a GPU (the CUDA C
//! kernels of Kernel Tuner's `tune_kernel` are in [`crate::kernel_tuner`]).
//! Each releases the GIL while it runs and takes it back only to call the user's grid
//! function, to report progress and to check for Ctrl-C after every evaluation.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kerntune_device::driver_available;
use kerntune_engine::{Budget, Event, Lazy, Summary, Tuner};
use kerntune_lang_triton::{TritonJob, TritonLanguage};
use kerntune_pipeline::pool::{compile_all, CompileOutcome, CompilePool};
use kerntune_pipeline::process::Hub;
use kerntune_pipeline::protocol::CompileRequest;
use kerntune_pipeline::{Language, Pipeline, PipelineOptions, WorkerCommand};
use kerntune_search::build_strategy;
use kerntune_space::{params_from_json, ConfigId, Space, Value};
use kerntune_store::{Evaluation, Objective, Store, TuningInfo};
use pyo3::prelude::*;
use pyo3::types::PyList;
use serde_json::{json, Map, Value as Json};

use crate::errors;

/// The space of a JSON object of `name: [values]` under restrictions.
pub fn space_of(params: &str, restrictions: &[String]) -> PyResult<Space> {
    let table: Map<String, Json> = serde_json::from_str(params).map_err(errors::space)?;
    let params = params_from_json(&table).map_err(errors::space)?;
    Space::new(params, restrictions).map_err(errors::space)
}

/// Search settings, as the Python API passes them.
pub(crate) struct Search {
    strategy: String,
    strategy_options: Map<String, Json>,
    budget: Budget,
    seed: u64,
    pub(crate) db: PathBuf,
    /// Measure everything again instead of answering from the store.
    fresh: bool,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn search(
    strategy: &str,
    strategy_options: &str,
    max_fevals: Option<usize>,
    time_limit: Option<f64>,
    target: Option<f64>,
    seed: u64,
    db: Option<String>,
    fresh: bool,
) -> PyResult<Search> {
    let strategy_options: Map<String, Json> = serde_json::from_str(strategy_options).map_err(errors::strategy)?;
    build_strategy(strategy, &strategy_options).map_err(errors::strategy)?;
    let time_limit = time_limit
        .map(|s| {
            std::time::Duration::try_from_secs_f64(s)
                .map_err(|_| errors::strategy(format!("time_limit {s} is not a duration")))
        })
        .transpose()?;
    Ok(Search {
        strategy: strategy.to_string(),
        strategy_options,
        budget: Budget { max_fevals, time_limit, target },
        seed,
        db: db.map_or_else(Store::default_path, PathBuf::from),
        fresh,
    })
}

pub(crate) fn worker_command(argv: &[String]) -> PyResult<WorkerCommand> {
    let (program, args) = argv.split_first().ok_or_else(|| errors::backend("an empty worker command"))?;
    Ok(WorkerCommand::new(program, args.to_vec()))
}

pub(crate) fn py_value(py: Python<'_>, value: &Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
    })
}

/// Runs one tuning with a frontend: the store, the strategy, the lazily started pipeline,
/// progress and Ctrl-C. Called with the GIL released.
pub(crate) fn run(
    frontend: &dyn Language,
    space: &Space,
    info: &TuningInfo,
    search: &Search,
    options: PipelineOptions,
    progress: Option<&Py<PyAny>>,
) -> PyResult<Json> {
    let clock = Instant::now();
    let store = Store::open(&search.db).map_err(errors::store)?;
    let tuning = store.tuning(info).map_err(errors::store)?;
    let strategy = build_strategy(&search.strategy, &search.strategy_options).map_err(errors::strategy)?;
    let workers = options.compile_workers;
    let mut backend = Lazy::new(workers + 2, || Pipeline::start(frontend, space, options));
    // Ctrl-C: Python runs its signal handlers when asked, on this (the main) thread, and
    // the tuner asks about every 0.1 s. Python may also run them inside any Python code the
    // run calls (a grid function, a destructor) and lose the KeyboardInterrupt there, so a
    // handler of our own, chained before Python's, keeps a flag that cannot be lost.
    let signalled = Arc::new(AtomicBool::new(false));
    let registration = signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&signalled)).ok();
    let interruption: RefCell<Option<PyErr>> = RefCell::new(None);
    let interrupted = || {
        if interruption.borrow().is_none() {
            match Python::attach(|py| py.check_signals()) {
                Err(error) => *interruption.borrow_mut() = Some(error),
                Ok(()) if signalled.load(Ordering::SeqCst) => {
                    *interruption.borrow_mut() = Some(pyo3::exceptions::PyKeyboardInterrupt::new_err(()));
                }
                Ok(()) => {}
            }
        }
        interruption.borrow().is_some()
    };
    let mut results = Vec::new();
    let total = search.budget.max_fevals.unwrap_or(space.len()).min(space.len());
    let mut on_event = |event: Event<'_>| {
        let Event::Evaluated { point, evaluation } = event else { return };
        results.push(result_json(space, point.id, evaluation, point.from_store));
        if let Some(progress) = progress {
            // A failing progress callback must not end the run; Ctrl-C must.
            Python::attach(|py| {
                if let Err(error) = progress.call1(py, (point.feval, total, point.best)) {
                    keep_interrupt(py, &error);
                }
            });
        }
    };
    let summary = Tuner {
        space,
        strategy,
        backend: &mut backend,
        store: Some((&store, tuning)),
        reuse_stored: !search.fresh,
        objective: info.objective.clone(),
        budget: search.budget.clone(),
        seed: search.seed,
        interrupt: Some(&interrupted),
    }
    .run(&mut on_event);
    if let Some(registration) = registration {
        signal_hook::low_level::unregister(registration);
    }
    let summary = summary.map_err(errors::tune)?;
    if let Some(error) = interruption.into_inner() {
        return Err(error);
    }
    Ok(summary_json(&summary, space, &info.objective, results, clock.elapsed().as_secs_f64(), &search.db))
}

fn result_json(space: &Space, id: ConfigId, evaluation: &Evaluation, from_store: bool) -> Json {
    json!({
        "config": space.config_json(id),
        "status": evaluation.status.as_str(),
        "reason": evaluation.reason,
        "objective": evaluation.objective,
        "time_ms": evaluation.metrics.get("time"),
        "samples": evaluation.samples,
        "costs": evaluation.costs,
        "from_store": from_store,
    })
}

fn summary_json(
    summary: &Summary,
    space: &Space,
    objective: &Objective,
    results: Vec<Json>,
    wall: f64,
    db: &std::path::Path,
) -> Json {
    let best = summary.best.as_ref().map(|b| {
        let time =
            results.iter().find(|r| r["config"] == Json::Object(b.config.clone())).and_then(|r| r["time_ms"].as_f64());
        json!({"config": b.config, "objective": b.objective, "time_ms": time, "description": space.describe(b.id)})
    });
    json!({
        "best": best,
        "objective": objective,
        "evaluations": summary.evaluations,
        "failed": summary.failed,
        "from_store": summary.from_store,
        "stop": summary.stop,
        "wall_s": wall,
        "costs": summary.costs,
        "db": db.display().to_string(),
        "results": results,
        "trace": summary.trace,
        "failure": summary.failure_message(),
    })
}

/// The properties of GPU `device`, as JSON.
#[pyfunction]
pub fn device_info(device: usize) -> PyResult<String> {
    serde_json::to_string(&require_gpu(device)?).map_err(errors::backend)
}

pub(crate) fn require_gpu(device: usize) -> PyResult<kerntune_device::DeviceInfo> {
    if !driver_available() {
        return Err(errors::no_gpu(
            "no NVIDIA driver on this machine: tuning needs a GPU (kerntune.compile(...) and tune_kernel(..., compile_only=True) compile without one)",
        ));
    }
    kerntune_device::driver::probe(device)
        .map(|(_, info)| info)
        .map_err(|e| errors::no_gpu(format!("GPU #{device}: {e}")))
}

/// Tunes a Triton kernel described by `job` (JSON, see `kerntune._tune`). `grid` maps a
/// configuration (a list of parameter values) to the launch grid in programs. Returns the
/// result as JSON.
#[pyfunction]
#[pyo3(signature = (job, grid, strategy, strategy_options, max_fevals, time_limit, target, seed, db, fresh, compile_workers, device, progress))]
#[allow(clippy::too_many_arguments)]
pub fn tune_triton(
    py: Python<'_>,
    job: &str,
    grid: Py<PyAny>,
    strategy: &str,
    strategy_options: &str,
    max_fevals: Option<usize>,
    time_limit: Option<f64>,
    target: Option<f64>,
    seed: u64,
    db: Option<String>,
    fresh: bool,
    compile_workers: usize,
    device: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let job = TritonJob::from_json(job).map_err(errors::spec)?;
    let search = search(strategy, strategy_options, max_fevals, time_limit, target, seed, db, fresh)?;
    let device_info = require_gpu(device)?;
    let options = PipelineOptions {
        bench_worker: job.worker(&job.bench_worker).map_err(errors::spec)?,
        compile_worker: job.worker(&job.compile_worker).map_err(errors::spec)?,
        device,
        compile_workers: compile_workers.max(1),
    };
    let result = py.detach(|| -> PyResult<Json> {
        let frontend = TritonLanguage::new(&job, triton_grid(&grid)).map_err(errors::spec)?;
        let space = job.space(frontend.params().to_vec()).map_err(errors::space)?;
        let info = job.tuning_info(&device_info.name, frontend.params().to_vec(), frontend.objective().clone());
        run(&frontend, &space, &info, &search, options, progress.as_ref())
    })?;
    Ok(result.to_string())
}

/// Compiles every configuration of a Triton job for `arch` with no GPU, keeping the cubins
/// in `db` when given. Returns, per configuration, what the compile produced.
#[pyfunction]
#[pyo3(signature = (job, compile_workers, db = None))]
pub fn compile_triton(py: Python<'_>, job: &str, compile_workers: usize, db: Option<String>) -> PyResult<String> {
    let job = TritonJob::from_json(job).map_err(errors::spec)?;
    let params = job.param_list().map_err(errors::spec)?;
    let space = job.space(params.clone()).map_err(errors::space)?;
    let timing = job.timing().map_err(errors::spec)?;
    let command = job.worker(&job.compile_worker).map_err(errors::spec)?;
    let outcomes = py.detach(|| -> PyResult<Vec<Json>> {
        let store = db.map(|path| Store::open(std::path::Path::new(&path))).transpose().map_err(errors::store)?;
        let info = job.tuning_info("compile-only", params.clone(), Objective::time());
        let tuning = store.as_ref().map(|s| s.tuning(&info)).transpose().map_err(errors::store)?;
        let hub = Hub::default();
        let mut pool = CompilePool::new(&command, compile_workers.max(1), timing.compile_timeout, &hub, 0).map_err(errors::backend)?;
        // The frontend's compile jobs need a device only for its limits; compiling for a
        // named architecture checks none.
        let device = compile_only_device();
        let frontend = TritonLanguage::new(&job, Box::new(|_: &[Value]| Ok([1, 1, 1]))).map_err(errors::spec)?;
        let ids: Vec<ConfigId> = space.ids().collect();
        let mut requests = Vec::new();
        let mut outcomes: Vec<Json> = vec![Json::Null; ids.len()];
        for (index, id) in ids.iter().enumerate() {
            let values: Vec<Value> = space.values(*id).into_iter().cloned().collect();
            match frontend.compile_job(&values, &device) {
                Ok(job) => requests.push(CompileRequest { id: index as u32, job }),
                Err(reason) => outcomes[index] = json!({"config": space.config_json(*id), "status": "invalid_config", "reason": reason}),
            }
        }
        // A reply for an id that was never asked is the worker's fault, not a reason to panic.
        let config_of = |id: u32| {
            ids.get(id as usize)
                .map(|id| space.config_json(*id))
                .ok_or_else(|| format!("a compile worker answered for configuration #{id}, which was not asked"))
        };
        let mut record = |outcome: CompileOutcome| -> Result<(), String> {
            let (index, entry) = match outcome {
                CompileOutcome::Compiled { id, binary, seconds } => {
                    let (cubin, launch) = (binary.cubin, binary.launch);
                    let config = config_of(id)?;
                    if let (Some(store), Some(tuning)) = (&store, tuning) {
                        store.save_artifact(tuning, &config, "cubin", &cubin, "triton").map_err(|e| e.to_string())?;
                    }
                    let cubin_b64 = kerntune_pipeline::protocol::Bytes(cubin);
                    (id, json!({"config": config, "status": "compiled", "seconds": seconds, "launch": launch, "cubin": cubin_b64}))
                }
                CompileOutcome::Failed { id, kind, reason, seconds } => {
                    let status = kind.status().as_str();
                    (id, json!({"config": config_of(id)?, "status": status, "reason": reason, "seconds": seconds}))
                }
            };
            if let Some(slot) = outcomes.get_mut(index as usize) {
                *slot = entry;
            }
            Ok(())
        };
        compile_interruptibly(&mut pool, &hub, requests, &mut record)?;
        Ok(outcomes)
    })?;
    Ok(Json::Array(outcomes).to_string())
}

/// Compiles every request through the pool, handing each outcome to `record`; Ctrl-C
/// stops it and is raised once the pool has stopped.
pub(crate) fn compile_interruptibly(
    pool: &mut CompilePool,
    hub: &Hub,
    requests: Vec<CompileRequest>,
    record: &mut dyn FnMut(CompileOutcome) -> Result<(), String>,
) -> PyResult<()> {
    let stop = || Python::attach(|py| py.check_signals().is_err());
    compile_all(pool, hub, requests, record, &stop).map_err(errors::backend)?;
    Python::attach(|py| py.check_signals())
}

/// Stand-in device limits for compiling without a GPU: Hopper's.
pub(crate) fn compile_only_device() -> kerntune_device::DeviceInfo {
    kerntune_device::DeviceInfo {
        ordinal: 0,
        name: "compile-only".into(),
        compute_capability: (9, 0),
        multiprocessors: 132,
        l2_bytes: 50 << 20,
        max_threads_per_block: 1024,
        max_shared_per_block: 48 << 10,
        max_shared_per_block_optin: 232_448,
        max_registers_per_block: 65_536,
        clock_khz: 0,
        memory_bytes: 0,
    }
}

/// Tunes the native schedule of one configuration of a Triton job (`config`: JSON object
/// of the tuned parameters). Returns the report as JSON, with the kept cubin in base64 when
/// a faster, bit-for-bit equivalent schedule was found; stores it in `db`.
#[pyfunction]
#[pyo3(signature = (job, grid, config, options, db, device))]
pub fn tune_schedule_triton(
    py: Python<'_>,
    job: &str,
    grid: Py<PyAny>,
    config: &str,
    options: &str,
    db: Option<String>,
    device: usize,
) -> PyResult<String> {
    use kerntune_pipeline::schedule::{schedule_config, ScheduleOptions};
    let job = TritonJob::from_json(job).map_err(errors::spec)?;
    let options: ScheduleOptions = serde_json::from_str(options).map_err(errors::spec)?;
    let config_json: Map<String, Json> = serde_json::from_str(config).map_err(errors::spec)?;
    let device_info = require_gpu(device)?;
    let pipeline = PipelineOptions {
        bench_worker: job.worker(&job.bench_worker).map_err(errors::spec)?,
        compile_worker: job.worker(&job.compile_worker).map_err(errors::spec)?,
        device,
        compile_workers: 1,
    };
    let db = db.map_or_else(Store::default_path, PathBuf::from);
    let report = py.detach(|| -> PyResult<Json> {
        let frontend = TritonLanguage::new(&job, triton_grid(&grid)).map_err(errors::spec)?;
        let values: Vec<Value> = frontend
            .params()
            .iter()
            .map(|p| {
                config_json
                    .get(p.name())
                    .and_then(Value::from_json)
                    .ok_or_else(|| errors::spec(format!("the configuration has no value for '{}'", p.name())))
            })
            .collect::<PyResult<_>>()?;
        let (report, original) =
            schedule_config(&frontend, &values, &device_info, &pipeline, &options).map_err(errors::backend)?;
        let store = Store::open(&db).map_err(errors::store)?;
        let info = job.tuning_info(&device_info.name, frontend.params().to_vec(), frontend.objective().clone());
        let tuning = store.tuning(&info).map_err(errors::store)?;
        let provenance = serde_json::to_string(&report).map_err(errors::store)?;
        let kept = report.cubin.clone().unwrap_or_else(|| original.cubin.0.clone());
        store.save_artifact(tuning, &config_json, "schedule", &kept, &provenance).map_err(errors::store)?;
        let mut out = serde_json::to_value(&report).map_err(errors::store)?;
        out["cubin"] = report
            .cubin
            .map_or(Json::Null, |c| serde_json::to_value(kerntune_pipeline::protocol::Bytes(c)).unwrap_or(Json::Null));
        Ok(out)
    })?;
    Ok(report.to_string())
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

/// The user's grid function as the Triton frontend calls it (taking the GIL).
fn triton_grid(grid: &Py<PyAny>) -> kerntune_lang_triton::GridFn<'_> {
    Box::new(move |config: &[Value]| -> Result<[u64; 3], String> {
        Python::attach(|py| {
            let values =
                config.iter().map(|v| py_value(py, v)).collect::<PyResult<Vec<_>>>().map_err(|e| e.to_string())?;
            let answer = grid.call1(py, (PyList::new(py, values).map_err(|e| e.to_string())?,)).map_err(|e| {
                keep_interrupt(py, &e);
                format!("the grid function failed: {e}")
            })?;
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
