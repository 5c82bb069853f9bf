//! The finalists' re-timing goes on with the search's own workers when the search hands
//! them on, and starts fresh ones when it cannot; a kept crew serves the next tuning. Fake
//! workers (shell scripts that speak
//! the protocol and count their starts) stand in for the compiler and the GPU, so this
//! runs anywhere. The GPUs set up while the search starts.

mod common;

use std::path::Path;

use common::{gpu, Fake};
use kerntune_engine::{Backend, BackendError};
use kerntune_pipeline::finalists::{retime_configs, RetimeOptions};
use kerntune_pipeline::protocol::SetupTimes;
use kerntune_pipeline::{Pipeline, PipelineOptions, WorkerCommand};
use kerntune_space::{ConfigId, Param, Space, Value};

/// Rounds of each interleaved pair; the fake benchmark worker answers this many samples.
const ROUNDS: u32 = 10;

/// A benchmark worker that appends a line to `$STARTS` when it starts and at each setup,
/// says it is ready on `$DEVICE`, finishes any setup, measures every kernel at 1 ms, and times every
/// interleaved pair at 1 ms each (answering at once).
fn fake_bench(starts: &Path) -> WorkerCommand {
    fake_bench_taking(starts, 0)
}

/// The same, taking `seconds` over each interleaved pair.
fn fake_bench_taking(starts: &Path, seconds: u32) -> WorkerCommand {
    fake_bench_with(starts, seconds, 0)
}

/// The same, exiting without a word at its `die_at_setup`-th setup (0: never).
fn fake_bench_with(starts: &Path, seconds: u32, die_at_setup: u32) -> WorkerCommand {
    let script = r#"
        echo bench >> "$STARTS"
        setups=0
        printf '{"type":"ready","device":%s}\n' "$DEVICE"
        while read -r line; do
            id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
            case "$line" in
                *'"type":"setup"'*)
                    setups=$((setups + 1))
                    [ "$setups" = "$DIE_AT_SETUP" ] && exit 1
                    echo setup >> "$STARTS"; echo '{"type":"setup_done"}' ;;
                *'"type":"evaluate"'*)
                    printf '{"type":"result","id":%s,"status":"ok","reason":null,"samples":[1.0,1.0,1.0],"verify_s":0.0,"verify_kernel_ms":0.0,"benchmark_s":0.0,"attributes":null,"context_lost":false}\n' "$id" ;;
                *'"type":"interleave"'*)
                    sleep "$INTERLEAVE_S"
                    printf '{"type":"interleaved","a":%s,"b":%s}\n' "$SAMPLES" "$SAMPLES" ;;
            esac
        done"#;
    let device = serde_json::to_string(&gpu()).unwrap_or_else(|e| panic!("{e}"));
    let samples = serde_json::to_string(&vec![1.0; ROUNDS as usize]).unwrap_or_else(|e| panic!("{e}"));
    let env = vec![
        ("STARTS".to_string(), starts.display().to_string()),
        ("DEVICE".to_string(), device),
        ("SAMPLES".to_string(), samples),
        ("INTERLEAVE_S".to_string(), seconds.to_string()),
        ("DIE_AT_SETUP".to_string(), die_at_setup.to_string()),
    ];
    WorkerCommand::from_argv(&["sh".into(), "-c".into(), script.into()], env).unwrap_or_else(|| panic!("a command"))
}

/// A compile worker that appends a line to `$STARTS` when it starts and compiles every
/// request to a one-byte binary.
fn fake_compiler(starts: &Path) -> WorkerCommand {
    fake_compiler_taking(starts, "0")
}

/// As [`fake_compiler`], each compile taking `seconds`.
fn fake_compiler_taking(starts: &Path, seconds: &str) -> WorkerCommand {
    let script = r#"
        echo compile >> "$STARTS"
        while read -r line; do
            id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
            sleep "$COMPILE_S"
            printf '{"type":"compiled","id":%s,"cubin":"AA==","seconds":0.0}\n' "$id"
        done"#;
    let env = vec![("STARTS".to_string(), starts.display().to_string()), ("COMPILE_S".to_string(), seconds.into())];
    WorkerCommand::from_argv(&["sh".into(), "-c".into(), script.into()], env).unwrap_or_else(|| panic!("a command"))
}

static FAKE: Fake = Fake { ptxas: None, first_compile_workers: None };

fn space() -> Space {
    let values = (1..=4).map(Value::Int).collect();
    let param = Param::new("x", values).unwrap_or_else(|e| panic!("{e}"));
    Space::new(vec![param], &[] as &[&str]).unwrap_or_else(|e| panic!("{e}"))
}

fn options(dir: &Path, devices: Vec<usize>) -> PipelineOptions {
    let starts = dir.join("starts");
    PipelineOptions {
        bench_worker: fake_bench(&starts),
        compile_worker: fake_compiler(&starts),
        devices,
        compile_workers: 2,
    }
}

/// How many workers of each kind started so far: (benchmark, compile).
fn starts(dir: &Path) -> (usize, usize) {
    (logged(dir, "bench"), logged(dir, "compile"))
}

/// How many times the workers logged `what`.
fn logged(dir: &Path, what: &str) -> usize {
    let text = std::fs::read_to_string(dir.join("starts")).unwrap_or_default();
    text.lines().filter(|l| *l == what).count()
}

/// Evaluates the first `count` configurations.
fn evaluate(pipeline: &mut Pipeline<'_>, count: u32) {
    for id in 0..count {
        pipeline.submit(ConfigId(id)).unwrap_or_else(|e| panic!("{e}"));
    }
    for _ in 0..count {
        let (_, evaluation) = pipeline.next().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(evaluation.status, kerntune_store::Status::Ok, "{evaluation:?}");
    }
}

fn retime_options() -> RetimeOptions {
    RetimeOptions { rounds: ROUNDS, blocks: 5, ..RetimeOptions::default() }
}

/// The first configurations of the space, in parameter order, as finalists.
fn finalists(space: &Space, count: u32) -> Vec<Vec<Value>> {
    (0..count).map(|id| space.values(ConfigId(id)).into_iter().cloned().collect()).collect()
}

#[test]
fn the_finalists_are_timed_on_the_search_s_own_workers_and_spread_over_its_gpus() {
    for gpus in [1, 2, 4] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let space = space();
        let options = options(dir.path(), (0..gpus).collect());
        let mut pipeline = Pipeline::start(&FAKE, &space, options.clone()).unwrap_or_else(|e| panic!("{e}"));
        evaluate(&mut pipeline, 4);
        assert_eq!(starts(dir.path()), (gpus, 2), "the search's workers");

        let warm = pipeline.into_crew();
        let (report, _) =
            retime_configs(&FAKE, &finalists(&space, 3), &gpu(), &options, &retime_options(), warm, &|| false)
                .unwrap_or_else(|e| panic!("{e}"));
        assert!(report.reused_search_workers, "{gpus} GPUs");
        assert_eq!(report.contenders.len(), 2, "each contender against the leader");
        // With two GPUs the pairs are spread over both, each on the search's own worker
        // there: nothing starts. With four, each GPU times a quarter of the 30 rounds (7 or
        // 8), some of them parts of blocks.
        assert_eq!(report.gpus, gpus);
        assert_eq!(starts(dir.path()), (gpus, 2), "no worker started");
    }
}

#[test]
fn with_an_evaluation_not_yet_taken_the_finalists_get_fresh_workers() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let space = space();
    let options = options(dir.path(), vec![0]);
    let mut pipeline = Pipeline::start(&FAKE, &space, options.clone()).unwrap_or_else(|e| panic!("{e}"));
    for id in 0..2 {
        pipeline.submit(ConfigId(id)).unwrap_or_else(|e| panic!("{e}"));
    }
    pipeline.next().unwrap_or_else(|e| panic!("{e}"));

    let warm = pipeline.into_crew();
    assert!(warm.is_none(), "an evaluation is still out");
    let (report, _) =
        retime_configs(&FAKE, &finalists(&space, 2), &gpu(), &options, &retime_options(), warm, &|| false)
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(!report.reused_search_workers, "the search still had an evaluation out");
    assert_eq!(report.contenders.len(), 1);
    let (bench, compile) = starts(dir.path());
    assert_eq!(bench, 2, "a fresh benchmark worker");
    assert!(compile > 2, "fresh compile workers: {compile}");
}

#[test]
fn ctrl_c_while_the_finalists_are_timed_again_ends_the_wait_within_half_a_second() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let space = space();
    let mut options = options(dir.path(), vec![0]);
    options.bench_worker = fake_bench_taking(&dir.path().join("starts"), 30);
    let asked = std::time::Instant::now();
    let stop = || asked.elapsed() > std::time::Duration::from_millis(300);
    let outcome = retime_configs(&FAKE, &finalists(&space, 2), &gpu(), &options, &retime_options(), None, &stop);
    assert!(matches!(outcome, Err(kerntune_engine::BackendError::Interrupted)), "{outcome:?}");
    // The worker takes 30 s a pair: the wait ended at the first look after the stop.
    assert!(asked.elapsed() < std::time::Duration::from_secs(5), "{:?}", asked.elapsed());
}

#[test]
fn a_kept_crew_serves_the_next_tuning_with_no_worker_started_again() {
    for gpus in [1, 2] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let space = space();
        let options = options(dir.path(), (0..gpus).collect());
        let mut first = Pipeline::start(&FAKE, &space, options.clone()).unwrap_or_else(|e| panic!("{e}"));
        evaluate(&mut first, 3);
        let crew = first.into_crew().unwrap_or_else(|| panic!("idle workers"));
        let (report, crew) =
            retime_configs(&FAKE, &finalists(&space, 2), &gpu(), &options, &retime_options(), Some(crew), &|| false)
                .unwrap_or_else(|e| panic!("{e}"));
        assert!(report.reused_search_workers);
        let crew = crew.unwrap_or_else(|| panic!("the finalists hand the workers back"));
        assert!(crew.fits(&options), "{gpus} GPUs: every GPU's worker is handed back");
        let (started, set_up) = (starts(dir.path()), logged(dir.path(), "setup"));

        // The next tuning: the same workers, each benchmark worker set up again.
        let mut next =
            Pipeline::start_with(&FAKE, &space, options.clone(), Some(crew)).unwrap_or_else(|e| panic!("{e}"));
        evaluate(&mut next, 4);
        // The crew waits for a GPU still setting up (the other may have measured all four).
        let crew = next.into_crew().unwrap_or_else(|| panic!("idle workers"));
        assert_eq!(starts(dir.path()), started, "{gpus} GPUs: no worker started again");
        assert_eq!(logged(dir.path(), "setup"), set_up + gpus, "each benchmark worker set up again");

        // A tuning that may have more compile workers takes the pool as it is (it grows
        // when compiles hold the GPUs back); one that may have fewer starts fresh workers.
        assert!(crew.fits(&PipelineOptions { compile_workers: 3, ..options.clone() }));
        let narrower = PipelineOptions { compile_workers: 1, ..options.clone() };
        assert!(!crew.fits(&narrower));
        let mut other = Pipeline::start_with(&FAKE, &space, narrower, Some(crew)).unwrap_or_else(|e| panic!("{e}"));
        evaluate(&mut other, 1);
        assert_eq!(starts(dir.path()), (started.0 + gpus, started.1 + 1), "{gpus} GPUs: a fresh start");
    }
}

#[test]
fn a_pool_started_small_grows_while_gpus_wait_for_its_compiles() {
    // A language that starts one compile worker where the options allow four: with two
    // GPUs (set up at once) and compiles (0.2 s each) queued behind the one warm worker, a
    // GPU waits, so the pool grows, never past the options' four.
    static STARTS_ONE: Fake = Fake { ptxas: None, first_compile_workers: Some(1) };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let space = space();
    let slow = fake_compiler_taking(&dir.path().join("starts"), "0.2");
    let options = PipelineOptions { compile_workers: 4, compile_worker: slow, ..options(dir.path(), vec![0, 1]) };
    let mut pipeline = Pipeline::start(&STARTS_ONE, &space, options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pipeline.compile_workers(), 1, "one compile worker to start with");
    assert_eq!(pipeline.capacity(), 4 + 2 * 2, "in flight: as many as the whole pool would take");
    evaluate(&mut pipeline, 4);
    let grown = pipeline.compile_workers();
    assert!(grown > 1 && grown <= 4, "{grown} compile workers");
    assert_eq!(starts(dir.path()).1, grown);
}

#[test]
fn workers_started_ahead_are_set_up_by_the_tuning_that_takes_them() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let space = space();
    let options = options(dir.path(), vec![0, 1]);
    let crew = kerntune_pipeline::Crew::start(&options).unwrap_or_else(|e| panic!("{e}"));
    assert!(crew.fits(&options));
    let mut pipeline =
        Pipeline::start_with(&FAKE, &space, options.clone(), Some(crew)).unwrap_or_else(|e| panic!("{e}"));
    evaluate(&mut pipeline, 4);
    assert!(pipeline.startup.reused);
    // Both GPUs set up by the time the crew is handed on (one may have measured all four).
    pipeline.into_crew().unwrap_or_else(|| panic!("idle workers"));
    assert_eq!(starts(dir.path()), (2, 2), "the workers started ahead, and no other");
    assert_eq!(logged(dir.path(), "setup"), 2);
}

#[test]
fn a_kept_worker_that_died_since_is_replaced_and_the_tuning_goes_on() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let space = space();
    let mut options = options(dir.path(), vec![0]);
    options.bench_worker = fake_bench_with(&dir.path().join("starts"), 0, 2);
    let mut first = Pipeline::start(&FAKE, &space, options.clone()).unwrap_or_else(|e| panic!("{e}"));
    evaluate(&mut first, 2);
    let crew = first.into_crew().unwrap_or_else(|| panic!("idle workers"));
    let (bench, compile) = starts(dir.path());
    // Its benchmark worker exits at the next setup: a fresh one takes its place, set up
    // with this tuning's data, beside the crew's compile workers.
    let mut next = Pipeline::start_with(&FAKE, &space, options, Some(crew)).unwrap_or_else(|e| panic!("{e}"));
    evaluate(&mut next, 2);
    assert!(next.startup.reused, "the crew's compile workers go on");
    assert_eq!(starts(dir.path()), (bench + 1, compile), "a second benchmark worker, no other compile worker");
}

#[test]
fn the_gpus_set_up_while_the_search_starts_and_a_setup_that_fails_fails_the_run_in_one_line() {
    // The benchmark worker takes a second to set up: the pipeline starts at once, and the
    // first evaluation comes once the setup is done.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let space = space();
    let slow = r#"
        printf '{"type":"ready","device":%s}\n' "$DEVICE"
        while read -r line; do
            id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
            case "$line" in
                *'"type":"setup"'*) sleep 1; echo '{"type":"setup_done","times":{"seconds":1.0,"drawing_s":0.25}}' ;;
                *'"type":"evaluate"'*)
                    printf '{"type":"result","id":%s,"status":"ok","reason":null,"samples":[1.0,1.0,1.0],"verify_s":0.0,"verify_kernel_ms":0.0,"benchmark_s":0.0,"attributes":null,"context_lost":false}\n' "$id" ;;
            esac
        done"#;
    let failing = r#"
        printf '{"type":"ready","device":%s}\n' "$DEVICE"
        read -r line
        echo '{"type":"fatal","message":"the reference leaves 3 NaN elements in output #0 (first at 7)"}'"#;
    let device = serde_json::to_string(&gpu()).unwrap_or_else(|e| panic!("{e}"));
    let bench = |script: &str| {
        WorkerCommand::from_argv(&["sh".into(), "-c".into(), script.into()], vec![("DEVICE".into(), device.clone())])
            .unwrap_or_else(|| panic!("a command"))
    };
    let options = PipelineOptions { bench_worker: bench(slow), ..options(dir.path(), vec![0]) };
    let clock = std::time::Instant::now();
    let mut pipeline = Pipeline::start(&FAKE, &space, options.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert!(clock.elapsed().as_secs_f64() < 0.9, "started without waiting for the setup");
    assert_eq!(pipeline.startup.ready_s, None);
    evaluate(&mut pipeline, 2);
    assert!(pipeline.startup.ready_s.is_some_and(|s| s >= 1.0), "{:?}", pipeline.startup);
    assert_eq!(pipeline.startup.setup, Some(SetupTimes { seconds: 1.0, drawing_s: 0.25 }), "where the setup went");

    let options = PipelineOptions { bench_worker: bench(failing), ..options };
    let mut pipeline = Pipeline::start(&FAKE, &space, options).unwrap_or_else(|e| panic!("{e}"));
    pipeline.submit(ConfigId(0)).unwrap_or_else(|e| panic!("{e}"));
    let error = pipeline.next().expect_err("the setup failed");
    assert_eq!(
        error,
        BackendError::CannotStart(
            "setting up GPU #0: the reference leaves 3 NaN elements in output #0 (first at 7)".into()
        )
    );
}
