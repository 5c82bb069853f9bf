//! The compiler-controls stage: CompileIQ's search over ACF files for the best
//! configuration, in the run's own process. The proposer ([`super::propose`]) asks a
//! generation of candidate files; each is applied to the best configuration's compile job,
//! compiled by one compile pool kept across generations, checked and timed by one
//! benchmark worker, and told back; the fastest is then timed against the configuration
//! without an ACF in the finalists' interleaved A/B with its A/A control, and kept only when
//! its whole interval lies below the control's.

use std::path::Path;
use std::time::{Duration, Instant};

use kerntune_device::DeviceInfo;
use kerntune_engine::stats::median;
use kerntune_engine::BackendError;
use kerntune_space::Value;
use kerntune_store::Status;
use serde::{Deserialize, Serialize};

use super::propose::{Candidate, Propose, ProposerWorker, Score};
use super::NO_ACF;
use crate::backend::{compile_now, compile_several, PipelineOptions};
use crate::error::FailureKind;
use crate::finalists::{retime, RetimeOptions, RetimeReport};
use crate::language::Language;
use crate::pool::{CompileLimit, CompilePool};
use crate::process::{Hub, WorkerCommand};
use crate::protocol::CompileJob;
use crate::schedule::BenchSession;

/// Candidate ACF files a search tries when the caller names no number.
pub const DEFAULT_BUDGET: usize = 24;

/// Candidates per generation: CompileIQ asks for 6 or more.
pub const DEFAULT_POOL_SIZE: usize = 6;

/// Failure reasons a report keeps, the first ones.
const KEPT_FAILURES: usize = 5;

/// What the stage is asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlsOptions {
    /// Candidate ACF files, 1 or more.
    pub budget: usize,
    /// Candidates per generation.
    pub pool_size: usize,
    /// The version of the ptxas that reads the files (CompileIQ's search space is per
    /// version).
    pub ptxas_version: String,
    /// The program that runs the proposer, to which `__worker controls` is added:
    /// `python -m kerntune._worker` of a Python with kerntune and compileiq.
    pub worker: Vec<String>,
    /// The interleaved A/B of the fastest candidate against the configuration without one.
    pub ab: RetimeOptions,
}

impl Default for ControlsOptions {
    fn default() -> Self {
        ControlsOptions {
            budget: DEFAULT_BUDGET,
            pool_size: DEFAULT_POOL_SIZE,
            ptxas_version: String::new(),
            worker: vec![crate::process::kerntune_python(), "-m".into(), "kerntune._worker".into()],
            ab: RetimeOptions { finalists: 2, ..RetimeOptions::default() },
        }
    }
}

/// What the stage found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ControlsReport {
    /// Candidates compiled and timed.
    pub evaluations: usize,
    /// Of those, how many failed (compile, check or launch).
    pub failed: usize,
    pub generations: usize,
    /// The fastest candidate, and its time in the search; `None` when every one failed.
    pub best_acf: Option<String>,
    pub best_ms: Option<f64>,
    /// The first failures' reasons.
    pub failures: Vec<String>,
    /// Where the candidates are (kept: a kept ACF is used from there).
    pub directory: String,
    /// The A/B of the configuration without an ACF (the leader) against the fastest
    /// candidate (the contender).
    pub ab: Option<RetimeReport>,
    /// Whether the fastest candidate beat the configuration without one beyond the A/A
    /// control.
    pub kept: bool,
}

impl ControlsReport {
    fn new(directory: &Path) -> ControlsReport {
        ControlsReport {
            evaluations: 0,
            failed: 0,
            generations: 0,
            best_acf: None,
            best_ms: None,
            failures: Vec::new(),
            directory: directory.display().to_string(),
            ab: None,
            kept: false,
        }
    }
}

/// One candidate's outcome: its time in ms, or why it failed.
pub type Outcome = Result<f64, String>;

/// The outcomes of one generation, in its order, or why the stage cannot go on.
pub type Generation = Result<Vec<Outcome>, BackendError>;

/// The ask/tell loop: generations of `proposer`'s candidates, `budget` in all, each
/// generation evaluated by `evaluate` (an outcome per candidate, in order) and told back.
/// `stop` (Ctrl-C) is asked before each generation and during the proposer's answers, and
/// ends the loop with [`BackendError::Interrupted`].
pub fn search(
    proposer: &mut dyn Propose,
    budget: usize,
    directory: &Path,
    evaluate: &mut dyn FnMut(&[Candidate]) -> Generation,
    stop: &dyn Fn() -> bool,
) -> Result<ControlsReport, BackendError> {
    let mut report = ControlsReport::new(directory);
    while report.evaluations < budget {
        if stop() {
            return Err(BackendError::Interrupted);
        }
        let mut asked = proposer.ask(stop)?;
        if asked.is_empty() {
            return Err(BackendError::Protocol("the CompileIQ worker proposed no candidate".into()));
        }
        asked.truncate(budget - report.evaluations);
        let outcomes = evaluate(&asked)?;
        let mut scores = Vec::with_capacity(asked.len());
        for (candidate, outcome) in asked.iter().zip(outcomes) {
            match outcome {
                Ok(time_ms) => {
                    if report.best_ms.is_none_or(|best| time_ms < best) {
                        report.best_ms = Some(time_ms);
                        report.best_acf = Some(candidate.path.display().to_string());
                    }
                    scores.push(Score { id: candidate.id.clone(), time_ms: Some(time_ms) });
                }
                Err(reason) => {
                    report.failed += 1;
                    if report.failures.len() < KEPT_FAILURES {
                        report.failures.push(reason);
                    }
                    scores.push(Score { id: candidate.id.clone(), time_ms: None });
                }
            }
        }
        proposer.tell(scores, stop)?;
        report.evaluations += asked.len();
        report.generations += 1;
    }
    Ok(report)
}

/// `job` with the ACF file `acf` applied, as a configuration's `acf` control would apply
/// it: to the chosen ptxas of CUDA C, to Triton's `ptx_options`.
pub fn with_acf(job: CompileJob, acf: &Path) -> Result<CompileJob, String> {
    let argument = format!("--apply-controls={}", acf.display());
    match job {
        CompileJob::Cuda { ptxas: None, .. } => {
            Err("an ACF file needs a chosen ptxas of its version ([compiler] ptxas)".into())
        }
        CompileJob::Cuda { source, name, options, arch, ptxas: Some(mut step) } => {
            step.args.push(argument);
            Ok(CompileJob::Cuda { source, name, options, arch, ptxas: Some(step) })
        }
        CompileJob::Triton { constexprs, mut options, descriptors, setup } => {
            let words = match options.get("ptx_options").and_then(|v| v.as_str()) {
                Some(own) if !own.is_empty() => format!("{own} {argument}"),
                _ => argument,
            };
            options.insert("ptx_options".into(), words.into());
            Ok(CompileJob::Triton { constexprs, options, descriptors, setup })
        }
    }
}

impl ControlsOptions {
    /// Starts the proposer these options name: a run does so before its search, so that a
    /// missing CompileIQ or search space stops it before any work, in CompileIQ's words.
    pub fn start_proposer(&self, stop: &dyn Fn() -> bool) -> Result<ProposerWorker, BackendError> {
        let command = WorkerCommand::from_argv(&self.worker, Vec::new())
            .ok_or(BackendError::Misuse("the controls search needs a worker program"))?;
        ProposerWorker::start(&command, &self.ptxas_version, self.pool_size, stop)
    }
}

/// The stage on the GPU for the configuration `best` (values in parameter order; `acf_at`:
/// the position of its `acf` parameter, if it has one, which is set to `"none"` so that only
/// the candidate applies), with `proposer` ([`ControlsOptions::start_proposer`]). Starts one
/// compile pool and one benchmark worker set up as the search's were, and keeps them for
/// every generation and the A/B.
#[allow(clippy::too_many_arguments)]
pub fn tune_controls(
    language: &dyn Language,
    proposer: &mut ProposerWorker,
    best: &[Value],
    acf_at: Option<usize>,
    device: &DeviceInfo,
    pipeline: &PipelineOptions,
    options: &ControlsOptions,
    stop: &dyn Fn() -> bool,
) -> Result<ControlsReport, BackendError> {
    let mut values = best.to_vec();
    if let Some(slot) = acf_at.and_then(|at| values.get_mut(at)) {
        *slot = Value::Str(NO_ACF.into());
    }
    let failed =
        |what: &str, e: &dyn std::fmt::Display| BackendError::CannotStart(format!("the controls search: {what}: {e}"));
    let base = language.compile_job(&values, device).map_err(|e| failed("the best configuration", &e))?;
    let timeout = language.compile_timeout();
    let hub = Hub::default();
    let workers = pipeline.compile_workers.clamp(1, options.pool_size.max(2));
    let mut pool = CompilePool::new(&pipeline.compile_worker, workers, CompileLimit::new(timeout, false), &hub, 1)
        .map_err(|e| failed("starting a compile worker", &e))?;
    let mut compile = |job| compile_now(&mut pool, &hub, job, timeout);
    let setup = language.setup(device, &mut compile).map_err(|e| failed("the setup", &e))?;
    let mut session =
        BenchSession::start(&pipeline.bench_worker, pipeline.first_device(), setup, language.launch_timeout())?;
    let deadline = |count: usize| Instant::now() + (timeout + Duration::from_secs(5)) * (count as u32 + 1);
    let directory = proposer.directory.clone();
    let mut evaluate = |asked: &[Candidate]| -> Generation {
        let jobs: Vec<Result<CompileJob, String>> = asked.iter().map(|c| with_acf(base.clone(), &c.path)).collect();
        let ready = jobs.iter().filter_map(|job| job.as_ref().ok().cloned()).collect();
        let mut binaries = compile_several(&mut pool, &hub, ready, deadline(asked.len())).into_iter();
        let mut outcomes = Vec::with_capacity(asked.len());
        for job in jobs {
            if stop() {
                return Err(BackendError::Interrupted);
            }
            let binary = job.and_then(|_| binaries.next().unwrap_or_else(|| Err("not compiled".into())));
            let image = binary.and_then(|binary| language.kernel_image(&values, binary).map_err(|e| e.to_string()));
            outcomes.push(match image {
                Ok(image) => timed(session.evaluate(image, None)?),
                Err(reason) => Err(format!("{}: {reason}", FailureKind::CompileFailed.status())),
            });
        }
        Ok(outcomes)
    };
    let mut report = search(proposer, options.budget, &directory, &mut evaluate, stop)?;
    let Some(acf) = report.best_acf.clone() else { return Ok(report) };
    let jobs = vec![base.clone(), with_acf(base, Path::new(&acf)).map_err(|e| failed("the fastest candidate", &e))?];
    let mut images = Vec::with_capacity(2);
    for binary in compile_several(&mut pool, &hub, jobs, deadline(2)) {
        let binary = binary.map_err(|e| failed("compiling the A/B", &e))?;
        images.push(language.kernel_image(&values, binary).map_err(|e| failed("the A/B", &e))?);
    }
    let ab = retime(std::slice::from_mut(&mut session), &images, &options.ab, stop)?;
    report.kept = ab.winner == 1;
    report.ab = Some(ab);
    Ok(report)
}

/// A candidate's time (the median of its samples) when it passed its check, else why not.
fn timed(result: crate::protocol::EvaluateResult) -> Outcome {
    if result.status == Status::Ok && !result.samples.is_empty() {
        return Ok(median(&result.samples));
    }
    Err(format!("{}: {}", result.status, result.reason.unwrap_or_default()).trim_end_matches(": ").to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::path::PathBuf;

    use super::*;

    /// A proposer of fixed generations that records what it was told.
    struct Scripted {
        generations: VecDeque<Vec<Candidate>>,
        told: Vec<Vec<Score>>,
    }

    impl Propose for Scripted {
        fn ask(&mut self, _: &dyn Fn() -> bool) -> Result<Vec<Candidate>, BackendError> {
            Ok(self.generations.pop_front().unwrap_or_default())
        }
        fn tell(&mut self, scores: Vec<Score>, _: &dyn Fn() -> bool) -> Result<(), BackendError> {
            self.told.push(scores);
            Ok(())
        }
    }

    fn candidates(names: &[&str]) -> Vec<Candidate> {
        names.iter().map(|n| Candidate { id: n.to_string(), path: PathBuf::from(format!("/acf/{n}.acf")) }).collect()
    }

    /// A candidate named `f-...` fails; another takes its number of ms (`7a` -> 7).
    fn outcome(candidate: &Candidate) -> Outcome {
        match candidate.id.strip_prefix("f-") {
            Some(_) => Err(format!("compile_failed: {} is unreadable", candidate.id)),
            None => Ok(candidate.id.trim_end_matches(char::is_alphabetic).parse().expect("a number")),
        }
    }

    #[test]
    fn the_loop_tells_each_generation_its_times_and_stops_at_the_budget() {
        let mut proposer = Scripted {
            generations: VecDeque::from([candidates(&["9a", "f-b", "5c"]), candidates(&["7d", "3e", "1f"])]),
            told: Vec::new(),
        };
        let mut evaluated = Vec::new();
        let mut evaluate = |asked: &[Candidate]| {
            evaluated.push(asked.len());
            Ok(asked.iter().map(outcome).collect())
        };
        let report = search(&mut proposer, 5, Path::new("/acf"), &mut evaluate, &|| false).expect("searches");
        assert_eq!(evaluated, [3, 2], "the last generation is cut to the budget");
        assert_eq!((report.evaluations, report.generations, report.failed), (5, 2, 1));
        assert_eq!(report.best_acf.as_deref(), Some("/acf/3e.acf"));
        assert_eq!(report.best_ms, Some(3.0));
        assert_eq!(report.failures, ["compile_failed: f-b is unreadable"]);
        let told: Vec<Vec<(String, Option<f64>)>> =
            proposer.told.iter().map(|g| g.iter().map(|s| (s.id.clone(), s.time_ms)).collect()).collect();
        assert_eq!(
            told,
            [
                vec![("9a".into(), Some(9.0)), ("f-b".into(), None), ("5c".into(), Some(5.0))],
                vec![("7d".into(), Some(7.0)), ("3e".into(), Some(3.0))]
            ]
        );
    }

    #[test]
    fn ctrl_c_ends_the_search_before_the_next_generation() {
        let mut proposer = Scripted {
            generations: VecDeque::from([candidates(&["9a", "5b"]), candidates(&["7c", "3d"])]),
            told: Vec::new(),
        };
        let asked_to_stop = std::cell::Cell::new(false);
        let mut evaluate = |asked: &[Candidate]| {
            asked_to_stop.set(true);
            Ok(asked.iter().map(outcome).collect())
        };
        let outcome = search(&mut proposer, 4, Path::new("/acf"), &mut evaluate, &|| asked_to_stop.get());
        assert!(matches!(outcome, Err(BackendError::Interrupted)), "{outcome:?}");
        assert_eq!(proposer.told.len(), 1, "the generation evaluated is told; no other is asked");
        assert_eq!(proposer.generations.len(), 1);
    }

    #[test]
    fn a_proposer_that_proposes_nothing_ends_the_search_instead_of_looping() {
        let mut proposer = Scripted { generations: VecDeque::new(), told: Vec::new() };
        let mut evaluate = |_: &[Candidate]| -> Generation { Ok(Vec::new()) };
        let error = search(&mut proposer, 4, Path::new("/acf"), &mut evaluate, &|| false).expect_err("nothing asked");
        assert!(error.to_string().contains("proposed no candidate"), "{error}");
    }

    #[test]
    fn a_front_names_the_budget_the_ptxas_and_its_worker_and_the_rest_takes_its_defaults() {
        let json = r#"{"budget": 8, "ptxas_version": "13.3.73", "worker": ["python3", "-m", "kerntune._worker"]}"#;
        let options: ControlsOptions = serde_json::from_str(json).expect("parses");
        assert_eq!((options.budget, options.pool_size, options.ab.finalists), (8, DEFAULT_POOL_SIZE, 2));
        assert_eq!(options.worker, ["python3", "-m", "kerntune._worker"]);
        let typo = serde_json::from_str::<ControlsOptions>(r#"{"budgett": 8}"#).expect_err("unknown field");
        assert!(typo.to_string().contains("budgett"), "{typo}");
    }

    #[test]
    fn an_acf_reaches_the_chosen_ptxas_of_cuda_and_the_ptx_options_of_triton() {
        let step = crate::protocol::PtxasStep {
            path: "/ptxas".into(),
            version: "13.3.73".into(),
            args: vec!["-O1".into()],
            prefix: None,
        };
        let cuda = |ptxas| CompileJob::Cuda {
            source: String::new(),
            name: "k".into(),
            options: Vec::new(),
            arch: "sm_90".into(),
            ptxas,
        };
        let CompileJob::Cuda { ptxas: Some(step), .. } = with_acf(cuda(Some(step)), Path::new("/a.acf")).expect("cuda")
        else {
            panic!("a CUDA job stays one")
        };
        assert_eq!(step.args, ["-O1", "--apply-controls=/a.acf"]);
        assert!(with_acf(cuda(None), Path::new("/a.acf")).expect_err("no ptxas").contains("chosen ptxas"));
        let mut options = serde_json::Map::new();
        options.insert("ptx_options".into(), "-O1".into());
        let triton = CompileJob::Triton {
            constexprs: serde_json::Map::new(),
            options,
            descriptors: serde_json::Map::new(),
            setup: None,
        };
        let CompileJob::Triton { options, .. } = with_acf(triton, Path::new("/a.acf")).expect("triton") else {
            panic!("a Triton job stays one")
        };
        assert_eq!(options["ptx_options"], "-O1 --apply-controls=/a.acf");
    }
}
