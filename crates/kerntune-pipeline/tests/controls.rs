//! The compiler-controls stage in one process: CompileIQ's ask/tell loop runs in the stage,
//! with CompileIQ in one Python worker for the whole search (`kerntune._compileiq.serve`,
//! the real module), NVIDIA's package replaced by the fake in
//! `tests/python/fake_compileiq`, and shell scripts that speak the protocol standing in for
//! the compiler and the GPU. The fake logs every ask and tell with its process id, so the
//! test sees one proposer process and the times it was told.

mod common;

use std::path::{Path, PathBuf};

use common::{gpu, Fake};
use kerntune_pipeline::controls::{tune_controls, ControlsOptions, ControlsReport};
use kerntune_pipeline::finalists::RetimeOptions;
use kerntune_pipeline::protocol::PtxasStep;
use kerntune_pipeline::{PipelineOptions, WorkerCommand};
use kerntune_space::Value;

const ROUNDS: u32 = 10;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Appends `kind` to `$STARTS` when it starts, then runs `body` over the lines it reads.
fn fake_worker(kind: &str, body: &str, env: Vec<(String, String)>) -> WorkerCommand {
    let script = format!("echo {kind} >> \"$STARTS\"\nwhile read -r line; do\n  id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([0-9]*\\).*/\\1/p')\n{body}\ndone");
    WorkerCommand::from_argv(&["sh".into(), "-c".into(), script], env).unwrap_or_else(|| panic!("a command"))
}

/// A compiler that fails the candidate `1.acf` (an ACF ptxas rejects) and compiles the rest:
/// a job with an ACF to the binary `[1]`, one without to `[0]`.
fn fake_compiler(starts: &Path) -> WorkerCommand {
    let body = r#"  case "$line" in
    *'/1.acf'*) printf '{"type":"failed","id":%s,"kind":"compile_failed","message":"Invalid compiler controls file","seconds":0.0}\n' "$id" ;;
    *apply-controls*) printf '{"type":"compiled","id":%s,"cubin":"AQ==","seconds":0.0}\n' "$id" ;;
    *) printf '{"type":"compiled","id":%s,"cubin":"AA==","seconds":0.0}\n' "$id" ;;
  esac"#;
    fake_worker("compile", body, vec![("STARTS".into(), starts.display().to_string())])
}

/// A GPU that measures every kernel at 2 ms, and in an interleaved pair the first at 2 ms
/// and the second at `second_ms` when it has an ACF (the binary `[1]`).
fn fake_bench(starts: &Path, second_ms: f64) -> WorkerCommand {
    let body = r#"  case "$line" in
    *'"type":"setup"'*) echo '{"type":"setup_done"}' ;;
    *'"type":"evaluate"'*) printf '{"type":"result","id":%s,"status":"ok","reason":null,"samples":[2.0,2.0,2.0],"verify_s":0.0,"verify_kernel_ms":0.0,"benchmark_s":0.0,"attributes":null,"context_lost":false}\n' "$id" ;;
    *'"type":"interleave"'*'"AQ=="'*) printf '{"type":"interleaved","a":%s,"b":%s}\n' "$SAMPLES" "$SECOND" ;;
    *'"type":"interleave"'*) printf '{"type":"interleaved","a":%s,"b":%s}\n' "$SAMPLES" "$SAMPLES" ;;
  esac"#;
    let device = serde_json::to_string(&gpu()).unwrap_or_else(|e| panic!("{e}"));
    let samples = serde_json::to_string(&vec![2.0; ROUNDS as usize]).unwrap_or_else(|e| panic!("{e}"));
    let ready = format!("printf '%s\\n' '{{\"type\":\"ready\",\"device\":{device}}}'\n");
    let second = serde_json::to_string(&vec![second_ms; ROUNDS as usize]).unwrap_or_else(|e| panic!("{e}"));
    let env =
        vec![("STARTS".into(), starts.display().to_string()), ("SAMPLES".into(), samples), ("SECOND".into(), second)];
    let mut command = fake_worker("bench", body, env);
    command.args[1] = command.args[1].replacen("while", &format!("{ready}while"), 1);
    command
}

/// `kerntune._compileiq.serve` under the system's Python, with the fake CompileIQ.
fn proposer(log: &Path, search_space: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let module = repository().join("python/kerntune");
    let script = format!(
        "import sys; sys.path.insert(0, {:?}); import _compileiq; sys.exit(_compileiq.serve(sys.argv[3:]))",
        module.display().to_string()
    );
    let env = vec![
        ("PYTHONPATH".into(), repository().join("tests/python/fake_compileiq").display().to_string()),
        ("FAKE_COMPILEIQ_LOG".into(), log.display().to_string()),
        ("KERNTUNE_CIQ_SEARCH_SPACE".into(), search_space.display().to_string()),
    ];
    (vec!["python3".into(), "-c".into(), script], env)
}

fn log_entries(log: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))).collect()
}

/// The stage over 8 candidates in `dir`, the fastest candidate timed at `candidate_ms`
/// against the best's 2 ms in the A/B.
fn run_stage(dir: &Path, candidate_ms: f64) -> ControlsReport {
    let (starts, log, space) = (dir.join("starts"), dir.join("log"), dir.join("ptxas13.3.bin"));
    std::fs::write(&space, b"search space").unwrap_or_else(|e| panic!("{e}"));
    let pipeline = PipelineOptions {
        bench_worker: fake_bench(&starts, candidate_ms),
        compile_worker: fake_compiler(&starts),
        devices: vec![0],
        compile_workers: 2,
    };
    // The stage runs an argv in the run's environment: `env` sets the fake's variables.
    let (argv, env) = proposer(&log, &space);
    let worker =
        std::iter::once("env".to_string()).chain(env.iter().map(|(k, v)| format!("{k}={v}"))).chain(argv).collect();
    let options = ControlsOptions {
        budget: 8,
        pool_size: 6,
        ptxas_version: "13.3.73".into(),
        worker,
        ab: RetimeOptions { finalists: 2, rounds: ROUNDS, blocks: 5, ..RetimeOptions::default() },
    };
    let best = [Value::Int(64), Value::Str("tuned.acf".into())];
    // A CUDA C kernel assembled by a chosen ptxas, to which each candidate's ACF is added.
    let language = Fake {
        ptxas: Some(PtxasStep { path: "/ptxas".into(), version: "13.3.73".into(), args: vec![], prefix: None }),
        first_compile_workers: None,
    };
    let mut proposer = options.start_proposer(&|| false).unwrap_or_else(|e| panic!("{e}"));
    tune_controls(&language, &mut proposer, &best, Some(1), &gpu(), &pipeline, &options, &|| false)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn compileiq_proposes_from_one_process_and_is_told_every_generations_times() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (starts, log) = (dir.path().join("starts"), dir.path().join("log"));
    let report = run_stage(dir.path(), 2.0);

    assert_eq!((report.evaluations, report.generations, report.failed), (8, 2, 1), "{report:?}");
    assert_eq!(report.failures, ["compile_failed: Invalid compiler controls file"]);
    assert_eq!(report.best_ms, Some(2.0));
    let best_acf = report.best_acf.clone().unwrap_or_else(|| panic!("a best candidate"));
    assert_eq!(std::fs::read(&best_acf).unwrap_or_else(|e| panic!("{e}")), b"acf 0", "the first of the fastest");
    let ab = report.ab.as_ref().unwrap_or_else(|| panic!("an A/B"));
    assert_eq!(ab.contenders.len(), 1, "the fastest candidate against the best without one");
    assert!(!report.kept, "alike within the A/A control: no ACF kept");

    let entries = log_entries(&log);
    let pids: std::collections::HashSet<_> = entries.iter().map(|e| e["pid"].clone()).collect();
    assert_eq!(pids.len(), 1, "one CompileIQ process for the whole search: {entries:?}");
    assert_ne!(entries[0]["pid"], serde_json::json!(std::process::id()));
    let tells: Vec<&serde_json::Value> = entries.iter().filter(|e| e["call"] == "tell").map(|e| &e["scores"]).collect();
    assert_eq!(tells.len(), 2, "{entries:?}");
    let first = serde_json::json!({"0": 2.0, "1": "*", "2": 2.0, "3": 2.0, "4": 2.0, "5": 2.0});
    assert_eq!(tells[0], &first, "a failure is CompileIQ's \"*\"");
    assert_eq!(tells[1], &serde_json::json!({"6": 2.0, "7": 2.0}), "the last generation cut to the budget");
    let (benches, compilers) = {
        let text = std::fs::read_to_string(&starts).unwrap_or_default();
        (text.lines().filter(|l| *l == "bench").count(), text.lines().filter(|l| *l == "compile").count())
    };
    assert_eq!((benches, compilers), (1, 2), "one benchmark worker and one compile pool for every generation");
}

#[test]
fn a_proposer_that_cannot_search_stops_the_stage_with_its_own_one_line_reason() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let missing = dir.path().join("gone.bin");
    let (argv, env) = proposer(&dir.path().join("log"), &missing);
    let command = WorkerCommand::from_argv(&argv, env).unwrap_or_else(|| panic!("a command"));
    let error = kerntune_pipeline::controls::ProposerWorker::start(&command, "13.3.73", 6, &|| false)
        .expect_err("no search space");
    assert_eq!(error.to_string(), format!("CompileIQ search space {}: no such file", missing.display()));
}

#[test]
fn the_fastest_candidate_is_kept_only_when_it_overtakes_the_best_beyond_the_aa_control() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let report = run_stage(dir.path(), 1.8);
    let ab = report.ab.as_ref().unwrap_or_else(|| panic!("an A/B"));
    assert_eq!((ab.winner, ab.contenders[0].ratio), (1, 0.9), "the candidate, 10% faster, overtakes the best");
    assert!(report.kept, "{report:?}");
}
