//! Kernel Tuner's `tune_kernel`, run by kerntune: the Python package hands over one JSON
//! job (a kernel spec and the search settings) and two callables. `instance` applies
//! Kernel Tuner's conventions to a configuration (its source with the definitions, the
//! kernel's name, the launch geometry), since they may call the user's own functions;
//! `verify`, when given, judges the outputs the benchmark worker wrote back, in the
//! calling process. Both are called with the GIL taken back for the call only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kerntune_lang_cuda::KernelSpec;
use kerntune_lang_cuda::{check_device_limits, CheckFn, CudaLanguage, Instance, InstanceFn, OutputCheck};
use kerntune_pipeline::pool::{CompileOutcome, CompilePool};
use kerntune_pipeline::process::Hub;
use kerntune_pipeline::protocol::{CompileJob, CompileRequest};
use kerntune_pipeline::Geometry;
use kerntune_pipeline::PipelineOptions;
use kerntune_space::{Space, Value};
use kerntune_store::{config_key, Costs, Evaluation, Landscape, Status, Store, TuningId};
use pyo3::prelude::*;
use pyo3::types::PyList;
use serde::Deserialize;
use serde_json::{json, Map, Value as Json};

use crate::errors;
use crate::tuning::{
    compile_interruptibly, compile_only_device, keep_interrupt, py_value, require_gpu, run, search, worker_command,
};

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
    #[serde(default)]
    worker_env: Vec<(String, String)>,
    compile_workers: usize,
    #[serde(default)]
    db: Option<String>,
    #[serde(default)]
    tune: Option<TuneSettings>,
    /// Compile every configuration for this architecture instead of tuning (no GPU).
    #[serde(default)]
    arch: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TuneSettings {
    strategy: String,
    #[serde(default)]
    strategy_options: Map<String, Json>,
    #[serde(default)]
    max_fevals: Option<usize>,
    #[serde(default)]
    time_limit: Option<f64>,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    device: usize,
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
    let options = serde_json::to_string(&settings.strategy_options).map_err(errors::strategy)?;
    let search = search(
        &settings.strategy,
        &options,
        settings.max_fevals,
        settings.time_limit,
        None,
        settings.seed,
        job.db.clone(),
        false,
    )?;
    let device_info = require_gpu(settings.device)?;
    if !kerntune_device::nvrtc_available() {
        return Err(errors::backend(
            "NVRTC is not installed (pip install nvidia-cuda-nvrtc, or install the CUDA toolkit)",
        ));
    }
    let mut command = worker_command(&job.worker)?;
    command.env = job.worker_env.clone();
    let pipeline = PipelineOptions {
        bench_worker: command.clone(),
        compile_worker: command,
        device: settings.device,
        compile_workers: job.compile_workers.max(1),
    };
    let info = spec.tuning_info(&device_info.name);
    if let Some(cache) = &settings.cache {
        let store = Store::open(&search.db).map_err(errors::store)?;
        let tuning = store.tuning(&info).map_err(errors::store)?;
        import_cache(&store, tuning, cache).map_err(errors::store)?;
    }
    let mut result = py.detach(|| {
        let mut frontend =
            CudaLanguage::new(&spec, &space).with_instances(instances(&instance)).with_constants(constants);
        if let (Some(verify), Some(dir)) = (&verify, &settings.outputs_dir) {
            frontend = frontend.with_output_check(OutputCheck { dir: dir.clone(), check: output_check(verify) });
        }
        run(&frontend, &space, &info, &search, pipeline, None)
    })?;
    result["device"] = serde_json::to_value(&device_info).map_err(errors::backend)?;
    Ok(result.to_string())
}

/// Compiles every configuration for the job's architecture, with no GPU, resuming from
/// the store: returns, per configuration, its parameters, `status` (`compiled` or why
/// not), `symbol` (the kernel's name in the cubin) and whether the store answered.
#[pyfunction]
#[pyo3(signature = (job, instance))]
pub fn compile_kernel_tuner(py: Python<'_>, job: &str, instance: Py<PyAny>) -> PyResult<String> {
    let (job, spec) = Job::parse(job)?;
    let arch = job.arch.clone().ok_or_else(|| errors::spec("the job names no architecture"))?;
    if !kerntune_device::nvrtc_available() {
        return Err(errors::backend("NVRTC (libnvrtc) is not installed: pip install nvidia-cuda-nvrtc"));
    }
    let space = spec.space().map_err(errors::space)?;
    let command = worker_command(&job.worker)?;
    let db = job.db.clone().map_or_else(Store::default_path, PathBuf::from);
    let outcomes = py.detach(|| -> PyResult<Vec<Json>> {
        let store = Store::open(&db).map_err(errors::store)?;
        let tuning = store.tuning(&spec.tuning_info(&format!("compile-only {arch}"))).map_err(errors::store)?;
        let compile = CompileOnly { spec: &spec, space: &space, store: &store, tuning, arch: &arch };
        let mut command = command.clone();
        command.env = job.worker_env.clone();
        compile.run(&instances(&instance), &command, job.compile_workers)
    })?;
    Ok(Json::Array(outcomes).to_string())
}

/// One compile-only run of a spec's space.
struct CompileOnly<'a> {
    spec: &'a KernelSpec,
    space: &'a Space,
    store: &'a Store,
    tuning: TuningId,
    arch: &'a str,
}

impl CompileOnly<'_> {
    fn run(
        &self,
        instance: &InstanceFn<'_>,
        command: &kerntune_pipeline::WorkerCommand,
        workers: usize,
    ) -> PyResult<Vec<Json>> {
        let (store, tuning) = (self.store, self.tuning);
        let compiled: HashMap<String, Json> = store
            .artifacts(tuning, "cubin")
            .map_err(errors::store)?
            .into_iter()
            .map(|a| (config_key(&a.config), serde_json::from_str(&a.provenance).unwrap_or(Json::Null)))
            .collect();
        let failed: HashMap<String, Evaluation> = store
            .evaluations(tuning)
            .map_err(errors::store)?
            .into_iter()
            .map(|row| (config_key(&row.config), row.evaluation))
            .collect();
        let device = compile_only_device();
        let ids: Vec<_> = self.space.ids().collect();
        let mut outcomes = vec![Json::Null; ids.len()];
        let mut requests = Vec::new();
        for (index, id) in ids.iter().enumerate() {
            let config = self.space.config_json(*id);
            let key = config_key(&config);
            if let Some(provenance) = compiled.get(&key) {
                outcomes[index] = outcome(config, "compiled", None, provenance.get("symbol"), true);
                continue;
            }
            if let Some(evaluation) = failed.get(&key) {
                outcomes[index] = outcome(config, evaluation.status.as_str(), evaluation.reason.as_deref(), None, true);
                continue;
            }
            let values: Vec<Value> = self.space.values(*id).into_iter().cloned().collect();
            match instance(&values).and_then(|i| check_device_limits(&i.geometry, &device).map(|()| i)) {
                Ok(Instance { source, name, .. }) => {
                    let options = self.spec.options_for(&values);
                    let job = CompileJob::Cuda { source, name, options, arch: self.arch.to_string() };
                    requests.push(CompileRequest { id: index as u32, job });
                }
                Err(reason) => {
                    let evaluation = Evaluation::failed(Status::InvalidConfig, reason.clone(), Costs::default());
                    store.record(tuning, &config, &evaluation).map_err(errors::store)?;
                    outcomes[index] = outcome(config, Status::InvalidConfig.as_str(), Some(&reason), None, false);
                }
            }
        }
        let hub = Hub::default();
        let timeout = self.spec.timing.compile_timeout;
        let mut pool = CompilePool::new(command, workers.max(1), timeout, &hub, 0).map_err(errors::backend)?;
        let mut record = |compiled: CompileOutcome| -> Result<(), String> {
            let (index, entry) = match compiled {
                CompileOutcome::Compiled { id, binary, seconds } => {
                    let config = self.space.config_json(ids[id as usize]);
                    let provenance = json!({"symbol": binary.symbol, "arch": self.arch, "seconds": seconds});
                    store
                        .save_artifact(tuning, &config, "cubin", &binary.cubin, &provenance.to_string())
                        .map_err(|e| e.to_string())?;
                    (id, outcome(config, "compiled", None, provenance.get("symbol"), false))
                }
                CompileOutcome::Failed { id, reason, seconds, .. } => {
                    let Some(config_id) = ids.get(id as usize) else { return Ok(()) };
                    let config = self.space.config_json(*config_id);
                    let costs = Costs { compile_s: seconds, ..Costs::default() };
                    let evaluation = Evaluation::failed(Status::CompileFailed, reason.clone(), costs);
                    store.record(tuning, &config, &evaluation).map_err(|e| e.to_string())?;
                    (id, outcome(config, Status::CompileFailed.as_str(), Some(&reason), None, false))
                }
            };
            if let Some(slot) = outcomes.get_mut(index as usize) {
                *slot = entry;
            }
            Ok(())
        };
        compile_interruptibly(&mut pool, &hub, requests, &mut record)?;
        Ok(outcomes)
    }
}

fn outcome(
    mut config: Map<String, Json>,
    status: &str,
    reason: Option<&str>,
    symbol: Option<&Json>,
    from_store: bool,
) -> Json {
    config.insert("status".into(), json!(status));
    config.insert("symbol".into(), symbol.cloned().unwrap_or(Json::Null));
    config.insert("reason".into(), json!(reason));
    config.insert("from_store".into(), json!(from_store));
    Json::Object(config)
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
