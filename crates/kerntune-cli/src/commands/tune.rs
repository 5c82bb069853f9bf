//! `kerntune tune SPEC`: tune a CUDA C kernel on the GPU, or check (`--dry-run`) and
//! compile (`--compile-only`) its space without one. Also the hidden `__worker` command
//! that runs the compile and benchmark worker processes.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use kerntune_device::DeviceInfo;
use kerntune_engine::{objective, Event};
use kerntune_lang_cuda::spec::{ArgKind, EdgeSize, KernelSpec};
use kerntune_lang_cuda::CudaLanguage;
use kerntune_pipeline::controls::ControlsOptions;
use kerntune_pipeline::{Kept, Language as _, RayGpus, RayRelay, WorkerCommand};
use kerntune_run::{
    check_shapes, report, shape_label, shapes_table, CompileOnly, Front, Progress, Request, RunSummary, Shape,
    ShapeRow, Transfer, TunedShape, Tuning, Workers,
};
use kerntune_space::{ConfigId, Space, Value};
use kerntune_store::Store;
use serde_json::json;

use super::space;
use crate::args::{ControlsSearch, TimingMode, TuneArgs, WorkerArgs, WorkerKind};
use crate::{interrupt, render};

/// Runs a worker process. Workers ignore Ctrl-C: the tuner decides when they stop, so an
/// interrupted run ends as a stop, not as a crashed worker.
pub fn worker(args: WorkerArgs) -> ExitCode {
    // SAFETY: setting a signal disposition to "ignore" before any thread is started.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let code = match args.kind {
        WorkerKind::Bench => kerntune_pipeline::run_bench_worker(args.device),
        WorkerKind::Compile => kerntune_pipeline::run_compile_worker(),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn config_values(space: &Space, id: ConfigId) -> Vec<Value> {
    space.values(id).into_iter().cloned().collect()
}

/// This binary as a worker program; with `--ray`, its compile workers run on the cluster
/// through the relay, checked first, and with `--ray-gpus N|all` its benchmark workers too,
/// one GPU of the cluster each.
fn workers(ray: Option<&str>, ray_gpus: Option<RayGpus>) -> Result<Workers> {
    let worker = WorkerCommand::new(std::env::current_exe().context("locating the kerntune binary")?, Vec::new());
    let Some(address) = ray else {
        return Ok(Workers::of(worker));
    };
    let relay = RayRelay::new(address);
    let gpus = relay.measuring_gpus(ray_gpus).map_err(|reason| anyhow::anyhow!("--ray {address}: {reason}"))?;
    let bench = if gpus > 0 { relay.wrap_on_a_gpu(&worker) } else { worker.clone() };
    Ok(Workers::new(bench, relay.wrap(&worker)).elsewhere(Some(gpus)))
}

pub fn run(args: TuneArgs) -> Result<ExitCode> {
    let mut spec = KernelSpec::load(&args.spec)?;
    let pareto = measurement_options(&mut spec, &args).map_err(anyhow::Error::msg)?;
    // Everything the user wrote is checked before anything is built, compiled or probed,
    // whichever mode runs: a mistake found only by a tuning run would pass a dry run.
    let mut request = args.request.clone();
    request.search = request.search.or(&spec.search);
    DeviceInfo::compile_target(&request.arch)?;
    request.search.resolve(Front::Cli.default_strategy())?;
    let clock = Instant::now();
    let space = spec.space().with_context(|| args.spec.display().to_string())?;
    if space.is_empty() {
        let why = space::why_empty(spec.params.clone(), &spec.restrictions);
        bail!("{}: no configuration satisfies the restrictions{why}", args.spec.display());
    }
    check_launchable(&spec, &space)?;
    let sizes = spec.shapes.as_ref().map(|shapes| sized(&spec, shapes)).transpose()?;
    if args.dry_run {
        for (shape, at, space) in sizes.iter().flatten() {
            if !args.json {
                println!("Size {}:", shape_label(shape));
            }
            dry_run(at, space, clock, args.json)?;
        }
        if sizes.is_some() {
            return Ok(ExitCode::SUCCESS);
        }
        return dry_run(&spec, &space, clock, args.json);
    }
    if args.controls.is_some() && spec.ptxas.is_none() {
        bail!(
            "{}: --controls compileiq needs a ptxas of the ACF files' version: name it in [compiler] ptxas (\"pip\" for the nvidia-cuda-nvcc==13.3.* wheel's, or a path)",
            args.spec.display()
        );
    }
    if args.compile_only {
        if sizes.is_some() && !args.json {
            println!("Compiling at the spec's [problem] size: the binaries are the same at every size of its shapes.");
        }
        return compile_only(&spec, &space, &CudaLanguage::new(&spec, &space), &request, &args);
    }
    request.controls = args.controls.map(|ControlsSearch::Compileiq| ControlsOptions {
        budget: args.controls_budget,
        ptxas_version: spec.ptxas.as_ref().map(|p| p.version.clone()).unwrap_or_default(),
        ..ControlsOptions::default()
    });
    if let Some(sizes) = &sizes {
        return tune_shapes(&spec, sizes, request, &args, pareto);
    }
    let summary = tune_size(&spec, &space, request, &args, pareto, None)?;
    if args.json {
        println!("{}", report::tuning_json(&summary));
    } else {
        print_run(&summary);
    }
    Ok(render::exit_code(summary.stop, summary.failure.as_deref()))
}

fn print_run(summary: &RunSummary) {
    print!("{}", report::tuning_text(summary));
    if let Some(schedule) = &summary.schedule {
        print!("{}", report::schedule_text(schedule));
    }
    if let Some(controls) = &summary.controls {
        print!("{}", report::controls_text(controls));
    }
}

/// The spec at each size of its `shapes`, with its space, every size checked before the
/// first is tuned: a mistake in the last one would otherwise be found after the others' work.
fn sized(spec: &KernelSpec, shapes: &[Shape]) -> Result<Vec<(Shape, KernelSpec, Space)>> {
    check_shapes(shapes).map_err(|e| anyhow::anyhow!("{}: {e}", spec.path.display()))?;
    let mut sized = Vec::new();
    for shape in shapes {
        let at = spec.at(shape)?;
        let space = at.space().with_context(|| format!("{}: size {}", spec.path.display(), shape_label(shape)))?;
        if space.is_empty() {
            bail!(
                "{}: size {}: no configuration satisfies the restrictions there",
                spec.path.display(),
                shape_label(shape)
            );
        }
        check_launchable(&at, &space)?;
        sized.push((shape.clone(), at, space));
    }
    Ok(sized)
}

/// Tunes the spec at every size of its `shapes`, in order, each size learning from the
/// nearest size tuned before it; prints each size's result, then a line per size.
fn tune_shapes(
    spec: &KernelSpec,
    sized: &[(Shape, KernelSpec, Space)],
    request: Request,
    args: &TuneArgs,
    pareto: Option<[&'static str; 2]>,
) -> Result<ExitCode> {
    let mut runs: Vec<RunSummary> = Vec::new();
    // The sizes are tuned one after another on the same workers.
    let kept = Kept::new();
    for (index, (shape, at, space)) in sized.iter().enumerate() {
        if !args.json {
            println!("\nSize {} ({} of {}):", shape_label(shape), index + 1, sized.len());
        }
        let tuned =
            sized.iter().zip(&runs).map(|((shape, ..), run)| TunedShape { shape: shape.clone(), tuning: run.tuning });
        let transfer = Transfer { shape: shape.clone(), tuned: tuned.collect(), independent: false };
        let request = Request { transfer: Some(transfer), ..request.clone() };
        let summary = tune_size(at, space, request, args, pareto, Some(&kept))?;
        if !args.json {
            print_run(&summary);
        }
        let interrupted = summary.stop == kerntune_engine::StopReason::Interrupted;
        runs.push(summary);
        if interrupted {
            break;
        }
    }
    let rows: Vec<ShapeRow> = runs.iter().filter_map(|run| run.shape.clone()).collect();
    let stop = runs.last().map_or(kerntune_engine::StopReason::Converged, |run| run.stop);
    let failure = runs.iter().find_map(|r| r.failure.clone());
    if args.json {
        let runs: Vec<serde_json::Value> = runs.iter().map(report::tuning_json).collect();
        println!("{}", json!({"shapes": rows, "runs": runs}));
    } else {
        println!("\n{}", shapes_table(&rows, &spec.objective.name));
    }
    Ok(render::exit_code(stop, failure.as_deref()))
}

/// Tunes the spec at its own size, showing the progress; on the workers `kept` holds, where
/// given, which it leaves there for the next size.
fn tune_size(
    spec: &KernelSpec,
    space: &Space,
    request: Request,
    args: &TuneArgs,
    pareto: Option<[&'static str; 2]>,
    kept: Option<&Kept>,
) -> Result<RunSummary> {
    let language = CudaLanguage::new(spec, space);
    let db = request.database();
    let workers = workers(args.ray.as_deref(), args.ray_gpus)?;
    let mut tuning = Tuning::new(&language, space, request, Front::Cli, workers);
    if let Some(kept) = kept {
        tuning = tuning.keeping_workers_in(kept);
    }
    let prepared = tuning.prepare()?;
    let (device, budget) = (&prepared.device, &prepared.search.budget);
    if !args.json {
        let gpus = match prepared.devices.len() {
            1 => device.name.clone(),
            n => format!("{n} x {}", device.name),
        };
        println!("Tuning {} on {gpus} ({}), {} configurations.", spec.kernel_name, device.arch(), space.len());
        let limit = match budget.max_fevals {
            Some(n) => format!("budget {n} evaluations"),
            None if budget.auto_stop => "no budget: stops when more evaluations are unlikely to pay".to_string(),
            None => "no evaluation limit".to_string(),
        };
        let (strategy, seed) = (&prepared.search.strategy_name, prepared.search.seed);
        println!("Strategy {strategy}, seed {seed}, {limit}; results in {}.", db.display());
        match language.verified_sets() {
            0 => println!("Warning: the spec has no [verify] section, so outputs are not checked."),
            sets => println!("{}", report::verification_text(sets, &language.verified_sizes(), "the spec's")),
        }
    }
    let bar = render::progress(
        Some(budget.max_fevals.unwrap_or(space.len()).min(space.len()) as u64),
        "evaluations",
        args.json,
    );
    let objective = spec.objective.clone();
    let json = args.json;
    let mut on_progress = |progress: Progress<'_>| match progress {
        Progress::Search(Event::Started { from_store, .. }) if from_store > 0 => {
            bar.println(format!("{from_store} configurations are already in the store"));
        }
        Progress::Search(Event::Evaluated { point, .. }) => render::advance(&bar, &objective, point.feval, point.best),
        Progress::Search(Event::Started { .. }) => {}
        Progress::Finalists(_) => bar.finish_and_clear(),
        Progress::Schedule(options) => {
            bar.finish_and_clear();
            if !json {
                print!("{}", report::schedule_start_text(options));
            }
        }
    };
    let mut summary = prepared.run(&mut on_progress, &interrupt::requested)?;
    bar.finish_and_clear();
    if let Some(axes) = pareto {
        summary.keep_pareto(axes, space);
    }
    Ok(summary)
}

/// Applies `--objective`, `--timing` and `--pareto` to the spec; returns the Pareto axes.
fn measurement_options(spec: &mut KernelSpec, args: &TuneArgs) -> Result<Option<[&'static str; 2]>, String> {
    if let Some(objective) = &args.objective {
        spec.set_objective(objective, args.objective_higher_is_better.then_some(true))?;
    }
    if let Some(mode) = args.timing {
        spec.set_graph_timing(mode == TimingMode::Graph);
    }
    let Some(text) = &args.pareto else { return Ok(None) };
    let axes = objective::pareto_axes(text).map_err(|e| e.to_string())?;
    if axes.iter().any(|axis| objective::observable(axis).is_some_and(|o| o.energy)) {
        spec.observe_energy();
    }
    Ok(Some(axes))
}

/// Checks that the arguments' sizes and values can be computed at a problem size (`at`
/// names it in the error, empty for the spec's own). They depend on the problem only: one
/// that cannot be computed (a division by zero, a negative size) fails every
/// configuration, so it is an error of the spec, found here rather than on the GPU.
fn check_arguments(spec: &KernelSpec, problem: &[Value], at: &str) -> Result<()> {
    for arg in &spec.args {
        let (what, expression) = match &arg.kind {
            ArgKind::Buffer { size, .. } => ("size", size),
            ArgKind::Scalar { value } => ("value", value),
        };
        let value = expression.evaluate_with(problem).map_err(|e| {
            anyhow::anyhow!("{}: {at}argument {}: {what} '{expression}': {e}", spec.path.display(), arg.name)
        })?;
        if what == "size" && !value.as_number().is_some_and(|n| n >= 0.0 && n.is_finite()) {
            bail!(
                "{}: {at}argument {}: size '{expression}' is {value}, not a count of elements",
                spec.path.display(),
                arg.name
            );
        }
    }
    Ok(())
}

/// Refuses a spec under which no configuration can be launched (a problem size of 0, a
/// grid that no block shape fits), naming the first configuration's reason: such a spec
/// would fail every evaluation, so it is the spec's error, found before any work.
fn check_launchable(spec: &KernelSpec, space: &Space) -> Result<()> {
    let mut first = None;
    for id in space.ids() {
        match spec.geometry(&config_values(space, id)) {
            Ok(_) => return Ok(()),
            Err(reason) => {
                first.get_or_insert((id, reason));
            }
        }
    }
    match first {
        Some((id, reason)) => bail!(
            "{}: no configuration can be launched (the first, {}: {reason})",
            spec.path.display(),
            space.describe(id)
        ),
        None => Ok(()),
    }
}

/// At one edge size of `[verify] sizes`: how many configurations apply there (the
/// restrictions there admit them) and how many of those have no launch geometry there.
fn dry_run_edge(spec: &KernelSpec, space: &Space, edge: &EdgeSize) -> Result<serde_json::Value> {
    let problem = edge.values();
    check_arguments(spec, &problem, &format!("[verify] sizes {}: ", edge.label))?;
    let (mut apply, mut invalid) = (0usize, 0usize);
    for id in space.ids() {
        let config = config_values(space, id);
        if edge.admits(&config) {
            apply += 1;
            let values: Vec<Value> = problem.iter().chain(&config).cloned().collect();
            invalid += usize::from(spec.launch.geometry(&values).is_err());
        }
    }
    Ok(json!({"size": edge.label, "apply": apply, "invalid_geometry": invalid}))
}

fn dry_run(spec: &KernelSpec, space: &Space, clock: Instant, json: bool) -> Result<ExitCode> {
    let problem: Vec<Value> = spec.problem.iter().map(|(_, v)| v.clone()).collect();
    check_arguments(spec, &problem, "")?;
    let mut invalid = Vec::new();
    for id in space.ids() {
        if let Err(reason) = spec.geometry(&config_values(space, id)) {
            invalid.push((id, reason));
        }
    }
    let sizes = spec.verify.as_ref().map_or(&[][..], |v| v.sizes.as_slice());
    let edges = sizes.iter().map(|edge| dry_run_edge(spec, space, edge)).collect::<Result<Vec<_>>>()?;
    let seconds = clock.elapsed().as_secs_f64();
    if json {
        let mut out = json!({"count": space.len(), "invalid_geometry": invalid.len(), "seconds": seconds, "kernel": spec.kernel_name});
        if !edges.is_empty() {
            out["edge_sizes"] = json!(edges);
        }
        println!("{out}");
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
        for edge in &edges {
            println!(
                "Also checked at the edge size {}: {} configurations apply there ({} with an impossible launch geometry there).",
                edge["size"].as_str().unwrap_or_default(),
                edge["apply"],
                edge["invalid_geometry"]
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn compile_only(
    spec: &KernelSpec,
    space: &Space,
    language: &CudaLanguage<'_>,
    request: &Request,
    args: &TuneArgs,
) -> Result<ExitCode> {
    let (db, arch) = (request.database(), &request.arch);
    let store = Store::open(&db)?;
    let tuning = store.tuning(&spec.tuning_info(&format!("compile-only {arch}")))?;
    let worker = workers(args.ray.as_deref(), None)?.compile().clone();
    let compile = CompileOnly::new(language, space, request, worker).keeping_in(&store, tuning);
    let bar = render::progress(Some(space.len() as u64), "compiled", args.json);
    let report = compile.run(&mut |_| bar.inc(1), &interrupt::requested)?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", report::compile_json(&report, space, arch));
    } else {
        print!("{}", report::compile_text(&report, space, arch, &db.display().to_string()));
    }
    if report.interrupted {
        eprintln!(
            "interrupted: {} compiled configurations are kept; the same command compiles the rest",
            report.compiled()
        );
        return Ok(ExitCode::from(interrupt::INTERRUPTED_EXIT));
    }
    report.require_some(arch)?;
    Ok(ExitCode::SUCCESS)
}
