//! The CUDA backend of the engine: a compile pool running ahead of one benchmark worker.
//!
//! `submit` turns a configuration into source and options and queues its compile; compiled
//! kernels queue for the GPU; `next` waits for whichever worker speaks next, enforces the
//! compile and launch deadlines, replaces crashed workers, and returns evaluations in the
//! order they finish. Every failure of a configuration becomes an evaluation with a status
//! and a reason; only a benchmark worker that cannot be (re)started is an error.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use kerntune_engine::spec::{ArgKind, KernelSpec, Reference};
use kerntune_engine::{Backend, BackendError};
use kerntune_space::{ConfigId, Space, Value};
use kerntune_store::{Costs, Evaluation, Status};

use crate::driver::DeviceInfo;
use crate::pool::{CompileOutcome, CompilePool};
use crate::process::{Hub, Line, Origin, Worker, WorkerCommand};
use crate::protocol::{ArgSetup, Bytes, CompileRequest, EvaluateRequest, EvaluateResult, FromBench, KernelImage, Setup, ToBench};
use crate::stats::median;

/// How the backend runs: which worker program, which GPU, how many compilers.
#[derive(Debug, Clone)]
pub struct CudaOptions {
    pub worker: WorkerCommand,
    pub device: usize,
    pub compile_workers: usize,
}

/// Time the benchmark worker may take to start and set up (data, reference) before the
/// run is declared impossible.
const SETUP_TIMEOUT: Duration = Duration::from_secs(300);
/// Time an evaluation may take before its first launch (module load, attribute queries).
const EVALUATION_SLACK: Duration = Duration::from_secs(20);
/// Time allowed beyond the launches a worker said it is waiting for.
const WAIT_SLACK: Duration = Duration::from_secs(2);
/// Restarts without a completed evaluation after which the benchmark worker is given up.
const MAX_RESTARTS: usize = 3;

#[derive(Debug)]
enum BenchState {
    /// Started; waiting for `Ready`.
    Starting,
    /// Setup sent; waiting for `SetupDone`.
    SettingUp,
    Idle,
    Busy { id: u32 },
}

/// A configuration between `submit` and its evaluation.
#[derive(Debug)]
struct Job {
    config: ConfigId,
    values: Vec<Value>,
    costs: Costs,
    /// When the benchmark worker received it, for the framework share of its time.
    sent: Option<Instant>,
}

#[derive(Debug)]
pub struct CudaBackend<'a> {
    spec: &'a KernelSpec,
    space: &'a Space,
    options: CudaOptions,
    hub: Hub,
    pub device: DeviceInfo,
    bench: Worker,
    bench_state: BenchState,
    deadline: Option<Instant>,
    restarts: usize,
    setup: Setup,
    pool: CompilePool,
    jobs: HashMap<u32, Job>,
    next_job: u32,
    ready: VecDeque<(u32, KernelImage)>,
    done: VecDeque<(ConfigId, Evaluation)>,
    best_median_ms: Option<f64>,
    early_stop_applies: bool,
    started: Instant,
}

fn bench_args(device: usize) -> Vec<String> {
    vec!["__worker".into(), "bench".into(), "--device".into(), device.to_string()]
}

fn failed(message: impl Into<String>) -> BackendError {
    BackendError(message.into())
}

impl<'a> CudaBackend<'a> {
    /// Starts the workers, compiles the reference and sets the benchmark worker up.
    pub fn start(spec: &'a KernelSpec, space: &'a Space, options: CudaOptions) -> Result<CudaBackend<'a>, BackendError> {
        let started = Instant::now();
        let hub = Hub::default();
        let mut bench = Worker::spawn(&options.worker, &bench_args(options.device), Origin { slot: 0, generation: 0 }, &hub)
            .map_err(|e| failed(format!("cannot start the benchmark worker: {e}")))?;
        let device = match wait_bench(&hub, &mut bench, Instant::now() + SETUP_TIMEOUT)? {
            FromBench::Ready { device } => device,
            FromBench::Fatal { message } => return Err(failed(message)),
            other => return Err(failed(format!("unexpected first message from the benchmark worker: {other:?}"))),
        };
        let mut pool = CompilePool::new(&options.worker, options.compile_workers, spec.timing.compile_timeout, &hub, 1)
            .map_err(|e| failed(format!("cannot start the compile workers: {e}")))?;
        let reference = match &spec.verify {
            None => None,
            Some(verify) => Some(compile_reference(spec, space, &verify.reference, &device, &mut pool, &hub)?),
        };
        let setup = build_setup(spec, reference)?;
        bench.send(&ToBench::Setup(setup.clone())).map_err(|e| failed(format!("the benchmark worker is gone: {e}")))?;
        match wait_bench(&hub, &mut bench, Instant::now() + SETUP_TIMEOUT)? {
            FromBench::SetupDone => {}
            FromBench::Fatal { message } => return Err(failed(format!("setting up the GPU: {message}"))),
            other => return Err(failed(format!("unexpected message from the benchmark worker: {other:?}"))),
        }
        // Early stopping compares times; it is sound only when the objective is the time or
        // a function of it that no parameter changes.
        let early_stop_applies = spec
            .objective_expression
            .as_ref()
            .is_none_or(|e| e.variables().iter().all(|v| *v < spec.problem.len() || *v >= spec.problem.len() + spec.params.len()));
        Ok(CudaBackend {
            spec,
            space,
            options,
            hub,
            device,
            bench,
            bench_state: BenchState::Idle,
            deadline: None,
            restarts: 0,
            setup,
            pool,
            jobs: HashMap::new(),
            next_job: 0,
            ready: VecDeque::new(),
            done: VecDeque::new(),
            best_median_ms: None,
            early_stop_applies,
            started,
        })
    }

    pub fn compile_workers(&self) -> usize {
        self.pool.workers()
    }

    fn finish(&mut self, id: u32, evaluation: Evaluation) {
        if let Some(job) = self.jobs.remove(&id) {
            let mut evaluation = evaluation;
            evaluation.costs.compile_s += job.costs.compile_s;
            evaluation.costs.framework_s += job.costs.framework_s;
            self.done.push_back((job.config, evaluation));
        }
    }

    fn on_compiled(&mut self, outcome: CompileOutcome) {
        match outcome {
            CompileOutcome::Compiled { id, cubin, seconds } => {
                let Some(job) = self.jobs.get_mut(&id) else { return };
                job.costs.compile_s = seconds;
                match self.spec.geometry(&job.values) {
                    Ok(geometry) => {
                        let image = KernelImage { cubin: Bytes(cubin), name: self.spec.kernel_name.clone(), geometry };
                        self.ready.push_back((id, image));
                    }
                    Err(reason) => self.finish(id, Evaluation::failed(Status::InvalidConfig, reason, Costs::default())),
                }
            }
            CompileOutcome::Failed { id, reason, seconds } => {
                let costs = Costs { compile_s: seconds, ..Costs::default() };
                self.finish(id, Evaluation::failed(Status::CompileFailed, truncate(&reason, 4000), costs));
            }
        }
    }

    fn send_to_bench(&mut self) -> Result<(), BackendError> {
        if !matches!(self.bench_state, BenchState::Idle) {
            return Ok(());
        }
        let Some((id, kernel)) = self.ready.pop_front() else { return Ok(()) };
        let best_median_ms = if self.early_stop_applies { self.best_median_ms } else { None };
        let request = ToBench::Evaluate(EvaluateRequest { id, kernel, best_median_ms });
        if let Some(job) = self.jobs.get_mut(&id) {
            job.sent = Some(Instant::now());
        }
        self.bench_state = BenchState::Busy { id };
        self.deadline = Some(Instant::now() + self.spec.timing.launch_timeout + EVALUATION_SLACK);
        if let Err(error) = self.bench.send(&request) {
            self.bench_died(&format!("could not be written to: {error}"))?;
        }
        Ok(())
    }

    fn on_bench_line(&mut self, text: Option<String>) -> Result<(), BackendError> {
        let Some(text) = text else {
            let death = self.bench.death();
            return self.bench_died(&death);
        };
        let message: FromBench = serde_json::from_str(&text).map_err(|e| failed(format!("unreadable reply from the benchmark worker: {e}")))?;
        match (message, &self.bench_state) {
            (FromBench::Ready { .. }, BenchState::Starting) => {
                self.bench.send(&ToBench::Setup(self.setup.clone())).map_err(|e| failed(format!("the benchmark worker is gone: {e}")))?;
                self.bench_state = BenchState::SettingUp;
                self.deadline = Some(Instant::now() + SETUP_TIMEOUT);
            }
            (FromBench::SetupDone, BenchState::SettingUp) => {
                self.bench_state = BenchState::Idle;
                self.deadline = None;
            }
            (FromBench::Waiting { launches }, BenchState::Busy { .. }) => {
                self.deadline = Some(Instant::now() + self.spec.timing.launch_timeout * launches.max(1) as u32 + WAIT_SLACK);
            }
            (FromBench::Result(result), BenchState::Busy { id }) if *id == result.id => {
                let lost = result.context_lost;
                self.on_result(result);
                self.restarts = 0;
                self.deadline = None;
                if lost {
                    // The worker exits by itself; start its successor now.
                    self.restart_bench()?;
                } else {
                    self.bench_state = BenchState::Idle;
                }
            }
            (FromBench::Fatal { message }, _) => return Err(failed(format!("the benchmark worker failed: {message}"))),
            (other, state) => return Err(failed(format!("unexpected message {other:?} from the benchmark worker in state {state:?}"))),
        }
        Ok(())
    }

    fn on_result(&mut self, result: EvaluateResult) {
        let Some(job) = self.jobs.get(&result.id) else { return };
        let round_trip = job.sent.map_or(0.0, |s| s.elapsed().as_secs_f64());
        let costs = Costs {
            verify_s: result.verify_s,
            benchmark_s: result.benchmark_s,
            framework_s: (round_trip - result.verify_s - result.benchmark_s).max(0.0),
            ..Costs::default()
        };
        let evaluation = match result.status {
            Status::Ok | Status::EarlyStopped => {
                let time = median(&result.samples);
                if result.status == Status::Ok && self.best_median_ms.is_none_or(|best| time < best) {
                    self.best_median_ms = Some(time);
                }
                let metrics = attribute_metrics(&result, time);
                match self.spec.objective_value(&job.values, time) {
                    Ok(objective) => Evaluation {
                        status: result.status,
                        reason: result.reason,
                        objective: Some(objective),
                        samples: result.samples,
                        costs,
                        metrics,
                    },
                    Err(reason) => Evaluation::failed(Status::RuntimeFailed, reason, costs),
                }
            }
            status => {
                let mut evaluation = Evaluation::failed(status, result.reason.clone().unwrap_or_default(), costs);
                evaluation.metrics = attribute_metrics(&result, f64::NAN);
                evaluation.metrics.remove("time");
                evaluation.samples = result.samples;
                evaluation
            }
        };
        self.finish(result.id, evaluation);
    }

    /// The benchmark worker died or hung: its configuration fails with the reason, and a
    /// fresh worker is started.
    fn bench_died(&mut self, how: &str) -> Result<(), BackendError> {
        if let BenchState::Busy { id } = self.bench_state {
            let launches_hung = self.deadline.is_some_and(|d| Instant::now() >= d);
            let (status, reason) = if launches_hung {
                (Status::Timeout, format!("the kernel did not finish within {:.1} s per launch; the worker was killed", self.spec.timing.launch_timeout.as_secs_f64()))
            } else {
                (Status::RuntimeFailed, format!("the benchmark worker {how}"))
            };
            self.finish(id, Evaluation::failed(status, reason, Costs::default()));
        }
        self.restart_bench()
    }

    fn restart_bench(&mut self) -> Result<(), BackendError> {
        if self.restarts >= MAX_RESTARTS {
            return Err(failed(format!("the benchmark worker failed {MAX_RESTARTS} times in a row without finishing an evaluation")));
        }
        self.restarts += 1;
        self.bench.kill();
        let origin = Origin { slot: 0, generation: self.bench.origin.generation + 1 };
        self.bench = Worker::spawn(&self.options.worker, &bench_args(self.options.device), origin, &self.hub)
            .map_err(|e| failed(format!("cannot restart the benchmark worker: {e}")))?;
        self.bench_state = BenchState::Starting;
        self.deadline = Some(Instant::now() + SETUP_TIMEOUT);
        Ok(())
    }

    fn next_deadline(&self) -> Option<Instant> {
        [self.deadline, self.pool.deadline()].into_iter().flatten().min()
    }

    fn handle(&mut self, line: Line) -> Result<(), BackendError> {
        if line.origin == self.bench.origin {
            return self.on_bench_line(line.text);
        }
        if self.pool.owns(line.origin) {
            if let Some(outcome) = self.pool.handle(line, &self.hub) {
                self.on_compiled(outcome);
            }
        }
        Ok(())
    }

    fn enforce_deadlines(&mut self) -> Result<(), BackendError> {
        for outcome in self.pool.expire(&self.hub) {
            self.on_compiled(outcome);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            let how = match self.bench_state {
                BenchState::Busy { .. } => "hung",
                _ => "did not start in time",
            };
            self.bench.kill();
            self.bench_died(how)?;
        }
        Ok(())
    }
}

impl Backend for CudaBackend<'_> {
    /// Enough configurations in flight to keep every compiler and the GPU busy.
    fn capacity(&self) -> usize {
        self.pool.workers() + 2
    }

    fn submit(&mut self, id: ConfigId) -> Result<(), BackendError> {
        let prepared = Instant::now();
        let values: Vec<Value> = self.space.values(id).into_iter().cloned().collect();
        let job_id = self.next_job;
        self.next_job += 1;
        // Configurations the device cannot launch fail here, before any compile.
        let invalid = match self.spec.geometry(&values) {
            Err(reason) => Some(reason),
            Ok(g) if g.threads_per_block() > self.device.max_threads_per_block as u64 => {
                Some(format!("{} threads per block; the device allows {}", g.threads_per_block(), self.device.max_threads_per_block))
            }
            Ok(_) => None,
        };
        let job = Job { config: id, values, costs: Costs::default(), sent: None };
        match invalid {
            Some(reason) => {
                self.jobs.insert(job_id, job);
                self.finish(job_id, Evaluation::failed(Status::InvalidConfig, reason, Costs::default()));
            }
            None => {
                let request = CompileRequest {
                    id: job_id,
                    source: self.spec.source_for(&job.values),
                    name: self.spec.kernel_name.clone(),
                    options: self.spec.options_for(&job.values),
                    arch: self.device.arch(),
                };
                let mut job = job;
                job.costs.framework_s = prepared.elapsed().as_secs_f64();
                self.jobs.insert(job_id, job);
                self.pool.submit(request);
                for outcome in self.pool.dispatch(&self.hub) {
                    self.on_compiled(outcome);
                }
            }
        }
        Ok(())
    }

    fn next(&mut self) -> Result<(ConfigId, Evaluation), BackendError> {
        loop {
            for outcome in self.pool.dispatch(&self.hub) {
                self.on_compiled(outcome);
            }
            self.send_to_bench()?;
            if let Some(done) = self.done.pop_front() {
                return Ok(done);
            }
            if self.jobs.is_empty() {
                return Err(failed("next() with nothing in flight"));
            }
            match self.hub.next(self.next_deadline()) {
                Some(line) => self.handle(line)?,
                None => self.enforce_deadlines()?,
            }
        }
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// Registers, shared and local memory of the kernel, kept with its evaluation.
fn attribute_metrics(result: &EvaluateResult, time_ms: f64) -> serde_json::Map<String, serde_json::Value> {
    let mut metrics = serde_json::Map::new();
    metrics.insert("time".into(), serde_json::json!(time_ms));
    metrics.insert("verify_kernel_ms".into(), serde_json::json!(result.verify_kernel_ms));
    if let Some(a) = result.attributes {
        metrics.insert("registers".into(), a.registers.into());
        metrics.insert("static_shared_bytes".into(), a.static_shared_bytes.into());
        metrics.insert("local_bytes".into(), a.local_bytes.into());
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
fn wait_bench(hub: &Hub, bench: &mut Worker, deadline: Instant) -> Result<FromBench, BackendError> {
    loop {
        let Some(line) = hub.next(Some(deadline)) else {
            bench.kill();
            return Err(failed("the benchmark worker did not answer in time"));
        };
        if line.origin != bench.origin {
            continue;
        }
        let Some(text) = line.text else {
            return Err(failed(format!("the benchmark worker {}", bench.death())));
        };
        return serde_json::from_str(&text).map_err(|e| failed(format!("unreadable reply from the benchmark worker: {e}")));
    }
}

/// Compiles the reference (a kernel of its own, or a named configuration) before tuning.
fn compile_reference(spec: &KernelSpec, space: &Space, reference: &Reference, device: &DeviceInfo, pool: &mut CompilePool, hub: &Hub) -> Result<KernelImage, BackendError> {
    // A reference kernel in a file that also holds the tuned kernel needs the parameters
    // defined to compile: it gets those of the first valid configuration.
    let first: Vec<Value> = space.ids().next().map(|id| space.values(id).into_iter().cloned().collect()).unwrap_or_default();
    let (source, name, options, geometry) = match reference {
        Reference::Config(values) => (spec.source_for(values), spec.kernel_name.clone(), spec.options_for(values), spec.geometry(values).map_err(failed)?),
        Reference::Kernel { name, source, options, grid, block } => {
            let mut text = spec.source_for(&first);
            text.truncate(text.len() - spec.source.len());
            text.push_str(source);
            let values = spec.values(&first);
            let dimension = |e: &kerntune_space::Expression| -> Result<u32, BackendError> {
                let n = e.evaluate_with(&values).ok().and_then(|v| v.as_number()).ok_or_else(|| failed(format!("reference geometry '{e}'")))?;
                Ok(n.ceil().max(1.0) as u32)
            };
            let geometry = kerntune_engine::spec::Geometry {
                grid: [dimension(&grid[0])?, dimension(&grid[1])?, dimension(&grid[2])?],
                block: [dimension(&block[0])?, dimension(&block[1])?, dimension(&block[2])?],
                shared_bytes: 0,
            };
            (text, name.clone(), options.clone(), geometry)
        }
    };
    pool.submit(CompileRequest { id: u32::MAX - 1, source, name: name.clone(), options, arch: device.arch() });
    let deadline = Instant::now() + spec.timing.compile_timeout + Duration::from_secs(5);
    loop {
        if let Some(CompileOutcome::Failed { reason, .. }) = pool.dispatch(hub).into_iter().next() {
            return Err(failed(format!("compiling the reference: {reason}")));
        }
        let Some(line) = hub.next(Some(deadline)) else {
            return Err(failed("compiling the reference did not finish in time"));
        };
        if !pool.owns(line.origin) {
            continue;
        }
        match pool.handle(line, hub) {
            Some(CompileOutcome::Compiled { cubin, .. }) => return Ok(KernelImage { cubin: Bytes(cubin), name, geometry }),
            Some(CompileOutcome::Failed { reason, .. }) => return Err(failed(format!("compiling the reference {name}: {reason}"))),
            None => {}
        }
    }
}

/// The arguments with their sizes evaluated, for the benchmark worker.
fn build_setup(spec: &KernelSpec, reference: Option<KernelImage>) -> Result<Setup, BackendError> {
    let problem: Vec<Value> = spec.problem.iter().map(|(_, v)| v.clone()).collect();
    let mut args = Vec::new();
    for (position, arg) in spec.args.iter().enumerate() {
        let evaluate = |e: &kerntune_space::Expression| {
            e.evaluate_with(&problem).map_err(|err| failed(format!("argument {}: '{e}': {err}", arg.name)))
        };
        args.push(match &arg.kind {
            ArgKind::Buffer { size, init, output, poison } => {
                let len = evaluate(size)?.as_number().filter(|n| *n >= 0.0).ok_or_else(|| failed(format!("argument {}: size is not a count", arg.name)))?;
                ArgSetup::Buffer {
                    name: arg.name.clone(),
                    dtype: arg.dtype,
                    len: len as usize,
                    init: init.clone(),
                    output: *output,
                    poison: *poison,
                    seed: spec.timing.seed.wrapping_mul(1_000_003).wrapping_add(position as u64),
                }
            }
            ArgKind::Scalar { value } => {
                let bytes = kerntune_engine::spec::scalar_bytes(arg.dtype, &evaluate(value)?).map_err(|e| failed(format!("argument {}: {e}", arg.name)))?;
                ArgSetup::Scalar { name: arg.name.clone(), bytes: Bytes(bytes) }
            }
        });
    }
    let tolerances = spec.verify.as_ref().map(|v| v.tolerances.clone()).unwrap_or_default();
    Ok(Setup { args, timing: spec.timing.clone(), reference, tolerances })
}
