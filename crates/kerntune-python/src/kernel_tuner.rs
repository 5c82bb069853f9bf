//! Kernel Tuner's `tune_kernel`, run by kerntune: the Python package hands over one JSON
//! job (a kernel spec and the search settings) and two callables. `instance` applies
//! Kernel Tuner's conventions to a configuration (its source with the definitions, the
//! kernel's name, the launch geometry), since they may call the user's own functions;
//! `verify`, when given, judges the outputs the benchmark worker wrote back, in the
//! calling process. Both are called with the GIL taken back for the call only.

use std::path::{Path, PathBuf};

use kerntune_lang_cuda::{CheckFn, CudaLanguage, Instance, InstanceFn, KernelSpec, OutputCheck};
use kerntune_pipeline::Geometry;
use kerntune_run::{Compilation, CompileOnly, CompiledConfig, Front, Prepared, Request, Tuning, Workers};
use kerntune_space::Value;
use kerntune_store::{config_key, Landscape, Store, TuningId};
use pyo3::prelude::*;
use pyo3::types::PyList;
use serde::Deserialize;
use serde_json::{json, Map, Value as Json};

use crate::errors;
use crate::tuning::{compile_interruptibly, keep_interrupt, py_value, run, worker_command, LongSearch};

/// What `kerntune.tune_kernel` asks for, as JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Job {
    /// The kernel spec: a JSON object with the keys of the TOML format (docs/spec.md).
    spec: Json,
    /// The folder of the files the spec names.
    base: PathBuf,
    /// `python -m kerntune._worker`, and its environment.
    worker: Vec<String>,
    /// The compile workers' command when it is not `worker` (`ray=`: the relay around it).
    #[serde(default)]
    compile_worker: Option<Vec<String>>,
    /// The benchmark workers' command when it is not `worker` (`ray_gpus=`: the relay
    /// around it, holding one of the cluster's GPUs), and how many run.
    #[serde(default)]
    bench_worker: Option<Vec<String>>,
    #[serde(default)]
    bench_workers: Option<usize>,
    #[serde(default)]
    worker_env: Vec<(String, String)>,
    /// The settings the user gave (`strategy`, `devices`, `arch`, `db`...).
    #[serde(default)]
    request: Request,
    #[serde(default)]
    tune: Option<TuneSettings>,
}

/// What only a tuning with Kernel Tuner's conventions has.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TuneSettings {
    /// A Kernel Tuner cache document whose entries count as measured (`cache=`).
    #[serde(default)]
    cache: Option<Json>,
    /// Where the benchmark worker writes the outputs for `verify`.
    #[serde(default)]
    outputs_dir: Option<PathBuf>,
}

impl Job {
    fn parse(text: &str) -> PyResult<(Job, KernelSpec)> {
        let job: Job = serde_json::from_str(text).map_err(errors::spec)?;
        let spec = KernelSpec::from_json(&job.spec.to_string(), &job.base, "tune_kernel").map_err(errors::spec)?;
        Ok((job, spec))
    }
}

/// Tunes with Kernel Tuner's conventions (see the module's documentation). `constants`
/// are the `__constant__` symbols to fill (`cmem_args`). Returns the result as JSON, with
/// the device it ran on.
#[pyfunction]
#[pyo3(signature = (job, instance, verify, constants))]
pub fn tune_kernel_tuner(
    py: Python<'_>,
    job: &str,
    instance: Py<PyAny>,
    verify: Option<Py<PyAny>>,
    constants: Vec<(String, Vec<u8>)>,
) -> PyResult<String> {
    let (job, spec) = Job::parse(job)?;
    let settings = job.tune.as_ref().ok_or_else(|| errors::spec("the job has no tuning settings"))?;
    let space = spec.space().map_err(errors::space)?;
    let worker = worker_command(&job.worker, job.worker_env.clone())?;
    // A role's own command (the Ray relay around the worker), else the worker itself.
    let command_for = |argv: &Option<Vec<String>>| match argv {
        Some(argv) => worker_command(argv, job.worker_env.clone()),
        None => Ok(worker.clone()),
    };
    let workers =
        Workers::new(command_for(&job.bench_worker)?, command_for(&job.compile_worker)?).elsewhere(job.bench_workers);
    let result = py.detach(|| {
        let mut language =
            CudaLanguage::new(&spec, &space).with_instances(instances(&instance)).with_constants(constants);
        if let (Some(verify), Some(dir)) = (&verify, &settings.outputs_dir) {
            language = language.with_output_check(OutputCheck { dir: dir.clone(), check: output_check(verify) });
        }
        let tuning =
            crate::crew::keeping(Tuning::new(&language, &space, job.request.clone(), Front::KernelTuner, workers));
        // Entries of Kernel Tuner's cache file count as measured: into the store first.
        let import = |prepared: &Prepared<'_>| match &settings.cache {
            Some(cache) => import_cache(&prepared.store, prepared.tuning_id, cache).map_err(errors::store),
            None => Ok(()),
        };
        // The warning points at the user's tune_kernel call: the extension is called by
        // _Call.tune, which tune_kernel calls.
        let long_search = LongSearch {
            bounds: "bound it with strategy_options={'max_fevals': N} or {'time_limit': seconds}, or a strategy such as strategy='default' (which stops by itself)",
            stacklevel: 3,
        };
        run(tuning, None, &import, Some(&long_search))
    })?;
    Ok(result.to_string())
}

/// Compiles every configuration for the request's architecture, with no GPU, resuming from
/// the store: returns, per configuration, its parameters, `status` (`compiled` or why
/// not), `symbol` (the kernel's name in the cubin) and whether the store answered.
#[pyfunction]
#[pyo3(signature = (job, instance))]
pub fn compile_kernel_tuner(py: Python<'_>, job: &str, instance: Py<PyAny>) -> PyResult<String> {
    let (job, spec) = Job::parse(job)?;
    let space = spec.space().map_err(errors::space)?;
    let worker = worker_command(&job.worker, job.worker_env.clone())?;
    let request = &job.request;
    let rows = py.detach(|| -> PyResult<Vec<Json>> {
        let store = Store::open(&request.database()).map_err(errors::store)?;
        let info = spec.tuning_info(&format!("compile-only {}", request.arch));
        let tuning = store.tuning(&info).map_err(errors::store)?;
        let language = CudaLanguage::new(&spec, &space).with_instances(instances(&instance));
        let compile = CompileOnly::new(&language, &space, request, worker).keeping_in(&store, tuning);
        let report = compile_interruptibly(&compile)?;
        Ok(report.configs.iter().map(kernel_tuner_row).collect())
    })?;
    Ok(Json::Array(rows).to_string())
}

/// A compiled configuration as `tune_kernel(..., compile_only=True)` lists it: the
/// parameters, then `status`, `symbol`, `reason` and `from_store`.
fn kernel_tuner_row(compiled: &CompiledConfig) -> Json {
    let mut row = compiled.config.clone();
    let (status, symbol, reason) = match &compiled.outcome {
        Compilation::Compiled { symbol, .. } => ("compiled", symbol.clone(), None),
        Compilation::Failed { status, reason } => (status.as_str(), None, Some(reason.clone())),
    };
    row.insert("status".into(), json!(status));
    row.insert("symbol".into(), json!(symbol));
    row.insert("reason".into(), json!(reason));
    row.insert("from_store".into(), json!(compiled.from_store));
    Json::Object(row)
}

/// Records the entries of a Kernel Tuner cache document that the store lacks, so that the
/// tuning reuses them instead of measuring them again.
fn import_cache(store: &Store, tuning: TuningId, cache: &Json) -> Result<(), kerntune_store::StoreError> {
    let landscape = Landscape::parse(cache.to_string().as_bytes(), "cache", "kernel")?;
    let known: std::collections::HashSet<String> =
        store.evaluations(tuning)?.into_iter().map(|row| config_key(&row.config)).collect();
    for record in &landscape.records {
        let config: Map<String, Json> = landscape
            .params
            .iter()
            .zip(&record.config)
            .map(|(param, index)| (param.name().to_string(), param.values()[*index].to_json()))
            .collect();
        if !known.contains(&config_key(&config)) {
            store.record(tuning, &config, &record.evaluation)?;
        }
    }
    Ok(())
}

/// The caller's `instance(config) -> (source, name, grid, block, shared_bytes)`, called
/// with the configuration's values in parameter order.
fn instances(callback: &Py<PyAny>) -> InstanceFn<'_> {
    Box::new(move |config: &[Value]| -> Result<Instance, String> {
        Python::attach(|py| {
            let answer = callback.call1(py, (values_list(py, config)?,)).map_err(|e| {
                keep_interrupt(py, &e);
                e.to_string()
            })?;
            let (source, name, grid, block, shared_bytes): (String, String, [u32; 3], [u32; 3], u32) =
                answer.extract(py).map_err(|e| format!("the instance of a configuration: {e}"))?;
            Ok(Instance { source, name, geometry: Geometry { grid, block, shared_bytes } })
        })
    })
}

/// The caller's `verify(config, [(position, file)]) -> None | reason`.
fn output_check(callback: &Py<PyAny>) -> CheckFn<'_> {
    Box::new(move |config: &[Value], files: &[(usize, PathBuf)]| -> Result<(), String> {
        Python::attach(|py| {
            let files: Vec<(usize, String)> =
                files.iter().map(|(position, file)| (*position, path_text(file))).collect();
            let answer = callback.call1(py, (values_list(py, config)?, files)).map_err(|e| {
                keep_interrupt(py, &e);
                format!("verify raised {e}")
            })?;
            match answer.extract::<Option<String>>(py) {
                Ok(None) => Ok(()),
                Ok(Some(reason)) => Err(reason),
                Err(e) => Err(format!("the output check returned something else than None or a reason: {e}")),
            }
        })
    })
}

fn values_list<'py>(py: Python<'py>, config: &[Value]) -> Result<Bound<'py, PyList>, String> {
    let values = config.iter().map(|v| py_value(py, v)).collect::<PyResult<Vec<_>>>().map_err(|e| e.to_string())?;
    PyList::new(py, values).map_err(|e| e.to_string())
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}
