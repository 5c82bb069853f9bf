//! Compiling every configuration for an architecture, with no GPU: what `kerntune tune
//! --compile-only`, `kerntune.compile` and `tune_kernel(..., compile_only=True)` do.
//! Cubins go to the store; configurations an earlier run compiled or saw fail are not
//! compiled again when resuming.

use std::collections::HashMap;
use std::time::Instant;

use kerntune_device::DeviceInfo;
use kerntune_pipeline::pool::{compile_all, CompileLimit, CompileOutcome, CompilePool};
use kerntune_pipeline::process::Hub;
use kerntune_pipeline::protocol::{CompileJob, CompileRequest, LaunchInfo};
use kerntune_pipeline::{CompileError, Language, WorkerCommand};
use kerntune_space::{ConfigId, Space, Value};
use kerntune_store::{config_key, Costs, Evaluation, Status, Store, StoreError, TuningId};
use serde_json::{json, Map, Value as Json};

use crate::{default_compile_workers, Request, RunError};

/// A compile-only run: the request's `arch` and `compile_workers` (default: one per core).
pub struct CompileOnly<'a> {
    language: &'a dyn Language,
    space: &'a Space,
    /// `sm_90`, `sm_90a`...
    arch: String,
    worker: WorkerCommand,
    compile_workers: Option<usize>,
    /// Where cubins and failures are kept; what it holds for this tuning is not compiled
    /// again.
    store: Option<(&'a Store, TuningId)>,
}

/// What became of one configuration.
#[derive(Debug, Clone)]
pub struct CompiledConfig {
    pub id: ConfigId,
    pub config: Map<String, Json>,
    pub outcome: Compilation,
    pub seconds: f64,
    /// Answered by the store (an earlier run compiled it, or saw it fail).
    pub from_store: bool,
}

#[derive(Debug, Clone)]
pub enum Compilation {
    /// The cubin, and what the compiler says of launching it (a binary an older version
    /// stored has no `launch`).
    Compiled {
        cubin: Option<Vec<u8>>,
        symbol: Option<String>,
        launch: Option<LaunchInfo>,
    },
    Failed {
        status: Status,
        reason: String,
    },
}

/// Every configuration's outcome, in the order of the space.
#[derive(Debug, Clone)]
pub struct CompileReport {
    pub configs: Vec<CompiledConfig>,
    pub wall_s: f64,
    /// Compile time summed over the workers.
    pub compile_s: f64,
    pub workers: usize,
    pub interrupted: bool,
}

impl CompileReport {
    pub fn compiled(&self) -> usize {
        self.configs.iter().filter(|c| matches!(c.outcome, Compilation::Compiled { .. })).count()
    }

    pub fn from_store(&self) -> usize {
        self.configs.iter().filter(|c| c.from_store).count()
    }

    pub fn failures(&self) -> impl Iterator<Item = (&CompiledConfig, &str)> {
        self.configs.iter().filter_map(|c| match &c.outcome {
            Compilation::Failed { reason, .. } => Some((c, reason.as_str())),
            Compilation::Compiled { .. } => None,
        })
    }

    /// An error when nothing compiled (and the run was not interrupted): the kernel, not a
    /// configuration, is at fault.
    pub fn require_some(&self, arch: &str) -> Result<(), RunError> {
        if self.compiled() > 0 || self.interrupted {
            return Ok(());
        }
        let reason = self.failures().next().map_or("", |(_, reason)| reason);
        Err(RunError::NothingCompiled {
            arch: arch.to_string(),
            reason: reason.lines().next().unwrap_or_default().to_string(),
        })
    }
}

impl<'a> CompileOnly<'a> {
    pub fn new(language: &'a dyn Language, space: &'a Space, request: &Request, worker: WorkerCommand) -> Self {
        let (arch, compile_workers) = (request.arch.clone(), request.compile_workers);
        CompileOnly { language, space, arch, worker, compile_workers, store: None }
    }

    /// Keeping cubins and failures in `store` under `tuning`, and answering from it.
    pub fn keeping_in(self, store: &'a Store, tuning: TuningId) -> Self {
        CompileOnly { store: Some((store, tuning)), ..self }
    }

    /// The architecture compiled for.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Compiles what the store does not answer; `on_done` hears of each configuration as it
    /// finishes (for a progress bar), `stop` ends the run early (Ctrl-C).
    pub fn run(
        &self,
        on_done: &mut dyn FnMut(&CompiledConfig),
        stop: &dyn Fn() -> bool,
    ) -> Result<CompileReport, RunError> {
        let clock = Instant::now();
        let target = DeviceInfo::compile_target(&self.arch)?;
        self.language.preflight().map_err(RunError::Toolchain)?;
        let known = self.known()?;
        let ids: Vec<ConfigId> = self.space.ids().collect();
        let mut slots: Vec<Option<CompiledConfig>> = vec![None; ids.len()];
        let mut requests = Vec::new();
        let workers = self.compile_workers.unwrap_or_else(default_compile_workers).max(1);
        for (index, id) in ids.iter().enumerate() {
            // Building a job can call the front's own code (Kernel Tuner's conventions in
            // Python) for every configuration of a large space: Ctrl-C must not wait for it.
            if stop() {
                return Ok(finished(slots, clock, 0.0, workers, true));
            }
            let config = self.space.config_json(*id);
            if let Some(outcome) = known.get(&config_key(&config)) {
                let done = CompiledConfig { id: *id, config, outcome: outcome.clone(), seconds: 0.0, from_store: true };
                on_done(&done);
                slots[index] = Some(done);
                continue;
            }
            let values: Vec<Value> = self.space.values(*id).into_iter().cloned().collect();
            match self.language.compile_job(&values, &target) {
                Ok(mut job) => {
                    if let CompileJob::Cuda { arch, .. } = &mut job {
                        *arch = self.arch.to_string();
                    }
                    requests.push(CompileRequest { id: index as u32, job });
                }
                // Ctrl-C may have ended the front's code with an error that is not the
                // configuration's: it is not kept as the configuration's outcome.
                Err(_) if stop() => return Ok(finished(slots, clock, 0.0, workers, true)),
                Err(reason) => {
                    let failed = Compilation::Failed { status: Status::InvalidConfig, reason: reason.to_string() };
                    let done = self.keep(*id, config, failed, 0.0)?;
                    on_done(&done);
                    slots[index] = Some(done);
                }
            }
        }
        let hub = Hub::default();
        let limit = CompileLimit::new(self.language.compile_timeout(), self.language.compile_timeout_adapts());
        let mut pool = CompilePool::new(&self.worker, workers, limit, &hub, 0).map_err(CompileError::Spawn)?;
        let mut compile_s = 0.0;
        let mut record = |outcome: CompileOutcome| -> Result<(), CompileError> {
            let (index, compilation, seconds) = match outcome {
                CompileOutcome::Compiled { id, binary, seconds } => {
                    let compiled = Compilation::Compiled {
                        cubin: Some(binary.cubin),
                        symbol: binary.symbol,
                        launch: binary.launch,
                    };
                    (id, compiled, seconds)
                }
                CompileOutcome::Failed { id, kind, reason, seconds } => {
                    (id, Compilation::Failed { status: kind.status(), reason }, seconds)
                }
            };
            compile_s += seconds;
            // A reply for an id that was never asked is the worker's fault, not a reason to panic.
            let id = *ids.get(index as usize).ok_or(CompileError::UnaskedReply(index))?;
            let done = self.keep(id, self.space.config_json(id), compilation, seconds)?;
            on_done(&done);
            slots[index as usize] = Some(done);
            Ok(())
        };
        compile_all(&mut pool, &hub, requests, &mut record, stop)?;
        Ok(finished(slots, clock, compile_s, workers, stop()))
    }

    /// Outcomes the store holds for this tuning, by configuration.
    fn known(&self) -> Result<HashMap<String, Compilation>, RunError> {
        let mut known = HashMap::new();
        let Some((store, tuning)) = self.store else { return Ok(known) };
        for row in store.evaluations(tuning)? {
            let reason = row.evaluation.reason.clone().unwrap_or_default();
            known.insert(config_key(&row.config), Compilation::Failed { status: row.evaluation.status, reason });
        }
        for artifact in store.artifacts(tuning, "cubin")? {
            let provenance: Json = serde_json::from_str(&artifact.provenance).unwrap_or(Json::Null);
            let symbol = provenance.get("symbol").and_then(Json::as_str).map(str::to_string);
            let launch = provenance.get("launch").and_then(|launch| serde_json::from_value(launch.clone()).ok());
            let compiled = Compilation::Compiled { cubin: Some(artifact.data), symbol, launch };
            known.insert(config_key(&artifact.config), compiled);
        }
        Ok(known)
    }

    /// Keeps an outcome in the store: a cubin as an artefact, a failure as an evaluation.
    fn keep(
        &self,
        id: ConfigId,
        config: Map<String, Json>,
        outcome: Compilation,
        seconds: f64,
    ) -> Result<CompiledConfig, StoreError> {
        if let Some((store, tuning)) = self.store {
            match &outcome {
                Compilation::Compiled { cubin: Some(cubin), symbol, launch } => {
                    // With the launch, a resumed run answers as fully as the run that compiled.
                    let provenance = json!({"symbol": symbol, "arch": self.arch, "seconds": seconds, "launch": launch});
                    store.save_artifact(tuning, &config, "cubin", cubin, &provenance.to_string())?;
                }
                Compilation::Compiled { cubin: None, .. } => {}
                Compilation::Failed { status, reason } => {
                    let costs = Costs { compile_s: seconds, ..Costs::default() };
                    store.record(tuning, &config, &Evaluation::failed(*status, reason.clone(), costs))?;
                }
            }
        }
        Ok(CompiledConfig { id, config, outcome, seconds, from_store: false })
    }
}

/// The report of the configurations done so far, in the order of the space.
fn finished(
    slots: Vec<Option<CompiledConfig>>,
    clock: Instant,
    compile_s: f64,
    workers: usize,
    interrupted: bool,
) -> CompileReport {
    CompileReport {
        configs: slots.into_iter().flatten().collect(),
        wall_s: clock.elapsed().as_secs_f64(),
        compile_s,
        workers,
        interrupted,
    }
}

impl std::fmt::Debug for CompileOnly<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileOnly").field("kernel", &self.language.kernel_name()).field("arch", &self.arch).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use kerntune_pipeline::pool::Binary;
    use kerntune_pipeline::protocol::{KernelImage, Setup};
    use kerntune_pipeline::LanguageError;
    use kerntune_space::params_from_json;
    use kerntune_store::{Objective, TuningInfo};
    use serde_json::json;

    use super::*;

    /// A language that refuses every configuration, as Kernel Tuner's conventions do when
    /// the user's Python raises; `on_refusal` runs first (it may raise the interrupt).
    struct Refusing<'a> {
        on_refusal: &'a dyn Fn(),
    }

    impl Language for Refusing<'_> {
        fn kernel_name(&self) -> &str {
            "k"
        }

        fn tuning_info(&self, device: &str) -> TuningInfo {
            TuningInfo {
                kernel: "k".into(),
                kernel_name: "k".into(),
                device: device.into(),
                problem: "{}".into(),
                params: Vec::new(),
                objective: Objective::time(),
            }
        }

        fn verified_sets(&self) -> u32 {
            0
        }

        fn compile_job(&self, _config: &[Value], _device: &DeviceInfo) -> Result<CompileJob, LanguageError> {
            (self.on_refusal)();
            Err(LanguageError::InvalidConfig("the instance function raised".into()))
        }

        fn kernel_image(&self, _config: &[Value], _binary: Binary) -> Result<KernelImage, LanguageError> {
            Err(LanguageError::InvalidConfig("never launched".into()))
        }

        fn objective(
            &self,
            _config: &[Value],
            time_ms: f64,
            _metrics: &Map<String, Json>,
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
            Err(LanguageError::Setup("never set up".into()))
        }

        fn launch_timeout(&self) -> Duration {
            Duration::from_secs(1)
        }

        fn compile_timeout(&self) -> Duration {
            Duration::from_secs(1)
        }
    }

    /// Compiles a space of 3 with `language`, stopping when `stop` says; returns the report
    /// and the failures the store kept.
    fn compile(language: &dyn Language, stop: &dyn Fn() -> bool) -> (CompileReport, usize) {
        let Json::Object(params) = json!({"a": [1, 2, 3]}) else { unreachable!() };
        let space = Space::new::<&str>(params_from_json(&params).expect("params"), &[]).expect("space");
        let store = Store::in_memory().expect("store");
        let tuning = store.tuning(&language.tuning_info("compile-only sm_90")).expect("tuning");
        let request = Request { compile_workers: Some(1), ..Request::default() };
        let worker = WorkerCommand::from_argv(&["true".to_string()], Vec::new()).expect("a command");
        let compile = CompileOnly::new(language, &space, &request, worker).keeping_in(&store, tuning);
        let report = compile.run(&mut |_| {}, stop).expect("runs");
        (report, store.evaluations(tuning).expect("reads").len())
    }

    #[test]
    fn a_refusal_caused_by_the_interrupt_is_not_kept_as_the_configurations_outcome() {
        let (report, kept) = compile(&Refusing { on_refusal: &|| {} }, &|| false);
        assert_eq!((report.configs.len(), kept), (3, 3), "a refusal of its own is kept as invalid");
        assert!(!report.interrupted);

        let interrupted = Cell::new(false);
        let language = Refusing { on_refusal: &|| interrupted.set(true) };
        let (report, kept) = compile(&language, &|| interrupted.get());
        assert!(report.interrupted);
        assert_eq!((report.configs.len(), kept), (0, 0), "nothing is known of the configuration");
    }
}
