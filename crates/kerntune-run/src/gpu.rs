//! A tuning on the GPU: pre-flight, then the search over the pipeline, then the schedule
//! stage and the compiler-controls stage, each step in one place for every front and
//! language.

use std::time::Instant;

use kerntune_device::{driver_available, DeviceInfo};
use kerntune_engine::{BackendError, Budget, Event, Lazy, Search, StopReason, Tuner};
use kerntune_pipeline::controls::{tune_controls, ControlsOptions, ProposerWorker};
use kerntune_pipeline::finalists::{retime_configs, RetimeOptions};
use kerntune_pipeline::schedule::{schedule_config, ScheduleOptions, ScheduleReport};
use kerntune_pipeline::{Crew, Kept, Language, Pipeline, PipelineOptions, WorkerCommand};
use kerntune_space::{Space, Value};
use kerntune_store::{Store, TuningId, TuningInfo};
use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::summary::{Finalists, ResultRow, RunFacts, Tally};
use crate::vetting::Vetting;
use crate::{default_compile_workers, tuning_compile_workers, Front, NoGpu, Request, RunError, RunSummary, ShapeRow};

/// The worker programs of a run.
#[derive(Debug, Clone)]
pub struct Workers {
    /// Runs `<args> __worker bench --device N`.
    bench: WorkerCommand,
    /// Runs `<args> __worker compile`.
    compile: WorkerCommand,
    /// Benchmark workers when they are not one per local GPU: `bench` then runs each on a
    /// GPU of its own elsewhere (a Ray cluster's, through the relay), and `devices` is only
    /// probed for the target (the cluster's GPUs must be of its model: the workers check).
    bench_workers: Option<usize>,
}

impl Workers {
    /// `bench` measures on this machine's GPUs, `compile` compiles.
    pub fn new(bench: WorkerCommand, compile: WorkerCommand) -> Workers {
        Workers { bench, compile, bench_workers: None }
    }

    /// One program for both roles.
    pub fn of(program: WorkerCommand) -> Workers {
        Workers::new(program.clone(), program)
    }

    /// `bench` runs `count` benchmark workers on GPUs elsewhere (a Ray cluster's), each
    /// holding one; `None` or 0 keeps one per GPU of this machine.
    pub fn elsewhere(self, count: Option<usize>) -> Workers {
        Workers { bench_workers: count.filter(|n| *n > 0), ..self }
    }

    /// The compile workers' program.
    pub fn compile(&self) -> &WorkerCommand {
        &self.compile
    }
}

/// What a front asks for when it tunes a kernel on a GPU: the kernel, its space, the
/// user's [`Request`] and the front's worker programs.
pub struct Tuning<'a> {
    language: &'a dyn Language,
    space: &'a Space,
    request: Request,
    front: Front,
    workers: Workers,
    /// Time the search's best few again before calling one the winner; `None` takes the
    /// search's best as it is.
    retime: Option<RetimeOptions>,
    /// Then tune the native schedule of the best configuration.
    schedule: Option<ScheduleOptions>,
    /// Then let CompileIQ search ACF files for the best configuration.
    controls: Option<ControlsOptions>,
    /// A check the front runs itself on the best configurations before a winner is chosen
    /// (the Triton front's edge sizes).
    vetting: Option<Vetting<'a>>,
    /// Where the workers of the tuning before this one wait, and this one's are left for
    /// the next (see `kerntune_pipeline::Crew`); `None`: they stop at the end.
    kept: Option<&'a Kept>,
}

/// A tuning whose pre-flight checks passed: the GPU is open, the search settled, the store
/// open. Fronts print what it found before they [`Prepared::run`] it.
pub struct Prepared<'a> {
    /// The first GPU (all are of its model).
    pub device: DeviceInfo,
    /// Every GPU that measures, the first first.
    pub devices: Vec<DeviceInfo>,
    pub search: Search,
    pub store: Store,
    pub tuning_id: TuningId,
    tuning: Tuning<'a>,
    info: TuningInfo,
    options: PipelineOptions,
    /// CompileIQ's worker for the compiler-controls stage, started before the search.
    proposer: Option<ProposerWorker>,
    clock: Instant,
    prepare: PrepareTimes,
}

/// Where the checks before a tuning's first evaluation went ([`Tuning::prepare`]), in
/// seconds: finding the GPUs (the driver's start, the first time in a process), the
/// language's tools, and the store (opened, the tuning recorded, what it learns from read).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PrepareTimes {
    pub seconds: f64,
    pub gpus_s: f64,
    pub toolchain_s: f64,
    pub store_s: f64,
}

/// Progress of a run, for fronts to render.
#[derive(Debug)]
pub enum Progress<'a> {
    Search(Event<'a>),
    /// The search's best few are timed again.
    Finalists(&'a RetimeOptions),
    /// The schedule stage starts.
    Schedule(&'a ScheduleOptions),
}

impl<'a> Tuning<'a> {
    pub fn new(
        language: &'a dyn Language,
        space: &'a Space,
        request: Request,
        front: Front,
        workers: Workers,
    ) -> Tuning<'a> {
        let retime = request.retime().filter(|_| front.retimes());
        let schedule = request.schedule();
        let controls = request.controls.clone();
        Tuning { language, space, request, front, workers, retime, schedule, controls, vetting: None, kept: None }
    }

    /// Starts on the workers `kept` holds where they fit, and leaves this tuning's there,
    /// idle, when it ends (a tuning that is interrupted or fails leaves none).
    pub fn keeping_workers_in(self, kept: &'a Kept) -> Tuning<'a> {
        Tuning { kept: Some(kept), ..self }
    }

    /// With a check of the front's own on the best configurations (see [`Vetting`]).
    pub fn with_vetting(self, vetting: Vetting<'a>) -> Tuning<'a> {
        Tuning { vetting: Some(vetting), ..self }
    }

    /// The space searched.
    pub fn space(&self) -> &'a Space {
        self.space
    }

    /// Checks everything that can be checked before any work: a driver and the GPU, the
    /// language's tools, a non-empty space, the search settings, the store.
    pub fn prepare(self) -> Result<Prepared<'a>, RunError> {
        let clock = Instant::now();
        // What the user wrote is checked before what the machine has: a misspelt strategy
        // is named as such on a machine without a GPU too.
        if self.space.is_empty() {
            return Err(RunError::EmptySpace);
        }
        let search = self.request.search.resolve(self.front.default_strategy())?;
        if self.controls.as_ref().is_some_and(|c| c.budget == 0) {
            return Err(RunError::NoControlsBudget);
        }
        let step = Instant::now();
        let devices = gpus(&self.request, self.front)?;
        let gpus_s = step.elapsed().as_secs_f64();
        let device = devices[0].clone();
        let step = Instant::now();
        self.language.preflight().map_err(RunError::Toolchain)?;
        let toolchain_s = step.elapsed().as_secs_f64();
        let proposer = self.controls.as_ref().map(|c| c.start_proposer(&|| false)).transpose()?;
        let step = Instant::now();
        let store = Store::open(&self.request.database())?;
        let info = self.language.tuning_info(&device.name);
        let tuning_id = store.tuning(&info)?;
        let search = match &self.request.transfer {
            Some(transfer) => {
                let options = self.request.search.strategy_options_map();
                transfer.apply(search, &options, self.space, &store, info.objective.higher_is_better)?
            }
            None => search,
        };
        let search = search.starting_with(&self.request.first, self.space);
        let store_s = step.elapsed().as_secs_f64();
        let options = pipeline_options(&self.workers, &self.request, &search.budget, &devices);
        let prepare = PrepareTimes { seconds: clock.elapsed().as_secs_f64(), gpus_s, toolchain_s, store_s };
        Ok(Prepared {
            device,
            devices,
            search,
            store,
            tuning_id,
            tuning: self,
            info,
            options,
            proposer,
            clock,
            prepare,
        })
    }
}

/// The GPUs `request` measures on, or why there are none (as `front` says it).
fn gpus(request: &Request, front: Front) -> Result<Vec<DeviceInfo>, RunError> {
    if !driver_available() {
        return Err(NoGpu::NoDriver(front.without_gpu().to_string()).into());
    }
    request.devices.probe()
}

/// The workers of a tuning of `request` with `budget` on `devices` (the first first).
fn pipeline_options(workers: &Workers, request: &Request, budget: &Budget, devices: &[DeviceInfo]) -> PipelineOptions {
    let bench_devices: Vec<usize> = match workers.bench_workers {
        Some(count) => vec![devices[0].ordinal; count],
        None => devices.iter().map(|d| d.ordinal).collect(),
    };
    let compile_workers = request
        .compile_workers
        .unwrap_or_else(|| tuning_compile_workers(budget, bench_devices.len(), default_compile_workers()));
    PipelineOptions {
        bench_worker: workers.bench.clone(),
        compile_worker: workers.compile.clone(),
        devices: bench_devices,
        compile_workers: compile_workers.max(1),
    }
}

/// Starts, ahead of a tuning, the workers a tuning of `request` from `front` on this
/// machine's GPUs will ask for, and returns them as a crew to keep
/// ([`Tuning::keeping_workers_in`]): they start (a compile worker warms its compiler up)
/// while the caller does something else. A tuning whose options turn out otherwise starts
/// its own.
pub fn start_crew(workers: &Workers, request: &Request, front: Front) -> Result<Crew, RunError> {
    let search = request.search.resolve(front.default_strategy())?;
    let devices = gpus(request, front)?;
    Crew::start(&pipeline_options(workers, request, &search.budget, &devices)).map_err(RunError::Backend)
}

impl Prepared<'_> {
    /// Runs the search, then the schedule stage and the compiler-controls stage when asked
    /// for (not after an interruption).
    pub fn run(
        self,
        on_progress: &mut dyn FnMut(Progress<'_>),
        interrupt: &dyn Fn() -> bool,
    ) -> Result<RunSummary, RunError> {
        let Prepared {
            device,
            devices: _,
            search,
            store,
            tuning_id,
            tuning,
            info,
            options,
            mut proposer,
            clock,
            prepare,
        } = self;
        let (language, space) = (tuning.language, tuning.space);
        let capacity = options.compile_workers + 2 * options.devices.len();
        let kept = tuning.kept;
        let start = || Pipeline::start_with(language, space, options.clone(), kept.and_then(Kept::take));
        let mut backend = Lazy::new(capacity, start);
        let mut tally = Tally::default();
        let mut on_event = |event: Event<'_>| {
            if let Event::Evaluated { point, evaluation } = &event {
                tally.add(space, point.id, evaluation, point.from_store);
            }
            on_progress(Progress::Search(event));
        };
        let summary = Tuner {
            space,
            strategy: search.strategy,
            backend: &mut backend,
            store: Some((&store, tuning_id)),
            reuse_stored: !tuning.request.fresh,
            objective: info.objective.clone(),
            budget: search.budget,
            seed: search.seed,
            interrupt: Some(interrupt),
        }
        .run(&mut on_event)?;
        let wall_s = clock.elapsed().as_secs_f64();
        let compile_workers = backend.started().map(Pipeline::compile_workers);
        let startup = backend.started().map(|pipeline| pipeline.startup);
        // The finalists' re-timing goes on with the search's workers, and the next tuning
        // (when they are kept); the stages after those start their own.
        let mut warm =
            backend.into_started().filter(|_| tuning.retime.is_some() || kept.is_some()).and_then(Pipeline::into_crew);
        let facts = RunFacts {
            kernel: language.kernel_name().to_string(),
            device,
            objective: &info.objective,
            strategy: search.strategy_name,
            seed: search.seed,
            verified_sets: language.verified_sets(),
            verified_sizes: tuning.vetting.as_ref().map_or_else(|| language.verified_sizes(), |v| v.sizes.clone()),
            wall_s,
            compile_workers,
            workers: startup,
            prepare: Some(prepare),
            db: tuning.request.database().display().to_string(),
            tuning: tuning_id.get(),
            compiler: language.compiler(),
        };
        let mut run = RunSummary::new(summary, space, tally, facts);
        if let Some(vetting) = tuning.vetting.as_ref().filter(|_| !interrupted(&mut run, interrupt)) {
            let (count, within) = tuning.retime.as_ref().map_or((1, 0.0), |r| (r.finalists, r.within));
            let failed = run.vet(vetting, space, count, within).map_err(RunError::EdgeCheck)?;
            crate::vetting::record_failures(&store, tuning_id, &failed)?;
        }
        if let Some(retime) = tuning.retime.as_ref().filter(|_| !interrupted(&mut run, interrupt)) {
            // Times rank configurations only when the objective is the time, or a function
            // of it that no parameter changes.
            let measured_now = run.evaluations > run.from_store;
            if language.early_stop_applies() && measured_now {
                on_progress(Progress::Finalists(retime));
                let stages = Stages { options: &options, interrupt };
                warm = retime_finalists(&mut run, language, space, stages, retime, warm.take(), (&store, tuning_id))?;
            } else if language.early_stop_applies() {
                // Everything came from the store: so does the verdict, at no cost.
                stored_finalists(&mut run, space, (&store, tuning_id))?;
            }
        }
        match (kept, warm) {
            (Some(kept), Some(crew)) if !interrupted(&mut run, interrupt) => kept.put(crew),
            (_, crew) => drop(crew),
        }
        let schedule = tuning.schedule.as_ref().filter(|_| !interrupted(&mut run, interrupt));
        if let (Some(schedule), Some(best)) = (schedule, &run.best) {
            on_progress(Progress::Schedule(schedule));
            let values: Vec<Value> = space.values(best.id).into_iter().cloned().collect();
            let stage = ScheduleStage { language, device: &run.device, options: &options, store: &store, tuning_id };
            match stage.run(&values, &best.config, schedule, interrupt) {
                Ok((report, _)) => run.schedule = Some(report),
                Err(RunError::Backend(BackendError::Interrupted)) => run.stop = StopReason::Interrupted,
                Err(error) => return Err(error),
            }
        }
        let controls = tuning.controls.as_ref().filter(|_| !interrupted(&mut run, interrupt));
        if let (Some(controls), Some(proposer), Some(best)) = (controls, proposer.as_mut(), &run.best) {
            let values: Vec<Value> = space.values(best.id).into_iter().cloned().collect();
            let acf_at = space.params().iter().position(|p| p.name() == "acf");
            match tune_controls(language, proposer, &values, acf_at, &run.device, &options, controls, interrupt) {
                Ok(report) => {
                    // Kept under the search's best, as the finalists' report is.
                    let provenance = serde_json::to_string(&report)
                        .map_err(|source| RunError::Report { what: "controls search's report", source })?;
                    store.save_artifact(tuning_id, &best.config, CONTROLS, &[], &provenance)?;
                    run.controls = Some(report);
                }
                Err(BackendError::Interrupted) => run.stop = StopReason::Interrupted,
                Err(error) => return Err(error.into()),
            }
        }
        if let Some(transfer) = &tuning.request.transfer {
            let row = ShapeRow::of(&transfer.shape, &run, transfer.nearest().map(|t| &t.shape));
            run.shape = Some(row);
        }
        Ok(run)
    }
}

/// The artefact kind of a compiler-controls search's report.
const CONTROLS: &str = "controls";

/// Whether the run was interrupted, in the search or since. A Ctrl-C after the search skips
/// the stages left (the edge-size check, the finalists, the schedule stage) instead of
/// running them to their end first; what the search measured is in the store already.
fn interrupted(run: &mut RunSummary, interrupt: &dyn Fn() -> bool) -> bool {
    if run.stop != StopReason::Interrupted && interrupt() {
        run.stop = StopReason::Interrupted;
    }
    run.stop == StopReason::Interrupted
}

/// What the stages after the search share: the pipeline's options, and the caller's Ctrl-C.
struct Stages<'a> {
    options: &'a PipelineOptions,
    interrupt: &'a dyn Fn() -> bool,
}

/// Times the search's best few again (see `kerntune_pipeline::finalists`), on the search's
/// workers (`warm`) where it has them, and, when one of them is faster beyond the run's
/// noise, makes it the best. Returns the workers it timed on, idle, for the next tuning.
fn retime_finalists(
    run: &mut RunSummary,
    language: &dyn Language,
    space: &Space,
    Stages { options, interrupt }: Stages<'_>,
    retime: &RetimeOptions,
    warm: Option<Crew>,
    (store, tuning_id): (&Store, TuningId),
) -> Result<Option<Crew>, RunError> {
    let contenders: Vec<ResultRow> = run.contenders(retime.finalists, retime.within).into_iter().cloned().collect();
    if contenders.len() < 2 {
        return Ok(warm);
    }
    let values: Vec<Vec<Value>> =
        contenders.iter().map(|row| space.values(row.id).into_iter().cloned().collect()).collect();
    // A finalist that hangs or crashes when timed again (a kernel whose atomics behave
    // otherwise in back-to-back launches) costs the re-timing, never the search's answer.
    let (report, crew) = match retime_configs(language, &values, &run.device, options, retime, warm, interrupt) {
        Ok(timed) => timed,
        Err(BackendError::Interrupted) => {
            run.stop = StopReason::Interrupted;
            return Ok(None);
        }
        Err(error) => {
            run.finalists_failed = Some(error.to_string());
            return Ok(None);
        }
    };
    if report.winner != 0 {
        run.replace_best(&contenders[report.winner], space);
    }
    let finalists = Finalists {
        configs: contenders.iter().map(|r| r.config.clone()).collect(),
        descriptions: contenders.iter().map(|r| space.describe(r.id)).collect(),
        report,
    };
    // Kept under the search's best, so that a run the store answers says the same.
    let provenance =
        serde_json::to_string(&finalists).map_err(|source| RunError::Report { what: "finalists' report", source })?;
    store.save_artifact(tuning_id, &contenders[0].config, FINALISTS, &[], &provenance)?;
    run.finalists = Some(finalists);
    Ok(crew)
}

/// The artefact kind of a re-timing's report.
const FINALISTS: &str = "finalists";

/// The verdict an earlier run stored for this search's best, applied again.
fn stored_finalists(
    run: &mut RunSummary,
    space: &Space,
    (store, tuning_id): (&Store, TuningId),
) -> Result<(), RunError> {
    let Some(best) = &run.best else { return Ok(()) };
    let stored = store.artifacts(tuning_id, FINALISTS)?.into_iter().rev().find(|a| a.config == best.config);
    let Some(finalists) = stored.and_then(|a| serde_json::from_str::<Finalists>(&a.provenance).ok()) else {
        return Ok(());
    };
    if finalists.report.winner != 0 {
        let winner = &finalists.configs[finalists.report.winner];
        if let Some(row) = run.results.iter().find(|r| &r.config == winner).cloned() {
            run.replace_best(&row, space);
        }
    }
    run.finalists = Some(finalists);
    Ok(())
}

/// The schedule stage of one configuration: its native schedule searched on the GPU, and
/// the kept cubin (the winner, or the original) stored with the report as its provenance.
/// `values` are `config`'s in parameter order; `interrupt` (Ctrl-C) ends the search with
/// `BackendError::Interrupted`. Returns the report and the kept cubin.
#[allow(clippy::too_many_arguments)]
pub fn schedule_stage(
    language: &dyn Language,
    device: &DeviceInfo,
    options: &PipelineOptions,
    store: &Store,
    tuning_id: TuningId,
    values: &[Value],
    config: &Map<String, Json>,
    schedule: &ScheduleOptions,
    interrupt: &dyn Fn() -> bool,
) -> Result<(ScheduleReport, Vec<u8>), RunError> {
    ScheduleStage { language, device, options, store, tuning_id }.run(values, config, schedule, interrupt)
}

struct ScheduleStage<'a> {
    language: &'a dyn Language,
    device: &'a DeviceInfo,
    options: &'a PipelineOptions,
    store: &'a Store,
    tuning_id: TuningId,
}

impl ScheduleStage<'_> {
    fn run(
        &self,
        values: &[Value],
        config: &Map<String, Json>,
        schedule: &ScheduleOptions,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<(ScheduleReport, Vec<u8>), RunError> {
        let (report, original) =
            schedule_config(self.language, values, self.device, self.options, schedule, interrupt)?;
        let provenance =
            serde_json::to_string(&report).map_err(|source| RunError::Report { what: "schedule report", source })?;
        let kept = report.cubin.clone().unwrap_or(original.cubin.0);
        self.store.save_artifact(self.tuning_id, config, "schedule", &kept, &provenance)?;
        Ok((report, kept))
    }
}

impl std::fmt::Debug for Tuning<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tuning").field("kernel", &self.language.kernel_name()).field("request", &self.request).finish()
    }
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("tuning", &self.tuning).field("device", &self.device.name).finish()
    }
}
