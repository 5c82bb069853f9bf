//! The GPU pipeline every language shares: a compile pool running ahead of one benchmark
//! worker per GPU. A [`Language`] says how a configuration becomes a compile job and how a compiled
//! kernel is launched; the [`Pipeline`] does the rest and is the engine's backend.
//!
//! `submit` asks the language for a compile job and queues it; compiled kernels queue for
//! the GPU; `next` waits for whichever worker speaks next, enforces the compile and launch
//! deadlines, replaces crashed workers, and returns evaluations in the order they finish.
//! With several GPUs (of one model: their results are one tuning's), each compiled kernel
//! goes to whichever benchmark worker is free, and each result names the GPU that measured.
//! Every failure of a configuration becomes an evaluation with a status and a reason; only
//! a benchmark worker that cannot be (re)started is an error.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kerntune_engine::{Backend, BackendError};
use kerntune_space::{ConfigId, Space, Value};
use kerntune_store::{Costs, Evaluation, Status};

use kerntune_device::DeviceInfo;
use kerntune_engine::stats::median;

use crate::crew::{Crew, Hand};
use crate::early_stop::Noise;
use crate::error::{Failure, FailureKind, LanguageError, MixedModels};
use crate::language::Language;
use crate::memo;
use crate::pool::{Binary, CompileLimit, CompileOutcome, CompilePool};
use crate::process::{Hub, Line, Origin, Worker, WorkerCommand};
use crate::protocol::{
    output_file, ArgSetup, CompileJob, CompileRequest, EvaluateRequest, EvaluateResult, FromBench, KernelImage, Setup,
    SetupTimes, ToBench,
};

/// How the pipeline runs: which worker programs, which GPUs, how many compilers.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Runs `<args> __worker bench --device N`.
    pub bench_worker: WorkerCommand,
    /// Runs `<args> __worker compile`.
    pub compile_worker: WorkerCommand,
    /// The GPUs that measure, one benchmark worker each, all of one model. The search
    /// spreads its configurations over them; the finalists and the schedule stage use the
    /// first.
    pub devices: Vec<usize>,
    pub compile_workers: usize,
}

impl PipelineOptions {
    /// The GPU of the stages that measure on one: finalists and schedule.
    pub fn first_device(&self) -> usize {
        self.devices.first().copied().unwrap_or(0)
    }
}

/// How a pipeline's workers came to be ready, for the run's summary: kept from the tuning
/// before ([`Crew`]) or started, the seconds from the start until every benchmark worker
/// was set up with this tuning's data (`None` until then: the search starts before), and
/// where the setup of the last to be ready went.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Startup {
    pub reused: bool,
    pub ready_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup: Option<SetupTimes>,
}

/// Time the benchmark worker may take to start and set up (data, reference) before the
/// run is declared impossible.
const SETUP_TIMEOUT: Duration = Duration::from_secs(300);
/// Time an evaluation may take before its first launch (module load, attribute queries).
const EVALUATION_SLACK: Duration = Duration::from_secs(20);
/// Time allowed beyond the launches a worker said it is waiting for.
const WAIT_SLACK: Duration = Duration::from_secs(2);
/// Restarts without a completed evaluation after which a benchmark worker is given up.
const MAX_RESTARTS: usize = 3;
/// Benchmark workers that may die under one configuration before it fails: a worker that
/// dies without a word is not always the kernel's doing (a GPU's worker killed, a Ray node
/// gone), so the configuration is measured once more, on whichever GPU is free.
const ATTEMPTS: u32 = 2;

#[derive(Debug)]
enum BenchState {
    /// Started; waiting for `Ready`.
    Starting,
    /// Setup sent; waiting for `SetupDone`.
    SettingUp,
    Idle,
    Busy {
        id: u32,
    },
    /// Failed [`MAX_RESTARTS`] times in a row; the other GPUs go on without it.
    Retired,
}

/// One GPU's benchmark worker and where it stands.
#[derive(Debug)]
struct BenchSlot {
    ordinal: usize,
    worker: Worker,
    state: BenchState,
    deadline: Option<Instant>,
    restarts: usize,
    /// The GPU as its worker described it (its PCI address names it in the results).
    info: Option<DeviceInfo>,
}

impl BenchSlot {
    /// A started worker (a kept crew's, or one started now): its setup is sent once it is
    /// ready (at once where it said so before).
    fn adopted(hand: Hand) -> BenchSlot {
        let Hand { ordinal, worker, info } = hand;
        let state = if info.is_some() { BenchState::SettingUp } else { BenchState::Starting };
        BenchSlot { ordinal, worker, state, deadline: None, restarts: 0, info }
    }
}

/// Fresh workers for `options`: a benchmark worker per GPU (not yet ready) and the compile
/// pool. The compile workers start (import their compiler) while the benchmark workers open
/// their GPUs: both take seconds, and neither needs the other.
pub(crate) fn spawn(
    options: &PipelineOptions,
    limit: CompileLimit,
    compile_workers: usize,
) -> Result<(Arc<Hub>, Vec<Hand>, CompilePool), BackendError> {
    if options.devices.is_empty() {
        return Err(BackendError::CannotStart("no GPU to measure on".into()));
    }
    let hub = Arc::new(Hub::default());
    let mut bench = Vec::with_capacity(options.devices.len());
    for (slot, &ordinal) in options.devices.iter().enumerate() {
        let worker = Worker::spawn(&options.bench_worker, &bench_args(ordinal), Origin { slot, generation: 0 }, &hub)
            .map_err(|e| BackendError::CannotStart(format!("cannot start the benchmark worker: {e}")))?;
        bench.push(Hand { ordinal, worker, info: None });
    }
    let pool = CompilePool::new(&options.compile_worker, compile_workers, limit, &hub, bench.len())
        .map_err(|e| BackendError::CannotStart(format!("cannot start the compile workers: {e}")))?;
    Ok((hub, bench, pool))
}

/// A configuration between `submit` and its evaluation.
#[derive(Debug)]
struct Job {
    config: ConfigId,
    values: Vec<Value>,
    costs: Costs,
    /// When a benchmark worker received it, for the framework share of its time.
    sent: Option<Instant>,
    /// The early-stop factor its samples were held to, if any.
    early_stop_factor: Option<f64>,
    /// The compiled kernel, kept while it is measured so that it can be measured again.
    image: Option<KernelImage>,
    /// Benchmark workers that died under it.
    deaths: u32,
    /// Its compile job's key in this process's memo (see `memo`), until its binary is kept.
    memo_key: Option<String>,
}

pub struct Pipeline<'a> {
    language: &'a dyn Language,
    space: &'a Space,
    options: PipelineOptions,
    hub: Arc<Hub>,
    /// The first GPU (all are of its model).
    pub device: DeviceInfo,
    bench: Vec<BenchSlot>,
    setup: Setup,
    pool: CompilePool,
    jobs: HashMap<u32, Job>,
    next_job: u32,
    ready: VecDeque<(u32, KernelImage)>,
    done: VecDeque<(ConfigId, Evaluation)>,
    best_median_ms: Option<f64>,
    /// How far first samples sat above their medians so far, for the early-stop factor.
    noise: Noise,
    started: Instant,
    pub startup: Startup,
}

impl std::fmt::Debug for Pipeline<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("device", &self.device.name)
            .field("gpus", &self.bench.len())
            .field("in_flight", &self.jobs.len())
            .finish()
    }
}

fn bench_args(device: usize) -> Vec<String> {
    vec!["__worker".into(), "bench".into(), "--device".into(), device.to_string()]
}

impl<'a> Pipeline<'a> {
    /// Starts the workers, has the language build the setup (compiling its reference) and
    /// sets every benchmark worker up.
    pub fn start(
        language: &'a dyn Language,
        space: &'a Space,
        options: PipelineOptions,
    ) -> Result<Pipeline<'a>, BackendError> {
        Pipeline::start_with(language, space, options, None)
    }

    /// As [`Pipeline::start`], on `crew`'s workers where they are the ones `options` asks
    /// for ([`Crew::fits`]); otherwise they stop and fresh ones start, as they do when a
    /// kept worker cannot be set up (one that died since: killed, out of memory).
    pub fn start_with(
        language: &'a dyn Language,
        space: &'a Space,
        options: PipelineOptions,
        crew: Option<Crew>,
    ) -> Result<Pipeline<'a>, BackendError> {
        let started = Instant::now();
        let limit = CompileLimit::new(language.compile_timeout(), language.compile_timeout_adapts());
        if let Some(kept) = crew.filter(|c| c.fits(&options)).and_then(|c| c.retarget(limit.clone())) {
            if let Ok(pipeline) = Pipeline::set_up(language, space, options.clone(), kept, started, true) {
                return Ok(pipeline);
            }
        }
        let fresh = spawn(&options, limit, language.compile_workers_to_start(options.compile_workers))?;
        Pipeline::set_up(language, space, options, fresh, started, false)
    }

    /// Has `workers` ready, the language build the setup (compiling its reference) and every
    /// benchmark worker set up with it.
    fn set_up(
        language: &'a dyn Language,
        space: &'a Space,
        options: PipelineOptions,
        workers: (Arc<Hub>, Vec<Hand>, CompilePool),
        started: Instant,
        reused: bool,
    ) -> Result<Pipeline<'a>, BackendError> {
        let (hub, hands, mut pool) = workers;
        let mut bench: Vec<BenchSlot> = hands.into_iter().map(BenchSlot::adopted).collect();
        for slot in bench.iter_mut().filter(|s| s.info.is_none()) {
            match wait_bench(&hub, &mut slot.worker, Instant::now() + SETUP_TIMEOUT)? {
                FromBench::Ready { device } => slot.info = Some(device),
                FromBench::Fatal { message } => return Err(BackendError::CannotStart(message)),
                other => {
                    return Err(BackendError::Protocol(format!(
                        "unexpected first message from the benchmark worker: {other:?}"
                    )))
                }
            }
        }
        let infos: Vec<DeviceInfo> = bench.iter().filter_map(|s| s.info.clone()).collect();
        one_model(&infos).map_err(|e| BackendError::CannotStart(e.to_string()))?;
        let device = infos.into_iter().next().ok_or(BackendError::Misuse("no device information"))?;
        let mut compile = |job: CompileJob| compile_now(&mut pool, &hub, job, language.compile_timeout());
        let setup = language.setup(&device, &mut compile).map_err(|e| BackendError::CannotStart(e.to_string()))?;
        // The GPUs set up (their data, the reference's outputs: seconds for large buffers)
        // while the search starts and its first configurations compile; each measures once
        // its `SetupDone` comes (`on_bench_line`). A setup that fails fails the start as it
        // would have here.
        for slot in &mut bench {
            slot.worker
                .send(&ToBench::Setup(setup.clone()))
                .map_err(|e| BackendError::CannotStart(format!("the benchmark worker is gone: {e}")))?;
            slot.state = BenchState::SettingUp;
            slot.deadline = Some(Instant::now() + SETUP_TIMEOUT);
        }
        Ok(Pipeline {
            language,
            space,
            options,
            hub,
            device,
            bench,
            setup,
            pool,
            jobs: HashMap::new(),
            next_job: 0,
            ready: VecDeque::new(),
            done: VecDeque::new(),
            best_median_ms: None,
            noise: Noise::default(),
            started,
            startup: Startup { reused, ready_s: None, setup: None },
        })
    }

    pub fn compile_workers(&self) -> usize {
        self.pool.workers()
    }

    /// The workers, idle, for the next tuning ([`Crew`]): every benchmark worker that is
    /// set up and idle (those given up on stop), and the compile pool. `None` with anything
    /// still in flight (an interrupted search) or no benchmark worker idle: the pipeline
    /// stops.
    pub fn into_crew(mut self) -> Option<Crew> {
        if !(self.jobs.is_empty() && self.ready.is_empty() && self.done.is_empty()) {
            return None;
        }
        // A GPU still setting up (a search shorter than its setup) joins the crew once done.
        for slot in self.bench.iter_mut().filter(|s| matches!(s.state, BenchState::SettingUp)) {
            let deadline = slot.deadline.unwrap_or_else(|| Instant::now() + SETUP_TIMEOUT);
            if let Ok(FromBench::SetupDone { .. }) = wait_bench(&self.hub, &mut slot.worker, deadline) {
                slot.state = BenchState::Idle;
            }
        }
        let Pipeline { options, hub, bench, setup, pool, .. } = self;
        let hands: Vec<Hand> = bench
            .into_iter()
            .filter(|slot| matches!(slot.state, BenchState::Idle) && slot.info.is_some())
            .map(|slot| Hand { ordinal: slot.ordinal, info: slot.info, worker: slot.worker })
            .collect();
        if hands.is_empty() {
            return None;
        }
        Some(Crew { hub, hands, pool, bench_command: options.bench_worker, setup: Some(setup) })
    }

    /// Benchmark workers measuring (those given up on are not counted).
    pub fn gpus(&self) -> usize {
        self.bench.iter().filter(|s| !matches!(s.state, BenchState::Retired)).count()
    }

    fn finish(&mut self, id: u32, evaluation: Evaluation) {
        if let Some(job) = self.jobs.remove(&id) {
            let mut evaluation = evaluation;
            evaluation.costs.compile_s += job.costs.compile_s;
            evaluation.costs.framework_s += job.costs.framework_s;
            self.done.push_back((job.config, evaluation));
        }
    }

    /// Evaluation `id` failed; its status follows from the failure's kind.
    fn fail(&mut self, id: u32, failure: Failure, costs: Costs) {
        self.finish(id, Evaluation::failed(failure.status(), failure.message, costs));
    }

    fn on_compiled(&mut self, outcome: CompileOutcome) {
        match outcome {
            CompileOutcome::Compiled { id, binary, seconds } => {
                let Some(job) = self.jobs.get_mut(&id) else { return };
                job.costs.compile_s = seconds;
                if let Some(key) = job.memo_key.take() {
                    memo::keep(key, &binary);
                }
                match self.language.kernel_image(&job.values, binary) {
                    Ok(image) => self.ready.push_back((id, image)),
                    Err(reason) => {
                        self.fail(id, Failure::new(FailureKind::InvalidConfig, reason.to_string()), Costs::default())
                    }
                }
            }
            CompileOutcome::Failed { id, kind, reason, seconds } => {
                // Compilers report a configuration the device cannot hold (too much shared
                // memory) as `invalid_config`: a property of the configuration.
                let costs = Costs { compile_s: seconds, ..Costs::default() };
                self.fail(id, Failure::new(kind, truncate(&reason, 4000)), costs);
            }
        }
    }

    /// Hands compiled kernels to idle benchmark workers, whichever GPU is free first.
    fn send_to_bench(&mut self) -> Result<(), BackendError> {
        for slot in 0..self.bench.len() {
            if !matches!(self.bench[slot].state, BenchState::Idle) {
                continue;
            }
            let Some((id, kernel)) = self.ready.pop_front() else { return Ok(()) };
            let early_stop = self
                .noise
                .bar(self.setup.timing.early_stop, self.best_median_ms)
                .filter(|_| self.language.early_stop_applies());
            if let Some(job) = self.jobs.get_mut(&id) {
                job.sent = Some(Instant::now());
                job.image = Some(kernel.clone());
                job.early_stop_factor = early_stop.map(|bar| bar.factor);
            }
            let request = ToBench::Evaluate(EvaluateRequest { id, kernel, early_stop });
            let deadline = Instant::now() + self.language.launch_timeout() + EVALUATION_SLACK;
            let bench = &mut self.bench[slot];
            bench.state = BenchState::Busy { id };
            bench.deadline = Some(deadline);
            if let Err(error) = bench.worker.send(&request) {
                self.bench_died(slot, &format!("could not be written to: {error}"))?;
            }
        }
        Ok(())
    }

    fn on_bench_line(&mut self, slot: usize, text: Option<String>) -> Result<(), BackendError> {
        let Some(text) = text else {
            let death = self.bench[slot].worker.death().to_string();
            return self.bench_died(slot, &death);
        };
        let message: FromBench = serde_json::from_str(&text)
            .map_err(|e| BackendError::Protocol(format!("unreadable reply from the benchmark worker: {e}")))?;
        let bench = &mut self.bench[slot];
        match (message, &bench.state) {
            (FromBench::Ready { device }, BenchState::Starting) => {
                bench
                    .worker
                    .send(&ToBench::Setup(self.setup.clone()))
                    .map_err(|e| BackendError::DeviceLost(format!("the benchmark worker is gone: {e}")))?;
                bench.info = Some(device);
                bench.state = BenchState::SettingUp;
                bench.deadline = Some(Instant::now() + SETUP_TIMEOUT);
            }
            (FromBench::SetupDone { times }, BenchState::SettingUp) => {
                bench.state = BenchState::Idle;
                bench.deadline = None;
                let setting_up = |s: &BenchSlot| matches!(s.state, BenchState::SettingUp | BenchState::Starting);
                if self.startup.ready_s.is_none() && !self.bench.iter().any(setting_up) {
                    self.startup.ready_s = Some(self.started.elapsed().as_secs_f64());
                    self.startup.setup = Some(times);
                }
            }
            (FromBench::Fatal { message }, BenchState::SettingUp) => {
                return Err(BackendError::CannotStart(format!("setting up GPU #{}: {message}", bench.ordinal)))
            }
            (FromBench::Waiting { launches }, BenchState::Busy { .. }) => {
                bench.deadline =
                    Some(Instant::now() + self.language.launch_timeout() * launches.max(1) as u32 + WAIT_SLACK);
            }
            (FromBench::Result(result), BenchState::Busy { id }) if *id == result.id => {
                let lost = result.context_lost;
                bench.restarts = 0;
                bench.deadline = None;
                self.on_result(slot, result);
                if lost {
                    // The worker exits by itself; start its successor now.
                    self.restart_bench(slot)?;
                } else {
                    self.bench[slot].state = BenchState::Idle;
                }
            }
            (FromBench::Fatal { message }, _) => {
                return Err(BackendError::DeviceLost(format!(
                    "the benchmark worker of GPU #{} failed: {message}",
                    bench.ordinal
                )))
            }
            (other, state) => {
                return Err(BackendError::Protocol(format!(
                    "unexpected message {other:?} from the benchmark worker in state {state:?}"
                )))
            }
        }
        Ok(())
    }

    fn on_result(&mut self, slot: usize, result: EvaluateResult) {
        let Some(job) = self.jobs.get(&result.id) else { return };
        let round_trip = job.sent.map_or(0.0, |s| s.elapsed().as_secs_f64());
        let costs = Costs {
            verify_s: result.verify_s,
            benchmark_s: result.benchmark_s,
            framework_s: (round_trip - result.verify_s - result.benchmark_s).max(0.0),
            ..Costs::default()
        };
        let mut metrics = attribute_metrics(&result);
        if let Some(factor) = job.early_stop_factor {
            metrics.insert("early_stop_factor".into(), serde_json::json!(factor));
        }
        metrics.insert("device".into(), self.device_record(slot));
        // Outputs the language judges itself can still turn a measured configuration wrong.
        let (status, reason) = match self.check_returned_outputs(result.id, &job.values, result.status) {
            Ok(()) => (result.status, result.reason),
            Err(reason) => (FailureKind::WrongAnswer.status(), Some(reason.to_string())),
        };
        // The language's own check sees the setup's inputs only: one set.
        let checked_here = self.setup.outputs_dir.is_some() && matches!(status, Status::Ok | Status::EarlyStopped);
        metrics.insert("verified_sets".into(), result.verified_sets.max(u32::from(checked_here)).into());
        let evaluation = match status {
            Status::Ok | Status::EarlyStopped => {
                let time = median(&result.samples);
                if status == Status::Ok {
                    self.noise.observe(&result.samples, self.setup.timing.early_stop_samples);
                    if self.best_median_ms.is_none_or(|best| time < best) {
                        self.best_median_ms = Some(time);
                    }
                }
                metrics.insert("time".into(), serde_json::json!(time));
                match self.language.objective(&job.values, time, &metrics) {
                    Ok(objective) => Evaluation {
                        status,
                        reason,
                        objective: Some(objective),
                        samples: result.samples,
                        costs,
                        metrics,
                    },
                    Err(reason) => {
                        let failure = Failure::new(FailureKind::Objective, reason.to_string());
                        Evaluation::failed(failure.status(), failure.message, costs)
                    }
                }
            }
            status => {
                let mut evaluation = Evaluation::failed(status, reason.unwrap_or_default(), costs);
                evaluation.metrics = metrics;
                evaluation.samples = result.samples;
                evaluation
            }
        };
        self.finish(result.id, evaluation);
    }

    /// Which GPU measured, for the store: its ordinal and its PCI address.
    fn device_record(&self, slot: usize) -> serde_json::Value {
        let bench = &self.bench[slot];
        let address = bench.info.as_ref().and_then(|info| info.pci_bus_id.clone());
        serde_json::json!({ "ordinal": bench.ordinal, "pci_bus_id": address })
    }

    /// The language's check of the outputs the worker wrote for evaluation `id`, where the
    /// setup asked for them; the files are removed afterwards.
    fn check_returned_outputs(&self, id: u32, config: &[Value], status: Status) -> Result<(), LanguageError> {
        let Some(dir) = &self.setup.outputs_dir else { return Ok(()) };
        let files: Vec<(usize, std::path::PathBuf)> = self
            .setup
            .args
            .iter()
            .enumerate()
            .filter(|(_, arg)| matches!(arg, ArgSetup::Buffer { output: true, .. }))
            .map(|(position, _)| (position, output_file(dir, id, position)))
            .collect();
        let outcome = if matches!(status, Status::Ok | Status::EarlyStopped) {
            self.language.check_outputs(config, &files)
        } else {
            Ok(())
        };
        for (_, file) in &files {
            let _ = std::fs::remove_file(file);
        }
        outcome
    }

    /// A benchmark worker died or hung. A hung kernel fails its configuration; one that
    /// died without a word is measured again on the next free GPU, and fails only when a
    /// second worker dies under it. A fresh worker is started in its place.
    fn bench_died(&mut self, slot: usize, how: &str) -> Result<(), BackendError> {
        if let BenchState::Busy { id } = self.bench[slot].state {
            let hung = self.bench[slot].deadline.is_some_and(|d| Instant::now() >= d);
            let retry = self.jobs.get_mut(&id).filter(|job| !hung && job.deaths + 1 < ATTEMPTS).and_then(|job| {
                job.deaths += 1;
                job.image.take()
            });
            if let Some(image) = retry {
                self.ready.push_front((id, image));
            } else if hung {
                let per_launch = self.language.launch_timeout().as_secs_f64();
                let message =
                    format!("the kernel did not finish within {per_launch:.1} s per launch; the worker was killed");
                self.fail(id, Failure::new(FailureKind::LaunchTimeout, message), Costs::default());
            } else {
                let message = format!("the benchmark worker of GPU #{} {how}", self.bench[slot].ordinal);
                self.fail(id, Failure::new(FailureKind::WorkerDied, message), Costs::default());
            }
        }
        self.restart_bench(slot)
    }

    /// Starts a fresh worker in `slot`, or gives the slot up after [`MAX_RESTARTS`] in a
    /// row: the run goes on while another GPU measures, and ends when none is left.
    fn restart_bench(&mut self, slot: usize) -> Result<(), BackendError> {
        let bench = &mut self.bench[slot];
        bench.worker.kill();
        if bench.restarts >= MAX_RESTARTS {
            bench.state = BenchState::Retired;
            bench.deadline = None;
            if self.gpus() == 0 {
                return Err(BackendError::DeviceLost(format!(
                    "the benchmark worker failed {MAX_RESTARTS} times in a row without finishing an evaluation"
                )));
            }
            return Ok(());
        }
        bench.restarts += 1;
        let origin = Origin { slot, generation: bench.worker.origin.generation + 1 };
        bench.worker = Worker::spawn(&self.options.bench_worker, &bench_args(bench.ordinal), origin, &self.hub)
            .map_err(|e| BackendError::CannotStart(format!("cannot restart the benchmark worker: {e}")))?;
        bench.state = BenchState::Starting;
        bench.deadline = Some(Instant::now() + SETUP_TIMEOUT);
        Ok(())
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.bench.iter().filter_map(|s| s.deadline).chain(self.pool.deadline()).min()
    }

    fn handle(&mut self, line: Line) -> Result<(), BackendError> {
        if let Some(slot) = self.bench.iter().position(|s| s.worker.origin == line.origin) {
            return self.on_bench_line(slot, line.text);
        }
        if self.pool.owns(line.origin) {
            if let Some(outcome) = self.pool.handle(line, &self.hub) {
                self.on_compiled(outcome);
            }
        }
        Ok(())
    }

    /// The next finished evaluation, or `None` once `give_up` has passed.
    fn next_until(&mut self, give_up: Option<Instant>) -> Result<Option<(ConfigId, Evaluation)>, BackendError> {
        loop {
            for outcome in self.pool.dispatch(&self.hub) {
                self.on_compiled(outcome);
            }
            self.send_to_bench()?;
            self.grow_pool_if_gpus_wait();
            if let Some(done) = self.done.pop_front() {
                return Ok(Some(done));
            }
            if self.jobs.is_empty() {
                return Err(BackendError::Misuse("next() with nothing in flight"));
            }
            if give_up.is_some_and(|limit| Instant::now() >= limit) {
                return Ok(None);
            }
            let wake = [self.next_deadline(), give_up].into_iter().flatten().min();
            match self.hub.next(wake) {
                Some(line) => self.handle(line)?,
                None => self.enforce_deadlines()?,
            }
        }
    }

    /// Doubles the compile pool (up to the options' number) when a GPU waits with nothing
    /// to measure while compiles wait for a worker and every worker is past its first
    /// compile: the warm pool is what holds the GPUs back. A pool started with every worker
    /// it may have never grows.
    fn grow_pool_if_gpus_wait(&mut self) {
        let most = self.options.compile_workers.max(1);
        let workers = self.pool.workers();
        let gpu_waits = self.ready.is_empty() && self.bench.iter().any(|b| matches!(b.state, BenchState::Idle));
        if workers < most && gpu_waits && self.pool.outpaced() {
            // A worker that cannot start leaves the pool as it is; the run goes on.
            let _ = self.pool.grow(workers.min(most - workers), &self.hub);
        }
    }

    fn enforce_deadlines(&mut self) -> Result<(), BackendError> {
        for outcome in self.pool.expire(&self.hub) {
            self.on_compiled(outcome);
        }
        let now = Instant::now();
        for slot in 0..self.bench.len() {
            if self.bench[slot].deadline.is_some_and(|d| now >= d) {
                let how = match self.bench[slot].state {
                    BenchState::Busy { .. } => "hung",
                    _ => "did not start in time",
                };
                self.bench[slot].worker.kill();
                self.bench_died(slot, how)?;
            }
        }
        Ok(())
    }
}

/// Whether GPUs can be one target: they must be of one model (their results are one
/// tuning's). The error says how to tune them instead.
pub fn one_model(devices: &[DeviceInfo]) -> Result<(), MixedModels> {
    let Some(first) = devices.first() else { return Ok(()) };
    match devices.iter().find(|d| d.name != first.name) {
        None => Ok(()),
        Some(other) => {
            Err(MixedModels { first: (first.ordinal, first.name.clone()), other: (other.ordinal, other.name.clone()) })
        }
    }
}

impl Backend for Pipeline<'_> {
    /// Enough configurations in flight to keep every compiler and every GPU busy.
    fn capacity(&self) -> usize {
        self.options.compile_workers.max(self.pool.workers()) + 2 * self.bench.len()
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        let prepared = Instant::now();
        let values: Vec<Value> = self.space.values(id).into_iter().cloned().collect();
        let job_id = self.next_job;
        self.next_job += 1;
        let compile_job = self.language.compile_job(&values, &self.device);
        let mut job = Job {
            config: id,
            values,
            costs: Costs::default(),
            sent: None,
            early_stop_factor: None,
            image: None,
            deaths: 0,
            memo_key: None,
        };
        job.costs.framework_s = prepared.elapsed().as_secs_f64();
        self.jobs.insert(job_id, job);
        match compile_job {
            // Configurations the device cannot launch fail here, before any compile.
            Err(reason) => {
                self.fail(job_id, Failure::new(FailureKind::InvalidConfig, reason.to_string()), Costs::default())
            }
            Ok(compile_job) => {
                let memo_key = memo::key(&compile_job);
                if let Some(binary) = memo_key.as_deref().and_then(memo::recall) {
                    // Compiled earlier in this process (another size of a many-shape run).
                    self.on_compiled(CompileOutcome::Compiled { id: job_id, binary, seconds: 0.0 });
                    return Ok(());
                }
                if let Some(job) = self.jobs.get_mut(&job_id) {
                    job.memo_key = memo_key;
                }
                self.pool.submit(CompileRequest { id: job_id, job: compile_job });
                for outcome in self.pool.dispatch(&self.hub) {
                    self.on_compiled(outcome);
                }
            }
        }
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        self.next_until(None)?.ok_or(BackendError::Misuse("next() gave up with no limit"))
    }

    fn next_within(&mut self, patience: Duration) -> Result<Option<(ConfigId, Evaluation)>, BackendError> {
        self.next_until(Some(Instant::now() + patience))
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Gives up every job not yet sent to a benchmark worker: queued, compiling or
    /// compiled. A compile still running finishes in its worker; its outcome finds no job
    /// and is dropped.
    fn abandon_unstarted(&mut self) -> Vec<ConfigId> {
        let unstarted: HashSet<u32> =
            self.jobs.iter().filter(|(_, job)| job.sent.is_none()).map(|(id, _)| *id).collect();
        self.pool.forget(&unstarted);
        self.ready.retain(|(id, _)| !unstarted.contains(id));
        unstarted.iter().filter_map(|id| self.jobs.remove(id)).map(|job| job.config).collect()
    }
}

/// Registers, shared and local memory of the kernel, its checked run's time, what the
/// clocks did during its samples (each field of [`crate::Clocks`] under its own name) and
/// the energy block's figures where one ran (each field of [`crate::Energy`]); the
/// input sets it passed are added once the language's own check, if any, has run.
fn attribute_metrics(result: &EvaluateResult) -> serde_json::Map<String, serde_json::Value> {
    let mut metrics = serde_json::Map::new();
    metrics.insert("verify_kernel_ms".into(), serde_json::json!(result.verify_kernel_ms));
    if let Some(a) = result.attributes {
        metrics.insert("registers".into(), a.registers.into());
        metrics.insert("static_shared_bytes".into(), a.static_shared_bytes.into());
        metrics.insert("local_bytes".into(), a.local_bytes.into());
    }
    if let Some(serde_json::Value::Object(clocks)) = result.clocks.as_ref().and_then(|c| serde_json::to_value(c).ok()) {
        metrics.extend(clocks);
    }
    if let Some(serde_json::Value::Object(energy)) = result.energy.as_ref().and_then(|e| serde_json::to_value(e).ok()) {
        metrics.extend(energy);
    }
    metrics
}

fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes)", &text[..end], text.len() - end)
}

/// Waits for the benchmark worker's next message, ignoring other workers.
/// The benchmark worker's next message. What compile workers say meanwhile (they start
/// alongside it) is put back for the pool.
fn wait_bench(hub: &Hub, bench: &mut Worker, deadline: Instant) -> Result<FromBench, BackendError> {
    let mut others = Vec::new();
    let answer = loop {
        let Some(line) = hub.next(Some(deadline)) else {
            bench.kill();
            break Err(BackendError::CannotStart("the benchmark worker did not answer in time".into()));
        };
        if line.origin != bench.origin {
            others.push(line);
            continue;
        }
        break match line.text {
            None => Err(BackendError::CannotStart(format!("the benchmark worker {}", bench.death()))),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| BackendError::Protocol(format!("unreadable reply from the benchmark worker: {e}"))),
        };
    };
    hub.put_back(others);
    answer
}

/// Ids of [`compile_several`]'s requests (the reference's, the finalists'), apart from
/// every configuration's: `FIRST_STAGE_JOB + index`.
const FIRST_STAGE_JOB: u32 = u32::MAX - 1 - (1 << 16);

/// Compiles `jobs` through the pool at once and waits for all of them until `deadline`,
/// in their order. Outcomes of other requests (a search's compiles still running in a
/// handed-on pool) are ignored.
pub(crate) fn compile_several(
    pool: &mut CompilePool,
    hub: &Hub,
    jobs: Vec<CompileJob>,
    deadline: Instant,
) -> Vec<Result<Binary, String>> {
    let count = jobs.len().min(1 << 16);
    let mut outcomes: Vec<Option<Result<Binary, String>>> = (0..count).map(|_| None).collect();
    for (index, job) in jobs.into_iter().take(count).enumerate() {
        pool.submit(CompileRequest { id: FIRST_STAGE_JOB + index as u32, job });
    }
    let record = |outcome: CompileOutcome, outcomes: &mut Vec<Option<Result<Binary, String>>>| {
        let (id, result) = match outcome {
            CompileOutcome::Compiled { id, binary, .. } => (id, Ok(binary)),
            CompileOutcome::Failed { id, reason, .. } => (id, Err(reason)),
        };
        if let Some(slot) = id.checked_sub(FIRST_STAGE_JOB).and_then(|i| outcomes.get_mut(i as usize)) {
            *slot = Some(result);
        }
    };
    while outcomes.iter().any(Option::is_none) && Instant::now() < deadline {
        for outcome in pool.dispatch(hub) {
            record(outcome, &mut outcomes);
        }
        let wake = pool.deadline().map_or(deadline, |d| d.min(deadline));
        match hub.next(Some(wake)) {
            Some(line) if pool.owns(line.origin) => {
                if let Some(outcome) = pool.handle(line, hub) {
                    record(outcome, &mut outcomes);
                }
            }
            Some(_) => {}
            None => {
                for outcome in pool.expire(hub) {
                    record(outcome, &mut outcomes);
                }
            }
        }
    }
    outcomes.into_iter().map(|o| o.unwrap_or_else(|| Err("the compile did not finish in time".into()))).collect()
}

/// Compiles one job through the pool and waits for it (the reference, before tuning).
pub(crate) fn compile_now(
    pool: &mut CompilePool,
    hub: &Hub,
    job: CompileJob,
    timeout: Duration,
) -> Result<Binary, String> {
    let deadline = Instant::now() + timeout + Duration::from_secs(5);
    compile_several(pool, hub, vec![job], deadline).pop().unwrap_or_else(|| Err("nothing was compiled".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(ordinal: usize, name: &str) -> DeviceInfo {
        let mut info = DeviceInfo::compile_target("sm_90").unwrap_or_else(|e| panic!("{e}"));
        info.ordinal = ordinal;
        info.name = name.into();
        info
    }

    #[test]
    fn gpus_of_two_models_are_refused_with_what_to_do_instead() {
        assert_eq!(one_model(&[gpu(0, "NVIDIA H200"), gpu(1, "NVIDIA H200")]), Ok(()));
        let refused = one_model(&[gpu(0, "NVIDIA H200"), gpu(1, "NVIDIA H200"), gpu(2, "NVIDIA H100")]);
        assert_eq!(
            refused.map_err(|e| e.to_string()).unwrap_err(),
            "GPU #0 is a NVIDIA H200 and GPU #2 a NVIDIA H100: one tuning's results must come from one \
             model; tune each model on its own (devices 0 or devices 2)"
        );
    }

    #[test]
    fn clock_observations_land_in_the_metrics_under_their_own_names() {
        let result = EvaluateResult {
            samples: vec![1.0],
            verify_kernel_ms: 0.5,
            verified_sets: 1,
            clocks: Some(crate::Clocks {
                sm_mhz_before: Some(1980),
                sm_mhz_after: Some(1600),
                throttle_reasons: vec!["sw_thermal_slowdown".into()],
                remeasured: true,
                unsteady: true,
                ..crate::Clocks::default()
            }),
            ..EvaluateResult::empty(0)
        };
        let metrics = attribute_metrics(&result);
        assert_eq!(metrics["sm_mhz_before"], 1980);
        assert_eq!(metrics["sm_mhz_after"], 1600);
        assert_eq!(metrics["remeasured"], true);
        assert_eq!(metrics["clocks_unsteady"], true);
        assert_eq!(metrics["throttle_reasons"], serde_json::json!(["sw_thermal_slowdown"]));
        assert!(!metrics.contains_key("temperature_c_before"), "a reading NVML did not give is left out");
    }

    #[test]
    fn without_clock_readings_the_metrics_say_nothing_of_clocks() {
        let json = r#"{"id": 1, "status": "ok", "reason": null, "samples": [1.0], "verify_s": 0.0,
            "verify_kernel_ms": 0.0, "benchmark_s": 0.0, "attributes": null, "context_lost": false}"#;
        let result: EvaluateResult = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
        let metrics = attribute_metrics(&result);
        assert!(!metrics.contains_key("remeasured"));
        assert!(!metrics.contains_key("energy_J") && !metrics.contains_key("power_W"), "absent, not zero");
    }

    #[test]
    fn energy_figures_land_in_the_metrics_under_the_names_objectives_use() {
        let result = EvaluateResult {
            samples: vec![1.0],
            energy: Some(crate::Energy {
                energy_J: 0.25,
                power_W: 250.0,
                clock_MHz: Some(1980),
                memory_clock_MHz: None,
                temperature_C: Some(51),
                energy_launches: 800,
                energy_block_ms: 210.0,
            }),
            ..EvaluateResult::empty(0)
        };
        let metrics = attribute_metrics(&result);
        for observable in &kerntune_engine::objective::OBSERVABLES {
            let expected = observable.key != "memory_clock_MHz";
            assert_eq!(metrics.contains_key(observable.key), expected, "{}", observable.key);
        }
        assert_eq!((metrics["energy_J"].as_f64(), metrics["power_W"].as_f64()), (Some(0.25), Some(250.0)));
        assert_eq!(metrics["temperature_C"], 51);
    }
}
