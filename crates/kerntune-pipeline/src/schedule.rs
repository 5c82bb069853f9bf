//! Native schedule tuning on the GPU: the binary stage after parameter tuning.
//!
//! The best configuration's cubin is the original. Candidate schedules (legal reorderings
//! of its memory instructions, from `kerntune-sass`) are each checked before they are
//! timed: their outputs must equal the original's bit for bit on poisoned outputs. The
//! search's fastest few are timed again against the original and the best of them is the
//! winner. The winner is compared with the original on at least 10⁴ further sets of random
//! inputs and timed interleaved with it (A/B/A/B...) in blocks that each load both kernels
//! afresh, and so is a second copy of the original (the control): the winner is kept only
//! if its interval lies below the control's, since where the driver places a kernel's code
//! alone moves a short kernel's time by percents.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kerntune_engine::BackendError;
use kerntune_sass::{anneal, hill_climb, AnnealingOptions, HillClimbOptions, Nvdisasm, SassError, Schedule};
use kerntune_store::Status;
use serde::{Deserialize, Serialize};

use crate::backend::{compile_now, PipelineOptions};
use crate::crew::{Crew, Hand};
use crate::early_stop::Bar;
use crate::error::{FailureKind, ScheduleError};
use crate::language::Language;
use crate::pool::{CompileLimit, CompilePool};
use crate::process::{Hub, Origin, Worker, WorkerCommand};
use crate::protocol::{
    ArgSetup, EvaluateRequest, EvaluateResult, FromBench, KernelImage, ReferenceSetup, Setup, ToBench,
};
use crate::sampling::ClockSpan;
use crate::timing::EarlyStop;
use kerntune_device::DeviceInfo;
use kerntune_engine::stats::{block_medians, median, median_interval};

/// How the schedule search runs. The CLI's `--schedule-*` flags (feature `clap`) and
/// Python's `schedule_options=` are these fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ScheduleOptions {
    /// Candidate schedules to evaluate.
    #[cfg_attr(feature = "clap", arg(long = "schedule-budget", value_name = "SCHEDULE_BUDGET", default_value_t = ScheduleOptions::default().budget))]
    pub budget: usize,
    /// Search method for schedules: hill_climb or anneal.
    #[cfg_attr(feature = "clap", arg(long = "schedule-method", value_name = "SCHEDULE_METHOD", default_value_t = ScheduleOptions::default().method))]
    pub method: String,
    /// Seed of the search and of the timing's order; `None`: 0 (a run gives its search's).
    #[cfg_attr(feature = "clap", arg(skip))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Random input sets on which the best schedule must match the original bit for bit.
    #[cfg_attr(
        feature = "clap",
        arg(long = "schedule-check-sets", value_name = "SCHEDULE_CHECK_SETS", default_value_t = ScheduleOptions::default().check_sets)
    )]
    pub check_sets: u32,
    /// Interleaved A/B rounds timing the winner against the original, and the original
    /// against a second copy of itself (the control).
    #[cfg_attr(feature = "clap", arg(skip = ScheduleOptions::default().rounds))]
    pub rounds: u32,
    /// Blocks those rounds are split into; each loads both kernels afresh, since where the
    /// driver places the code changes a short kernel's time. The intervals are computed
    /// over the blocks' medians, so at least 5.
    #[cfg_attr(feature = "clap", arg(skip = ScheduleOptions::default().blocks))]
    pub blocks: u32,
    /// The search's fastest candidates (at most 16) timed again, interleaved with the
    /// original, before the winner is chosen: one timing each is too noisy to pick from.
    /// 1 takes the search's best as it is.
    #[cfg_attr(feature = "clap", arg(skip = ScheduleOptions::default().finalists))]
    pub finalists: usize,
    /// Interleaved rounds for each finalist.
    #[cfg_attr(feature = "clap", arg(skip = ScheduleOptions::default().finalist_rounds))]
    pub finalist_rounds: u32,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            budget: 1000,
            method: "hill_climb".into(),
            seed: None,
            check_sets: 10_000,
            rounds: 200,
            blocks: 20,
            finalists: 8,
            finalist_rounds: 20,
        }
    }
}

/// What the schedule search found and how sure it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScheduleReport {
    pub kernel: String,
    pub instructions: usize,
    /// Legal moves of the original schedule.
    pub legal_moves: usize,
    pub evaluations: usize,
    /// Candidates that failed their check (outputs differing from the original's, or a
    /// crash); none is ever kept. The first few reasons, with the moves that led there.
    pub rejected: usize,
    pub rejected_reasons: Vec<String>,
    pub search_seconds: f64,
    pub baseline_ms: f64,
    pub best_search_ms: f64,
    /// The verified candidates' search times relative to the original's (the fastest,
    /// the median and the slowest): how much the legal moves change at all.
    pub search_range: [f64; 3],
    /// The finalists, fastest in the search first, each timed again against the original.
    /// The winner is the one with the lowest ratio here.
    pub finalists: Vec<Finalist>,
    pub finalist_rounds: u32,
    /// Moves of the winner.
    pub moves: usize,
    /// Input sets checked after the search, and how many differed.
    pub checked_sets: u32,
    pub differing_sets: u32,
    pub first_difference: Option<String>,
    /// Interleaved timing: medians, and the time of the winner relative to the original
    /// (median of the blocks' median per-round ratios) with its 95% confidence interval.
    pub ab_rounds: u32,
    pub ab_blocks: u32,
    pub original_median_ms: f64,
    pub candidate_median_ms: f64,
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
    /// The same measurement of the original against a second copy of itself: how far from
    /// 1 the procedure strays when nothing differs.
    pub control_ratio: f64,
    pub control_low: f64,
    pub control_high: f64,
    /// The winner, when it is bitwise-equivalent and faster: its interval lies wholly below
    /// the control's. Otherwise the original is kept.
    #[serde(skip)]
    pub cubin: Option<Vec<u8>>,
}

/// One of the search's fastest candidates, timed again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finalist {
    pub moves: usize,
    /// Its single search timing relative to the original's.
    pub search_ratio: f64,
    /// Median of its per-round time ratios in the interleaved timing.
    pub ratio: f64,
}

/// A benchmark worker driven one request at a time.
#[derive(Debug)]
pub struct BenchSession {
    /// The channel its worker speaks into, shared with the other sessions of a crew (each
    /// reads its own worker's lines) and with the crew's compile workers.
    hub: Arc<Hub>,
    bench: Worker,
    command: WorkerCommand,
    device_ordinal: usize,
    setup: Setup,
    launch_timeout: Duration,
    pub device: DeviceInfo,
}

/// Fewest blocks of the A/B timing: the interval is taken over the blocks' medians, and
/// with fewer than 5 it would not be an interval at all.
const MIN_BLOCKS: u32 = 5;

const START_TIMEOUT: Duration = Duration::from_secs(300);

/// How often a wait for the benchmark worker asks whether to stop: well inside the half
/// second a Ctrl-C may take.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The `stop` of the requests that nothing interrupts but the worker's own end.
fn never() -> bool {
    false
}

impl BenchSession {
    pub fn start(
        command: &WorkerCommand,
        device: usize,
        setup: Setup,
        launch_timeout: Duration,
    ) -> Result<BenchSession, BackendError> {
        let hub = Arc::new(Hub::default());
        let args = vec!["__worker".into(), "bench".into(), "--device".into(), device.to_string()];
        let bench = Worker::spawn(command, &args, Origin { slot: 0, generation: 0 }, &hub)
            .map_err(|e| BackendError::CannotStart(format!("cannot start the benchmark worker: {e}")))?;
        let mut session = BenchSession {
            hub,
            bench,
            command: command.clone(),
            device_ordinal: device,
            setup,
            launch_timeout,
            device: placeholder_device(),
        };
        session.set_up()?;
        Ok(session)
    }

    /// A session on each GPU's worker of `crew`, which must be set up with the data the
    /// sessions time on (a search's, handed on by [`crate::Pipeline::into_crew`]), the first
    /// GPU's first, and the crew's compile pool.
    pub(crate) fn from_crew(crew: Crew, launch_timeout: Duration) -> Option<(Vec<BenchSession>, CompilePool)> {
        let Crew { hub, hands, pool, bench_command, setup } = crew;
        // Workers started ahead and never set up time nothing.
        let setup = setup.filter(|_| !hands.is_empty())?;
        let sessions = hands
            .into_iter()
            .map(|Hand { ordinal, worker, info }| {
                Some(BenchSession {
                    hub: Arc::clone(&hub),
                    bench: worker,
                    command: bench_command.clone(),
                    device_ordinal: ordinal,
                    setup: setup.clone(),
                    launch_timeout,
                    device: info?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some((sessions, pool))
    }

    /// The crew again: the sessions' workers (set up with their data), in order, and `pool`.
    /// `None` without a session.
    pub(crate) fn into_crew(sessions: Vec<BenchSession>, pool: CompilePool) -> Option<Crew> {
        let first = sessions.first()?;
        let (hub, bench_command, setup) = (Arc::clone(&first.hub), first.command.clone(), first.setup.clone());
        let hands = sessions
            .into_iter()
            .map(|session| Hand { ordinal: session.device_ordinal, worker: session.bench, info: Some(session.device) })
            .collect();
        Some(Crew { hub, hands, pool, bench_command, setup: Some(setup) })
    }

    /// A session like this one on another GPU of the same model: a worker started there and
    /// set up with this session's data.
    pub(crate) fn on_device(&self, device: usize) -> Result<BenchSession, BackendError> {
        BenchSession::start(&self.command, device, self.setup.clone(), self.launch_timeout)
    }

    /// The GPU the session's worker was started on.
    pub(crate) fn device_ordinal(&self) -> usize {
        self.device_ordinal
    }

    /// The channel the session's worker speaks into (shared with the compile workers of an
    /// adopted pipeline).
    pub(crate) fn hub(&self) -> &Hub {
        &self.hub
    }

    fn set_up(&mut self) -> Result<(), BackendError> {
        match self.receive(Instant::now() + START_TIMEOUT, &never)? {
            FromBench::Ready { device } => self.device = device,
            other => return Err(BackendError::CannotStart(format!("the benchmark worker did not start: {other:?}"))),
        }
        self.bench.send(&ToBench::Setup(self.setup.clone())).map_err(|e| BackendError::CannotStart(e.to_string()))?;
        match self.receive(Instant::now() + START_TIMEOUT, &never)? {
            FromBench::SetupDone { .. } => Ok(()),
            FromBench::Fatal { message } => Err(BackendError::CannotStart(format!("setting up the GPU: {message}"))),
            other => Err(BackendError::Protocol(format!("unexpected message {other:?}"))),
        }
    }

    fn restart(&mut self) -> Result<(), BackendError> {
        self.bench.kill();
        let origin = Origin { slot: self.bench.origin.slot, generation: self.bench.origin.generation + 1 };
        let args = vec!["__worker".into(), "bench".into(), "--device".into(), self.device_ordinal.to_string()];
        self.bench = Worker::spawn(&self.command, &args, origin, &self.hub)
            .map_err(|e| BackendError::CannotStart(format!("cannot restart the benchmark worker: {e}")))?;
        self.set_up()
    }

    /// The worker's next message other than `Waiting` (which extends the deadline). `stop`
    /// is asked every [`STOP_POLL`]: once it says so, the worker is stopped (killed; the
    /// next request starts another) and the wait ends with [`BackendError::Interrupted`].
    fn receive(&mut self, mut deadline: Instant, stop: &dyn Fn() -> bool) -> Result<FromBench, BackendError> {
        loop {
            let Some(line) = self.hub.next_from(self.bench.origin, deadline.min(Instant::now() + STOP_POLL)) else {
                if stop() {
                    self.bench.kill();
                    return Err(BackendError::Interrupted);
                }
                if Instant::now() < deadline {
                    continue;
                }
                self.bench.kill();
                return Err(BackendError::DeviceLost("the benchmark worker hung".into()));
            };
            let Some(text) = line.text else {
                return Err(BackendError::DeviceLost(format!("the benchmark worker {}", self.bench.death())));
            };
            match serde_json::from_str(&text).map_err(|e| BackendError::Protocol(format!("unreadable reply: {e}")))? {
                FromBench::Waiting { launches } => {
                    deadline = Instant::now() + self.launch_timeout * launches.max(1) as u32 + Duration::from_secs(2)
                }
                other => return Ok(other),
            }
        }
    }

    fn request(&mut self, message: &ToBench, stop: &dyn Fn() -> bool) -> Result<FromBench, BackendError> {
        self.bench.send(message).map_err(|e| BackendError::DeviceLost(format!("the benchmark worker is gone: {e}")))?;
        self.receive(Instant::now() + self.launch_timeout + Duration::from_secs(20), stop)
    }

    /// Verifies and times one kernel. A kernel that kills or hangs the worker is a failed
    /// evaluation; the worker is replaced.
    pub fn evaluate(&mut self, kernel: KernelImage, early_stop: Option<Bar>) -> Result<EvaluateResult, BackendError> {
        match self.request(&ToBench::Evaluate(EvaluateRequest { id: 0, kernel, early_stop }), &never) {
            Ok(FromBench::Result(result)) => {
                if result.context_lost {
                    self.restart()?;
                }
                Ok(result)
            }
            Ok(other) => Err(BackendError::Protocol(format!("unexpected reply {other:?}"))),
            Err(error) => {
                self.restart()?;
                Ok(EvaluateResult {
                    status: FailureKind::WorkerDied.status(),
                    reason: Some(error.to_string()),
                    context_lost: true,
                    ..EvaluateResult::empty(0)
                })
            }
        }
    }

    pub fn compare(
        &mut self,
        original: KernelImage,
        candidate: KernelImage,
        sets: u32,
        seed: u64,
    ) -> Result<(u32, Option<String>), BackendError> {
        match self.request(&ToBench::Compare { original, candidate, sets, seed }, &never)? {
            FromBench::Compared { differing, first_difference, .. } => Ok((differing, first_difference)),
            FromBench::Fatal { message } => Err(BackendError::DeviceLost(message)),
            other => Err(BackendError::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// Times `a` and `b` alternately; `stop` can end the wait (see `receive`).
    pub fn interleave(
        &mut self,
        (a, b): (KernelImage, KernelImage),
        rounds: u32,
        blocks: u32,
        seed: u64,
        stop: &dyn Fn() -> bool,
    ) -> Result<Interleaved, BackendError> {
        match self.request(&ToBench::Interleave { a, b, rounds, blocks, seed }, stop)? {
            FromBench::Interleaved { a, b, clocks } => Ok(Interleaved { a, b, clocks }),
            FromBench::Fatal { message } => Err(BackendError::DeviceLost(message)),
            other => Err(BackendError::Protocol(format!("unexpected reply {other:?}"))),
        }
    }
}

/// The times of two kernels timed alternately, and the clocks' range over them.
#[derive(Debug, Clone)]
pub struct Interleaved {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub clocks: Option<ClockSpan>,
}

fn placeholder_device() -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: String::new(),
        compute_capability: (0, 0),
        multiprocessors: 0,
        l2_bytes: 0,
        max_threads_per_block: 0,
        max_shared_per_block: 0,
        max_shared_per_block_optin: 0,
        max_registers_per_block: 0,
        clock_khz: 0,
        memory_bytes: 0,
        pci_bus_id: None,
    }
}

/// The setup of a schedule search: the tuning's arguments, with the original kernel as the
/// reference and every output compared bit for bit.
pub fn schedule_setup(mut setup: Setup, original: &KernelImage) -> Result<Setup, String> {
    let outputs: Vec<usize> = setup
        .args
        .iter()
        .enumerate()
        .filter(|(_, a)| matches!(a, ArgSetup::Buffer { output: true, .. }))
        .map(|(position, _)| position)
        .collect();
    if outputs.is_empty() {
        return Err("the kernel has no output to compare: schedule tuning needs to know its outputs".into());
    }
    setup.reference = Some(ReferenceSetup::Kernel(original.clone()));
    setup.tolerances = outputs.into_iter().map(|p| (p, 0.0, 0.0)).collect();
    setup.bitwise = true;
    // Candidates are checked bit for bit on the setup's inputs here, and the best on many
    // random sets afterwards (`Compare`): extra sets per candidate would add nothing.
    setup.verify_sets = 0;
    // Every candidate is timed in full: the search compares medians.
    setup.timing.early_stop = EarlyStop::Off;
    Ok(setup)
}

/// Searches the schedule of `original` on the GPU through `session`. Once `stop` says so
/// (Ctrl-C), no candidate is measured any more and the search ends with
/// [`BackendError::Interrupted`].
pub fn tune_schedule(
    session: &mut BenchSession,
    original: &KernelImage,
    options: &ScheduleOptions,
    nvdisasm: &Nvdisasm,
    stop: &dyn Fn() -> bool,
) -> Result<ScheduleReport, ScheduleError> {
    if options.blocks < MIN_BLOCKS || options.rounds < options.blocks {
        return Err(ScheduleError::TooFewBlocks { blocks: options.blocks, rounds: options.rounds, min: MIN_BLOCKS });
    }
    let seed = options.seed.unwrap_or(0);
    let schedule = Schedule::from_cubin(&original.cubin.0, &original.name, nvdisasm)?;
    let legal_moves = schedule.legal_moves().len();
    let start = Instant::now();
    let mut rejected = 0usize;
    let mut rejected_reasons = Vec::new();
    let mut failure: Option<BackendError> = None;
    let mut objective = |cubin: &[u8]| -> Result<Option<f64>, SassError> {
        // After a failure the search runs out its steps without the GPU (they cost
        // microseconds); the failure is returned at its end.
        if failure.is_none() && stop() {
            failure = Some(BackendError::Interrupted);
        }
        if failure.is_some() {
            return Ok(None);
        }
        let kernel = KernelImage { cubin: crate::protocol::Bytes(cubin.to_vec()), ..original.clone() };
        match session.evaluate(kernel, None) {
            Ok(result) if result.status == Status::Ok => Ok(Some(median(&result.samples))),
            Ok(result) => {
                rejected += 1;
                if rejected_reasons.len() < 5 {
                    rejected_reasons.push(format!("{}: {}", result.status, result.reason.unwrap_or_default()));
                }
                // Diagnostics: KERNTUNE_SCHEDULE_DUMP names a folder that receives every
                // rejected candidate (and the original), for study with nvdisasm.
                if let Some(dir) = std::env::var_os("KERNTUNE_SCHEDULE_DUMP") {
                    let dir = std::path::PathBuf::from(dir);
                    let _ = std::fs::create_dir_all(&dir);
                    let _ = std::fs::write(dir.join("original.cubin"), &original.cubin.0);
                    let _ = std::fs::write(dir.join(format!("rejected-{rejected}.cubin")), cubin);
                }
                Ok(None)
            }
            Err(error) => {
                failure = Some(error);
                Ok(None)
            }
        }
    };
    let outcome = match options.method.as_str() {
        "anneal" => anneal(
            &schedule,
            &mut objective,
            &AnnealingOptions { steps: options.budget, ..AnnealingOptions::default() },
            seed,
        ),
        // Restarts (from the best so far, perturbed) continue until the budget is spent.
        "hill_climb" => hill_climb(
            &schedule,
            &mut objective,
            &HillClimbOptions { evaluations: options.budget, restarts: options.budget, ..HillClimbOptions::default() },
            seed,
        ),
        other => return Err(ScheduleError::UnknownMethod(other.to_string())),
    }?;
    if let Some(error) = failure {
        return Err(error.into());
    }
    let search_seconds = start.elapsed().as_secs_f64();
    let mut relative: Vec<f64> =
        outcome.evaluations.iter().filter_map(|e| e.energy).map(|ms| ms / outcome.baseline_energy).collect();
    relative.sort_by(f64::total_cmp);
    let search_range = match (relative.first(), relative.last()) {
        (Some(&fastest), Some(&slowest)) => [fastest, relative[relative.len() / 2], slowest],
        _ => [1.0; 3],
    };
    let image = |cubin: &[u8]| KernelImage { cubin: crate::protocol::Bytes(cubin.to_vec()), ..original.clone() };
    let contenders = &outcome.leaders[..outcome.leaders.len().min(options.finalists.max(1))];
    let mut finalists = Vec::new();
    if contenders.len() > 1 {
        for contender in contenders {
            let rounds = options.finalist_rounds;
            let Interleaved { a, b, .. } =
                session.interleave((original.clone(), image(&contender.cubin)), rounds, 2, seed, stop)?;
            finalists.push(Finalist {
                moves: contender.moves.len(),
                search_ratio: contender.energy / outcome.baseline_energy,
                ratio: median(&per_round_ratios(&a, &b)),
            });
        }
    }
    let winner = finalists
        .iter()
        .enumerate()
        .min_by(|x, y| x.1.ratio.total_cmp(&y.1.ratio))
        .map_or(contenders.first(), |(index, _)| contenders.get(index));
    let changed = winner.is_some();
    let candidate = winner.map_or_else(|| original.clone(), |w| image(&w.cubin));
    let (differing, first_difference) = if changed {
        session.compare(original.clone(), candidate.clone(), options.check_sets, seed ^ 0x5eed)?
    } else {
        (0, None)
    };
    let mut compare_with_original = |kernel: KernelImage, seed: u64| -> Result<_, BackendError> {
        let Interleaved { a, b, .. } =
            session.interleave((original.clone(), kernel), options.rounds, options.blocks, seed, stop)?;
        let blocks = block_medians(&per_round_ratios(&a, &b), options.blocks as usize);
        Ok((median(&a), median(&b), median(&blocks), median_interval(&blocks)))
    };
    let (original_ms, candidate_ms, ratio, (low, high)) = compare_with_original(candidate, seed)?;
    let (_, _, control_ratio, (control_low, control_high)) =
        compare_with_original(original.clone(), seed.wrapping_add(1))?;
    let keep = changed && differing == 0 && high < control_low.min(1.0);
    Ok(ScheduleReport {
        kernel: original.name.clone(),
        instructions: schedule.listing().instructions().len(),
        legal_moves,
        evaluations: outcome.evaluations.len(),
        rejected,
        rejected_reasons,
        search_seconds,
        baseline_ms: outcome.baseline_energy,
        best_search_ms: outcome.best_energy,
        search_range,
        finalists,
        finalist_rounds: options.finalist_rounds,
        moves: winner.map_or(0, |w| w.moves.len()),
        checked_sets: if changed { options.check_sets } else { 0 },
        differing_sets: differing,
        first_difference,
        ab_rounds: options.rounds,
        ab_blocks: options.blocks,
        original_median_ms: original_ms,
        candidate_median_ms: candidate_ms,
        ratio,
        ratio_low: low,
        ratio_high: high,
        control_ratio,
        control_low,
        control_high,
        cubin: winner.filter(|_| keep).map(|w| w.cubin.clone()),
    })
}

/// Each round's time of `b` relative to `a`'s.
fn per_round_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| b / a).collect()
}

/// Tunes the schedule of one configuration of any language: compiles it (the original),
/// sets a benchmark worker up with the original as the bit-for-bit reference, and searches.
pub fn schedule_config(
    language: &dyn Language,
    config: &[kerntune_space::Value],
    device: &DeviceInfo,
    pipeline: &PipelineOptions,
    options: &ScheduleOptions,
    stop: &dyn Fn() -> bool,
) -> Result<(ScheduleReport, KernelImage), ScheduleError> {
    let hub = Hub::default();
    let timeout = language.compile_timeout();
    let mut pool = CompilePool::new(&pipeline.compile_worker, 1, CompileLimit::new(timeout, false), &hub, 1)
        .map_err(|e| BackendError::CannotStart(format!("cannot start a compile worker: {e}")))?;
    let job = language.compile_job(config, device).map_err(ScheduleError::Language)?;
    let binary = compile_now(&mut pool, &hub, job, timeout).map_err(ScheduleError::Compile)?;
    let original = language.kernel_image(config, binary).map_err(ScheduleError::Language)?;
    let mut compile = |job| compile_now(&mut pool, &hub, job, timeout);
    let setup = language.setup(device, &mut compile).map_err(|e| BackendError::CannotStart(e.to_string()))?;
    let setup = schedule_setup(setup, &original).map_err(BackendError::CannotStart)?;
    let mut session =
        BenchSession::start(&pipeline.bench_worker, pipeline.first_device(), setup, language.launch_timeout())?;
    let nvdisasm =
        Nvdisasm::locate().map_err(|e| BackendError::CannotStart(format!("schedule tuning needs nvdisasm: {e}")))?;
    let report = tune_schedule(&mut session, &original, options, &nvdisasm, stop)?;
    Ok((report, original))
}
