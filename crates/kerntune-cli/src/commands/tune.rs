//! `kerntune tune SPEC`: tune a CUDA C kernel on the GPU, or check (`--dry-run`) and
//! compile (`--compile-only`) its space without one. Also the hidden `__worker` command
//! that runs the compile and benchmark worker processes.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use kerntune_device::{driver_available, nvrtc_available, DeviceInfo};
use kerntune_engine::{Event, Lazy, StopReason, Summary, Tuner};
use kerntune_lang_cuda::spec::{ArgKind, KernelSpec};
use kerntune_lang_cuda::CudaLanguage;
use kerntune_pipeline::schedule::{schedule_config, ScheduleOptions, ScheduleReport};
use kerntune_pipeline::{Pipeline, PipelineOptions, WorkerCommand};
use kerntune_space::{ConfigId, Space, Value};
use kerntune_store::{Costs, Status, Store};
use serde_json::{json, Value as Json};

use crate::args::{TuneArgs, WorkerArgs, WorkerKind};
use crate::commands::search_setup;
use crate::{interrupt, render};
use kerntune_engine::Search;

/// Runs a worker process. Workers ignore Ctrl-C: the tuner decides when they stop, so an
/// interrupted run ends as a stop, not as a crashed worker.
pub fn worker(args: WorkerArgs) -> ExitCode {
    // SAFETY: setting a signal disposition to "ignore" before any thread is started.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let code = match args.kind {
        WorkerKind::Bench => kerntune_pipeline::bench::run(args.device),
        WorkerKind::Compile => kerntune_pipeline::compile::run(),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The results database: `--db`, else the default one.
fn database(explicit: Option<PathBuf>) -> PathBuf {
    explicit.unwrap_or_else(Store::default_path)
}

fn config_values(space: &Space, id: ConfigId) -> Vec<Value> {
    space.values(id).into_iter().cloned().collect()
}

pub fn run(args: TuneArgs) -> Result<ExitCode> {
    let spec = KernelSpec::load(&args.spec)?;
    let clock = Instant::now();
    let space = spec.space().with_context(|| args.spec.display().to_string())?;
    if args.dry_run {
        return dry_run(&spec, &space, clock, args.json);
    }
    if args.compile_only {
        kerntune_device::nvrtc::check_flags(&spec.ptxas_flags()).map_err(anyhow::Error::msg)?;
        return compile_only(&spec, &space, &args);
    }
    if !driver_available() {
        bail!(
            "no NVIDIA driver on this machine: tuning needs a GPU. `--dry-run` checks the space without one, \
             `--compile-only` compiles every configuration (with NVRTC installed)"
        );
    }
    let (_, device) =
        kerntune_device::driver::probe(args.device).map_err(|e| anyhow::anyhow!("GPU #{}: {e}", args.device))?;
    if !nvrtc_available() {
        bail!("NVRTC (libnvrtc, from the CUDA toolkit) is not installed: kerntune compiles CUDA C with it");
    }
    kerntune_device::nvrtc::check_flags(&spec.ptxas_flags()).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(!space.is_empty(), "{}: no configuration satisfies the restrictions", args.spec.display());
    let Search { strategy_name, strategy, budget, seed } = search_setup(&args.search, &spec.search)?;
    let db = database(args.db.clone());
    let store = Store::open(&db)?;
    let tuning = store.tuning(&spec.tuning_info(&device.name))?;
    let workers =
        args.compile_workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get())).max(1);
    let worker = WorkerCommand::new(std::env::current_exe().context("locating the kerntune binary")?, Vec::new());
    let options = PipelineOptions {
        bench_worker: worker.clone(),
        compile_worker: worker,
        device: args.device,
        compile_workers: workers,
    };
    let language = CudaLanguage::new(&spec, &space);
    let mut backend = Lazy::new(workers + 2, || Pipeline::start(&language, &space, options.clone()));

    if !args.json {
        println!("Tuning {} on {} ({}), {} configurations.", spec.kernel_name, device.name, device.arch(), space.len());
        let limit = budget.max_fevals.map_or("no evaluation limit".to_string(), |n| format!("budget {n} evaluations"));
        println!("Strategy {strategy_name}, seed {}, {limit}; results in {}.", seed, db.display());
        if spec.verify.is_none() {
            println!("Warning: the spec has no [verify] section, so outputs are not checked.");
        }
    }
    let bar = render::progress(Some(budget.max_fevals.unwrap_or(space.len()).min(space.len()) as u64), args.json);
    let mut tally = Tally::default();
    let objective = spec.objective.clone();
    let mut on_event = |event: Event<'_>| match event {
        Event::Started { from_store, .. } if from_store > 0 => {
            bar.println(format!("{from_store} configurations are already in the store"));
        }
        Event::Evaluated { point, evaluation } => {
            tally.add(point.id, evaluation, point.from_store);
            render::advance(&bar, &objective, point.feval, point.best);
        }
        Event::Started { .. } => {}
    };
    let summary = Tuner {
        space: &space,
        strategy,
        backend: &mut backend,
        store: Some((&store, tuning)),
        reuse_stored: !args.fresh,
        objective: spec.objective.clone(),
        budget,
        seed,
        interrupt: Some(&interrupt::requested),
    }
    .run(&mut on_event)?;
    bar.finish_and_clear();
    let wall = clock.elapsed().as_secs_f64();
    let workers_used = backend.started().map(Pipeline::compile_workers);
    drop(backend);
    let schedule = match (&summary.best, args.schedule && summary.stop != StopReason::Interrupted) {
        (Some(best), true) => {
            Some(schedule(&args, &language, &config_values(&space, best.id), &device, &options, &store, tuning, best)?)
        }
        _ => None,
    };
    if args.json {
        let mut out = summary_json(&summary, &spec, &space, &device, &tally, wall);
        out["schedule"] = json!(schedule);
        println!("{out}");
    } else {
        print_summary(&summary, &spec, &space, &tally, wall, workers_used);
        if let Some(report) = &schedule {
            print_schedule(report);
        }
    }
    Ok(render::exit_code(&summary))
}

/// The schedule stage: the best configuration's native schedule searched on the GPU; the
/// kept cubin (the winner, or the original) is stored with the report as its provenance.
#[allow(clippy::too_many_arguments)]
fn schedule(
    args: &TuneArgs,
    language: &CudaLanguage<'_>,
    config: &[Value],
    device: &DeviceInfo,
    options: &PipelineOptions,
    store: &Store,
    tuning: kerntune_store::TuningId,
    best: &kerntune_engine::Best,
) -> Result<ScheduleReport> {
    let schedule_options = ScheduleOptions {
        budget: args.schedule_budget,
        method: args.schedule_method.clone(),
        seed: args.search.seed.unwrap_or(0),
        check_sets: args.schedule_check_sets,
        ..ScheduleOptions::default()
    };
    if !args.json {
        println!(
            "\nTuning the native schedule of the best configuration ({} candidates, {})...",
            schedule_options.budget, schedule_options.method
        );
    }
    let (report, original) = schedule_config(language, config, device, options, &schedule_options)?;
    let provenance = serde_json::to_string(&report)?;
    let cubin = report.cubin.as_deref().unwrap_or(&original.cubin.0);
    store.save_artifact(tuning, &best.config, "schedule", cubin, &provenance)?;
    Ok(report)
}

fn print_schedule(report: &ScheduleReport) {
    println!(
        "Schedule of {}: {} instructions, {} legal moves at the start; {} candidates in {:.1} s ({} rejected for differing outputs).",
        report.kernel, report.instructions, report.legal_moves, report.evaluations, report.search_seconds, report.rejected
    );
    for reason in &report.rejected_reasons {
        println!("  rejected: {reason}");
    }
    let [fastest, median, slowest] = report.search_range;
    println!(
        "Candidates timed at {fastest:.4} to {slowest:.4} of the original in the search (median {median:.4}), each a single measurement."
    );
    if let Some(best) = report.finalists.iter().map(|f| f.ratio).min_by(f64::total_cmp) {
        println!(
            "The {} fastest timed again ({} rounds each, interleaved with the original): ratios {best:.4} to {:.4}; the lowest goes on.",
            report.finalists.len(),
            report.finalist_rounds,
            report.finalists.iter().map(|f| f.ratio).max_by(f64::total_cmp).unwrap_or(best)
        );
    }
    println!(
        "Interleaved A/B over {} rounds in {} reloads: original {:.4} ms, winner {:.4} ms ({} moves): time ratio {:.4} (95% CI {:.4} to {:.4}).",
        report.ab_rounds, report.ab_blocks, report.original_median_ms, report.candidate_median_ms, report.moves, report.ratio, report.ratio_low, report.ratio_high
    );
    println!(
        "Control, the original against a copy of itself: time ratio {:.4} (95% CI {:.4} to {:.4}).",
        report.control_ratio, report.control_low, report.control_high
    );
    match (&report.cubin, report.checked_sets) {
        (Some(_), sets) => println!(
            "Kept: outputs identical bit for bit on {sets} random input sets; stored as the configuration's schedule."
        ),
        (None, 0) => println!("No schedule beat the original; the original is kept."),
        (None, sets) => println!(
            "Not kept: {} of {sets} input sets differed or the interval does not lie below the control's{}.",
            report.differing_sets,
            report.first_difference.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
        ),
    }
}

/// Per-evaluation figures the summary needs beyond the engine's totals.
#[derive(Debug, Default)]
struct Tally {
    statuses: BTreeMap<&'static str, usize>,
    framework_ms: Vec<f64>,
    /// Summed kernel time of all timing samples, seconds.
    measured_s: f64,
    /// Summed kernel time of the checked (untimed) runs, seconds.
    checked_s: f64,
    /// Summed time the benchmark worker spent per configuration, seconds.
    bench_round_trip_s: f64,
    /// Median kernel time (ms) and sample count of each measured configuration.
    timings: HashMap<ConfigId, (f64, usize)>,
}

impl Tally {
    fn add(&mut self, id: ConfigId, evaluation: &kerntune_store::Evaluation, from_store: bool) {
        *self.statuses.entry(evaluation.status.as_str()).or_default() += 1;
        if !evaluation.samples.is_empty() {
            self.timings.insert(id, (kerntune_device::stats::median(&evaluation.samples), evaluation.samples.len()));
        }
        if from_store {
            return;
        }
        let costs = &evaluation.costs;
        if evaluation.status != Status::CompileFailed {
            self.framework_ms.push(costs.framework_s * 1e3);
        }
        self.measured_s += evaluation.samples.iter().sum::<f64>() / 1e3;
        self.checked_s +=
            evaluation.metrics.get("verify_kernel_ms").and_then(serde_json::Value::as_f64).unwrap_or(0.0) / 1e3;
        self.bench_round_trip_s += costs.verify_s + costs.benchmark_s + costs.framework_s;
    }

    fn framework_median_ms(&self) -> Option<f64> {
        (!self.framework_ms.is_empty()).then(|| kerntune_device::stats::median(&self.framework_ms))
    }

    /// Fractions of the benchmark worker's time the GPU spent in the tuned kernels: timed
    /// runs only, and timed plus checked runs.
    fn gpu_busy(&self) -> Option<(f64, f64)> {
        (self.bench_round_trip_s > 0.0).then(|| {
            (self.measured_s / self.bench_round_trip_s, (self.measured_s + self.checked_s) / self.bench_round_trip_s)
        })
    }
}

fn summary_json(
    summary: &Summary,
    spec: &KernelSpec,
    space: &Space,
    device: &DeviceInfo,
    tally: &Tally,
    wall: f64,
) -> serde_json::Value {
    let best = summary
        .best
        .as_ref()
        .map(|b| json!({"config": b.config, "objective": b.objective, "description": space.describe(b.id)}));
    json!({
        "kernel": spec.kernel_name,
        "device": device,
        "objective": spec.objective.name,
        "higher_is_better": spec.objective.higher_is_better,
        "best": best,
        "evaluations": summary.evaluations,
        "failed": summary.failed,
        "from_store": summary.from_store,
        "statuses": tally.statuses,
        "stop": summary.stop,
        "wall_s": wall,
        "costs": summary.costs,
        "framework_median_ms": tally.framework_median_ms(),
        "gpu_busy_timed_runs": tally.gpu_busy().map(|b| b.0),
        "gpu_busy_tuned_kernels": tally.gpu_busy().map(|b| b.1),
        "trace": summary.trace,
    })
}

fn print_summary(
    summary: &Summary,
    spec: &KernelSpec,
    space: &Space,
    tally: &Tally,
    wall: f64,
    workers: Option<usize>,
) {
    let objective = &spec.objective;
    let statuses: Vec<String> =
        tally.statuses.iter().filter(|(s, _)| **s != "ok").map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "\n{} configurations evaluated ({} answered by the store){}; stopped: {}.",
        summary.evaluations,
        summary.from_store,
        if statuses.is_empty() { String::new() } else { format!(", of which {}", statuses.join(", ")) },
        summary.stop
    );
    match &summary.best {
        Some(best) => {
            let timing = tally
                .timings
                .get(&best.id)
                .map(|(ms, n)| format!(" (median {ms:.4} ms of {n} timed runs)"))
                .unwrap_or_default();
            println!("Best: {}{timing}", render::objective(objective, best.objective));
            println!("  {}", space.describe(best.id));
        }
        None => println!("No configuration passed verification."),
    }
    let costs: &Costs = &summary.costs;
    let compile = match workers {
        Some(n) => format!(
            "compile {} summed over {n} workers",
            render::duration(std::time::Duration::from_secs_f64(costs.compile_s))
        ),
        None => "nothing compiled".to_string(),
    };
    println!(
        "Wall time {}: {compile}; verify {}, benchmark {}, framework {}{}.",
        render::duration(std::time::Duration::from_secs_f64(wall)),
        render::duration(std::time::Duration::from_secs_f64(costs.verify_s)),
        render::duration(std::time::Duration::from_secs_f64(costs.benchmark_s)),
        render::duration(std::time::Duration::from_secs_f64(costs.framework_s)),
        tally.framework_median_ms().map(|m| format!(" (median {m:.2} ms per configuration)")).unwrap_or_default()
    );
    if let Some((timed, all)) = tally.gpu_busy() {
        println!(
            "While benchmarking, the GPU ran the tuned kernels {:.0}% of the time ({:.0}% in timed runs, the rest in checked runs).",
            all * 100.0,
            timed * 100.0
        );
    }
    if summary.stop == StopReason::Interrupted {
        println!("Interrupted: every finished evaluation is stored; run the same command again to resume.");
    }
}

fn dry_run(spec: &KernelSpec, space: &Space, clock: Instant, json: bool) -> Result<ExitCode> {
    // The arguments' sizes and values depend on the problem only: one that cannot be
    // computed (a division by zero, a negative size) fails every configuration, so it is an
    // error of the spec, found here rather than on the GPU.
    let problem: Vec<kerntune_space::Value> = spec.problem.iter().map(|(_, v)| v.clone()).collect();
    for arg in &spec.args {
        let (what, expression) = match &arg.kind {
            ArgKind::Buffer { size, .. } => ("size", size),
            ArgKind::Scalar { value } => ("value", value),
        };
        let value = expression.evaluate_with(&problem).map_err(|e| {
            anyhow::anyhow!("{}: argument {}: {what} '{expression}': {e}", spec.path.display(), arg.name)
        })?;
        if what == "size" && !value.as_number().is_some_and(|n| n >= 0.0 && n.is_finite()) {
            bail!(
                "{}: argument {}: size '{expression}' is {value}, not a count of elements",
                spec.path.display(),
                arg.name
            );
        }
    }
    let mut invalid = Vec::new();
    for id in space.ids() {
        if let Err(reason) = spec.geometry(&config_values(space, id)) {
            invalid.push((id, reason));
        }
    }
    let seconds = clock.elapsed().as_secs_f64();
    if json {
        println!(
            "{}",
            json!({"count": space.len(), "invalid_geometry": invalid.len(), "seconds": seconds, "kernel": spec.kernel_name})
        );
    } else {
        println!(
            "{}: {} configurations ({} with an impossible launch geometry), checked in {:.1} ms; nothing compiled or run.",
            spec.kernel_name,
            space.len(),
            invalid.len(),
            seconds * 1e3
        );
        for (id, reason) in invalid.iter().take(5) {
            println!("  {}: {reason}", space.describe(*id));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn compile_only(spec: &KernelSpec, space: &Space, args: &TuneArgs) -> Result<ExitCode> {
    use kerntune_pipeline::pool::{compile_all, CompileOutcome, CompilePool};
    use kerntune_pipeline::process::Hub;
    use kerntune_pipeline::protocol::{CompileJob, CompileRequest};
    check_arch(&args.arch)?;
    if !nvrtc_available() {
        bail!(
            "NVRTC is not installed: --compile-only needs it, not a GPU (pip install nvidia-cuda-nvrtc, or install the CUDA toolkit)"
        );
    }
    let clock = Instant::now();
    let db = database(args.db.clone());
    let store = Store::open(&db)?;
    let tuning = store.tuning(&spec.tuning_info(&format!("compile-only {}", args.arch)))?;
    // Configurations compiled by an earlier run (interrupted or not) are not compiled again.
    let stored: std::collections::HashSet<String> = store
        .artifacts(tuning, "cubin")?
        .into_iter()
        .map(|artifact| Json::Object(artifact.config).to_string())
        .collect();
    let workers =
        args.compile_workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get())).max(1);
    let command = WorkerCommand::new(std::env::current_exe()?, Vec::new());
    let hub = Hub::default();
    let mut pool = CompilePool::new(&command, workers, spec.timing.compile_timeout, &hub, 0)?;
    let ids: Vec<_> =
        space.ids().filter(|id| !stored.contains(&Json::Object(space.config_json(*id)).to_string())).collect();
    let requests = ids
        .iter()
        .enumerate()
        .map(|(index, id)| {
            let values = config_values(space, *id);
            let job = CompileJob::Cuda {
                source: spec.source_for(&values),
                name: spec.kernel_name.clone(),
                options: spec.options_for(&values),
                arch: args.arch.clone(),
            };
            CompileRequest { id: index as u32, job }
        })
        .collect();
    let bar = render::progress(Some(ids.len() as u64), args.json);
    let (mut compiled, mut failed, mut summed) = (stored.len(), Vec::new(), 0.0);
    let mut record = |outcome: CompileOutcome| -> Result<(), String> {
        bar.inc(1);
        match outcome {
            CompileOutcome::Compiled { id, binary, seconds } => {
                let cubin = binary.cubin;
                summed += seconds;
                compiled += 1;
                let values = config_values(space, ids[id as usize]);
                let provenance =
                    format!("nvrtc --gpu-architecture={} {}", args.arch, spec.options_for(&values).join(" "));
                store
                    .save_artifact(tuning, &space.config_json(ids[id as usize]), "cubin", &cubin, &provenance)
                    .map_err(|e| e.to_string())?;
            }
            CompileOutcome::Failed { id, reason, seconds, .. } => {
                summed += seconds;
                failed.push((id, reason));
            }
        }
        Ok(())
    };
    let stop = interrupt::requested;
    compile_all(&mut pool, &hub, requests, &mut record, &stop).map_err(anyhow::Error::msg)?;
    bar.finish_and_clear();
    let wall = clock.elapsed().as_secs_f64();
    let count = space.len();
    if args.json {
        println!(
            "{}",
            json!({"count": count, "compiled": compiled, "from_store": stored.len(), "failed": failed.len(), "wall_s": wall,
                   "compile_s": summed, "workers": workers, "arch": args.arch, "interrupted": interrupt::requested()})
        );
    } else {
        println!(
            "Compiled {compiled} of {count} configurations for {} ({} already in the store) in {:.1} s ({:.1} s of compiling on {workers} workers); {} failed. Cubins stored in {}.",
            args.arch,
            stored.len(),
            wall,
            summed,
            failed.len(),
            db.display()
        );
        for (id, reason) in failed.iter().take(3) {
            let first_line = reason.lines().next().unwrap_or_default();
            println!("  {}: {first_line}", ids.get(*id as usize).map(|c| space.describe(*c)).unwrap_or_default());
        }
    }
    if interrupt::requested() {
        eprintln!("interrupted: {compiled} compiled configurations are kept; the same command compiles the rest");
        return Ok(ExitCode::from(interrupt::INTERRUPTED_EXIT));
    }
    if compiled == 0 {
        let reason = failed.first().map_or("", |(_, r)| r.as_str());
        bail!("no configuration compiled for {}: {}", args.arch, reason.lines().next().unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}

/// An NVIDIA architecture as NVRTC names it (`sm_90`, `sm_90a`, `sm_100f`): checked before
/// any work, so that a typo is one clear error rather than every configuration failing.
fn check_arch(arch: &str) -> Result<()> {
    let digits = arch.strip_prefix("sm_").map(|rest| rest.trim_end_matches(['a', 'f']));
    match digits {
        Some(d) if (2..=3).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => bail!("--arch {arch:?} is not an NVIDIA architecture: give one like sm_90 (or sm_90a)"),
    }
}
