//! The `kerntune` command as a user runs it: outputs, exit codes, interruption and resume.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{json_of, kerntune, kerntune_binary, repo};
use kerntune_store::Store;
use serde_json::Value as Json;

/// The recorded landscapes of `../shared/data/landscapes`, which CI has beside the
/// checkout. Elsewhere the test says it is skipped, unless `KERNTUNE_REQUIRE_SHARED` is set
/// (as CI sets it), in which case their absence fails the test.
fn shared_landscapes() -> Option<Vec<PathBuf>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/landscapes");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
                .collect()
        })
        .unwrap_or_default();
    if files.is_empty() {
        assert!(std::env::var_os("KERNTUNE_REQUIRE_SHARED").is_none(), "{} has no landscapes", dir.display());
        eprintln!("skipped: {} is not present", dir.display());
        return None;
    }
    Some(files)
}

/// The landscapes kerntune recorded on an H100, committed in data/landscapes/h100/SET/.
fn recorded_h100() -> Vec<PathBuf> {
    let sets = std::fs::read_dir(repo("data/landscapes/h100")).expect("data/landscapes/h100 is committed");
    let mut files: Vec<PathBuf> = sets
        .filter_map(|set| set.ok().map(|set| set.path()))
        .filter(|set| set.is_dir())
        .flat_map(|set| std::fs::read_dir(set).expect("a set folder").filter_map(|f| f.ok().map(|f| f.path())))
        .filter(|f| f.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    files
}

#[test]
fn brute_force_reports_each_landscapes_minimum_valid_time() {
    let mut files = vec![PathBuf::from(repo("data/landscapes/pnpoly_RTX_3090.json.gz"))];
    let h100 = recorded_h100();
    assert_eq!(h100.len(), 25, "{h100:?}");
    files.extend(h100);
    files.extend(shared_landscapes().unwrap_or_default());
    for file in files {
        let file = file.display().to_string();
        let expected = minimum_valid_time(&file);
        let result = json_of(&kerntune(&["simulate", &file, "--strategy", "brute_force", "--json"]));
        assert_eq!(result["best"]["objective"].as_f64(), Some(expected), "{file}");
        assert_eq!(result["stop"], "exhausted");
    }
}

/// The minimum over numeric `time` entries, read with Python independently of kerntune.
fn minimum_valid_time(file: &str) -> f64 {
    let script = "import gzip, json, sys\n\
                  d = json.load(gzip.open(sys.argv[1]))\n\
                  if 'cache' in d: print(repr(min(v['time'] for v in d['cache'].values() if isinstance(v['time'], (int, float)))))\n\
                  else: print(repr(min(m['value'] for r in d['results'] if r['invalidity'] == 'correct' for m in r['measurements'] if m['name'] == 'time')))";
    let output = Command::new("python3").args(["-c", script, file]).output().expect("python3 runs");
    String::from_utf8_lossy(&output.stdout).trim().parse().expect("a number")
}

/// Issue 13, item 3: without a budget, `default` stops by itself and says why.
#[test]
fn simulate_without_a_budget_stops_by_itself_and_says_why() {
    let landscape = repo("data/landscapes/convolution_A4000_T4.json.gz");
    let output = kerntune(&["simulate", &landscape, "--seed", "0"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("budget none: stops when more evaluations are unlikely to pay"), "{text}");
    assert!(text.contains("stopped: converged: more evaluations are unlikely to beat the best"), "{text}");
}

#[test]
fn simulate_json_is_one_object_with_the_documented_fields() {
    let result = json_of(&kerntune(&["simulate", "--strategy", "random_sample", "--max-fevals", "30", "--json"]));
    assert_eq!(result["evaluations"], 30);
    assert!(result["failed"].is_u64() && result["best"]["config"].is_object() && result["best"]["objective"].is_f64());
    let trace = result["trace"].as_array().expect("trace");
    assert_eq!(trace.len(), 30);
    for (i, point) in trace.iter().enumerate() {
        assert_eq!(point["feval"], i + 1);
        for key in ["objective", "best", "elapsed_s"] {
            assert!(point.get(key).is_some(), "{key} missing");
        }
    }
}

#[test]
fn random_sample_with_the_same_seed_gives_identical_traces() {
    let run = |seed: &str| {
        json_of(&kerntune(&["simulate", "--strategy", "random_sample", "--max-fevals", "60", "--seed", seed, "--json"]))
    };
    assert_eq!(run("4")["trace"], run("4")["trace"]);
    assert_ne!(run("4")["trace"], run("5")["trace"]);
}

#[test]
fn bad_input_gives_one_line_and_a_failing_exit_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let corrupt = dir.path().join("corrupt.json");
    std::fs::write(&corrupt, "{\"cache\": {").expect("write");
    let space = dir.path().join("space.json");
    std::fs::write(&space, r#"{"tune_params": {"a": [1, 2]}, "restrictions": ["a *% 2 < 4"]}"#).expect("write");
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"tune_params": {"a": [1, 2]}, "restrictions": ["a > 5"]}"#).expect("write");
    let raising = dir.path().join("raising.json");
    std::fs::write(&raising, r#"{"tune_params": {"a": [1, 2]}, "restrictions": ["a / 0 > 1"]}"#).expect("write");
    let negative = dir.path().join("negative.json");
    let cache = r#"{"tune_params": {"a": [1, 2]}, "objective": "time", "cache": {
        "1": {"a": 1, "time": 2.0, "times": [2.0]}, "2": {"a": 2, "time": -1.0, "times": [-1.0]}}}"#;
    std::fs::write(&negative, cache).expect("write");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["simulate".into(), "missing.json".into()], "missing.json: No such file"),
        (vec!["simulate".into(), corrupt.display().to_string()], "not valid JSON"),
        (vec!["simulate".into(), "--strategy".into(), "genetik".into()], "unknown strategy 'genetik'"),
        (vec!["space".into(), space.display().to_string()], "restriction in 'a *% 2 < 4' at column 4"),
        (
            vec!["space".into(), empty.display().to_string()],
            "no configuration satisfies the restrictions: 'a > 5' holds for none",
        ),
        (
            vec!["space".into(), raising.display().to_string()],
            "'a / 0 > 1' raises for every configuration (on the first: division by zero)",
        ),
        (vec!["results".into(), corrupt.display().to_string()], "not a kerntune results database"),
        (vec!["simulate".into(), negative.display().to_string()], "configuration {a=2} records a time of -1 ms"),
        (vec!["simulate".into(), "--target".into(), "nan".into()], "--target must be a finite number, got NaN"),
        (vec!["simulate".into(), "--target".into(), "inf".into()], "--target must be a finite number, got inf"),
        (vec!["simulate".into(), "--target=-inf".into()], "--target must be a finite number, got -inf"),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = kerntune(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `--ray` checks its relay before any work: a Python that cannot run it is one line that
/// says what to set; a `--devices` list that names no GPUs is a usage mistake.
#[test]
fn a_ray_relay_that_cannot_run_and_a_list_that_names_no_gpus_are_refused_in_one_line() {
    let spec = repo("examples/cuda/vector_add/spec.toml");
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("results.db").display().to_string();
    let output = Command::new(kerntune_binary())
        .args(["tune", &spec, "--compile-only", "--db", &db, "--ray", "127.0.0.1:9"])
        .env("KERNTUNE_PYTHON", "/nonexistent/python3")
        .output()
        .expect("kerntune runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: --ray 127.0.0.1:9: cannot run /nonexistent/python3 for the Ray relay"),
        "{stderr}"
    );
    assert!(stderr.contains("set KERNTUNE_PYTHON to a Python with kerntune[ray]"), "{stderr}");
    let output = kerntune(&["tune", &spec, "--devices", "0,gpu1"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("give `all` or their indices separated by commas (0,1)"), "{stderr}");
    // The cluster's GPUs need the cluster, and at least one of them.
    for mistake in [
        &["--ray-gpus", "2"][..],
        &["--ray", "127.0.0.1:9", "--ray-gpus", "0"],
        &["--ray", "127.0.0.1:9", "--ray-gpus", "every"],
    ] {
        let output = kerntune(&[&["tune", spec.as_str()][..], mistake].concat());
        assert_eq!(output.status.code(), Some(2), "{mistake:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

/// `--controls compileiq` needs a chosen ptxas (ACF files are read by a ptxas of their own
/// version): a spec without `[compiler] ptxas` is refused in one line before any work, and
/// the flag makes no sense with `--dry-run` or `--compile-only`, nor its budget without it.
#[test]
fn compileiq_controls_without_a_chosen_ptxas_or_with_a_dry_run_are_refused() {
    let spec = repo("examples/cuda/vector_add/spec.toml");
    let output = kerntune(&["tune", &spec, "--controls", "compileiq"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--controls compileiq needs a ptxas of the ACF files' version"), "{stderr}");
    assert!(stderr.contains("[compiler] ptxas"), "{stderr}");
    for mistake in [&["--controls", "compileiq", "--dry-run"][..], &["--controls-budget", "8"], &["--controls", "acf"]]
    {
        let output = kerntune(&[&["tune", spec.as_str()][..], mistake].concat());
        assert_eq!(output.status.code(), Some(2), "{mistake:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

/// What README says of usage mistakes (a missing value, an unknown flag, a number out of
/// range): clap's message, a hint to `--help`, exit code 2.
#[test]
fn usage_mistakes_exit_2_with_a_hint() {
    let mistakes = [
        &["simulate", "--max-fevals"][..],
        &["simulate", "--no-such-flag"],
        &["results", "x.db", "--top", "0"],
        &["simulate", "--time-limit", "soon"],
    ];
    for args in mistakes {
        let output = kerntune(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains("--help"), "{args:?}: {stderr}");
    }
    let top = String::from_utf8_lossy(&kerntune(&["results", "x.db", "--top", "0"]).stderr).to_string();
    assert!(top.contains("0 is not in 1.."), "{top}");
    let soon = String::from_utf8_lossy(&kerntune(&["simulate", "--time-limit", "soon"]).stderr).to_string();
    assert!(soon.contains("invalid duration 'soon'"), "{soon}");
}

#[test]
fn a_negative_target_is_a_number_not_an_unknown_flag() {
    let result = json_of(&kerntune(&["simulate", "--target", "-5", "--max-fevals", "10", "--json"]));
    assert_eq!(result["evaluations"], 10, "no time is below -5 ms, so the whole budget runs");
}

#[test]
fn space_counts_the_shipped_space_files() {
    for (file, count) in [("clblast_gemm_full", 241_600), ("triton_matmul_wide", 443_100)] {
        let result = json_of(&kerntune(&["space", &repo(&format!("data/spaces/{file}.json")), "--json"]));
        assert_eq!(result["count"], count, "{file}");
        assert!(result["seconds"].is_f64());
    }
}

/// Issue 17 item 1: `kerntune space` on twelve parameters of twenty values ate memory at
/// 400 MB/s until the machine died. It now prints the estimate and exits 1, at once.
#[test]
fn space_too_large_for_memory_is_refused_with_its_estimate_and_exit_1() {
    let dir = tempfile::tempdir().expect("temp dir");
    let huge = dir.path().join("huge.json");
    grid_space(&huge, 12, 20, &["p0 + p1 <= 21"]);
    let clock = Instant::now();
    let output = Command::new(common::kerntune_binary())
        .args(["space", &huge.display().to_string()])
        .env_remove("KERNTUNE_SPACE_MEMORY")
        .output()
        .expect("kerntune runs");
    assert!(clock.elapsed() < Duration::from_secs(5), "took {:?}", clock.elapsed());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    for part in
        ["error: ", "too large to enumerate", "of a product of 4096000000000000", "over the 1.0 GiB cap", "--sample N"]
    {
        assert!(stderr.contains(part), "{part:?} not in {stderr}");
    }

    // The cap is an option and an environment variable; a space under it is unchanged.
    let wide = repo("data/spaces/triton_matmul_wide.json");
    let refused = kerntune(&["space", &wide, "--max-memory", "1M"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("over the 1.0 MiB cap"));
    let from_env = Command::new(common::kerntune_binary())
        .args(["space", &wide])
        .env("KERNTUNE_SPACE_MEMORY", "1M")
        .output()
        .expect("kerntune runs");
    assert_eq!(from_env.status.code(), Some(1));
    let result = json_of(&kerntune(&["space", &wide, "--max-memory", "6M", "--json"]));
    assert_eq!(result["count"], 443_100);

    // What the message suggests works: sampling the refused space, one JSON object a line.
    let sampled = kerntune(&["space", &huge.display().to_string(), "--sample", "5", "--seed", "3"]);
    assert!(sampled.status.success(), "{}", String::from_utf8_lossy(&sampled.stderr));
    let lines: Vec<Json> = String::from_utf8_lossy(&sampled.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON object"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert!(lines.iter().all(|c| c["p0"].as_i64().expect("int") + c["p1"].as_i64().expect("int") <= 21));
}

/// What a command that failed printed: one line, `error: ...`, and exit code 1.
fn one_line_error(output: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.trim_end().lines().count() == 1, "{stderr}");
    stderr
}

/// A space file of `params` parameters `p0, p1, ...`, each taking the values 1 to `values`.
fn grid_space(path: &Path, params: usize, values: u32, restrictions: &[&str]) {
    let values: Vec<u32> = (1..=values).collect();
    let tune_params: serde_json::Map<String, Json> =
        (0..params).map(|p| (format!("p{p}"), serde_json::json!(values))).collect();
    let spec = serde_json::json!({"tune_params": tune_params, "restrictions": restrictions});
    std::fs::write(path, spec.to_string()).expect("write");
}

fn stored_rows(db: &Path) -> usize {
    let Ok(store) = Store::open(db) else { return 0 };
    store.tunings().map(|t| t.iter().map(|t| t.evaluations).sum()).unwrap_or(0)
}

/// Starts a slow simulation, waits until it has stored some rows, sends `signal`, and
/// returns the exit code and how many rows were stored.
fn interrupt_after_some_rows(db: &Path, signal: &str) -> (Option<i32>, usize) {
    let db_arg = db.display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kerntune"))
        .args([
            "simulate",
            "--strategy",
            "random_sample",
            "--max-fevals",
            "300",
            "--seed",
            "5",
            "--db",
            &db_arg,
            "--realtime",
            "200",
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kerntune starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while stored_rows(db) < 40 {
        assert!(Instant::now() < deadline, "the simulation stored too few rows in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill").args([signal, &child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
    let code = child.wait().expect("kerntune exits").code();
    (code, stored_rows(db))
}

#[test]
fn an_interrupted_run_resumes_without_repeating_or_losing_an_evaluation() {
    let reference = json_of(&kerntune(&[
        "simulate",
        "--strategy",
        "random_sample",
        "--max-fevals",
        "300",
        "--seed",
        "5",
        "--json",
    ]));
    for (signal, expected_code) in [("-INT", Some(130)), ("-KILL", None)] {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("results.db");
        let (code, stored) = interrupt_after_some_rows(&db, signal);
        assert_eq!(code, expected_code, "{signal}");
        assert!((40..300).contains(&stored), "{signal}: {stored} rows");
        let db_arg = db.display().to_string();
        let resumed = json_of(&kerntune(&[
            "simulate",
            "--strategy",
            "random_sample",
            "--max-fevals",
            "300",
            "--seed",
            "5",
            "--db",
            &db_arg,
            "--json",
        ]));
        assert_eq!(resumed["from_store"], stored, "{signal}: every stored row is reused, none evaluated again");
        assert_eq!(resumed["evaluations"], 300);
        assert_eq!(stored_rows(&db), 300, "{signal}: no row lost, none duplicated");
        let objectives = |run: &Json| {
            run["trace"].as_array().expect("trace").iter().map(|p| p["objective"].clone()).collect::<Vec<_>>()
        };
        assert_eq!(objectives(&resumed), objectives(&reference), "{signal}: the resumed run is the uninterrupted run");
        assert_eq!(resumed["best"], reference["best"]);
    }
}

/// Issue 37: a replay in real time sleeps through each evaluation's recorded cost (seconds
/// each at this speed); Ctrl-C must not wait for the evaluation in flight to end.
#[test]
fn ctrl_c_ends_a_realtime_simulation_within_half_a_second() {
    use std::io::{BufRead, BufReader, Read};

    let mut child = Command::new(env!("CARGO_BIN_EXE_kerntune"))
        .args(["simulate", "--realtime", "0.25", "--max-fevals", "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kerntune starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut header = String::new();
    stdout.read_line(&mut header).expect("kerntune prints");
    assert!(header.starts_with("Simulating"), "{header}");
    // Into the first evaluation, which sleeps about 15 s at this speed (the handler is
    // installed as the run starts, well within this).
    std::thread::sleep(Duration::from_secs(1));
    let signalled = Instant::now();
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs").success());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("kerntune prints its report");
    let code = child.wait().expect("kerntune exits").code();
    let took = signalled.elapsed();
    assert_eq!(code, Some(130), "{rest}");
    assert!(rest.contains("interrupted"), "{rest}");
    // About 0.1 s (the engine's poll) when measured; the margin is for a loaded machine
    // and still far below the seconds one evaluation sleeps at this speed.
    assert!(took < Duration::from_secs(2), "exited {took:?} after Ctrl-C");
}

#[test]
fn export_cubin_writes_the_kept_schedule_or_says_there_is_none() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("results.db");
    let info = kerntune_store::Landscape::read(Path::new(&repo("data/landscapes/pnpoly_RTX_3090.json.gz")))
        .unwrap_or_else(|e| panic!("{e}"))
        .tuning();
    let config = serde_json::json!({"between_method": 0}).as_object().cloned().expect("object");
    {
        let store = Store::open(&db).expect("opens");
        let tuning = store.tuning(&info).expect("tuning");
        store.save_artifact(tuning, &config, "cubin", b"not the schedule", "compiled").expect("saves");
    }
    let out = dir.path().join("kernel.cubin");
    let (db_arg, out_arg) = (db.display().to_string(), out.display().to_string());
    let missing = kerntune(&["export", &db_arg, "--format", "cubin", "-o", &out_arg]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no tuned schedule stored"), "{stderr}");
    assert!(!out.exists());

    {
        let store = Store::open(&db).expect("opens");
        let tuning = store.tuning(&info).expect("tuning");
        store
            .save_artifact(tuning, &config, "schedule", b"\x7fELF schedule", "kept: 0.998 of the original")
            .expect("saves");
    }
    let written = kerntune(&["export", &db_arg, "--format", "cubin", "-o", &out_arg]);
    let stderr = String::from_utf8_lossy(&written.stderr);
    assert!(written.status.success(), "{stderr}");
    assert_eq!(std::fs::read(&out).expect("written"), b"\x7fELF schedule");
    assert!(stderr.contains("kept: 0.998 of the original"), "{stderr}");
}

#[test]
fn compare_strategies_reports_each_budget_and_draws_the_plot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plot = dir.path().join("plot.svg");
    let landscape = repo("data/landscapes/pnpoly_RTX_3090.json.gz");
    let mut args: Vec<&str> =
        "compare-strategies --strategies random_sample,default --budgets 10,30 --seeds 3 --json".split(' ').collect();
    args.extend([landscape.as_str(), "--plot", plot.to_str().expect("utf-8 path")]);
    let comparison = json_of(&kerntune(&args));
    assert_eq!(comparison["landscapes"], serde_json::json!(["pnpoly_RTX_3090"]));
    let contenders = comparison["contenders"].as_array().expect("contenders");
    assert_eq!(contenders.len(), 2);
    for contender in contenders {
        let budgets = contender["budgets"].as_array().expect("budgets");
        let scores: Vec<f64> = budgets.iter().map(|b| b["score"].as_f64().expect("score")).collect();
        assert!(scores[0] > 0.0 && scores[0] <= scores[1] && scores[1] <= 1.0, "{scores:?}");
        assert_eq!(budgets[1]["mean_evaluations"].as_f64(), Some(30.0));
        assert_eq!(contender["curve"].as_array().map(Vec::len), Some(30));
    }
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    for label in ["random_sample", "default"] {
        assert!(svg.contains(&format!(">\n{label}\n</text>")), "no legend entry for {label}: {svg}");
    }
}

#[test]
fn compare_strategies_names_an_unknown_strategy() {
    let landscape = repo("data/landscapes/pnpoly_RTX_3090.json.gz");
    let output = kerntune(&["compare-strategies", &landscape, "--strategies", "random_sample,annealing"]);
    assert_eq!(output.status.code(), Some(1));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("unknown strategy 'annealing'"), "{message}");
}

/// `--variant` compares a strategy with options of its own beside the strategy as it is:
/// the options reach the strategy (a variant that changes the search scores otherwise),
/// and a misspelt option is refused before any run.
#[test]
fn compare_strategies_takes_variants_with_options_of_their_own() {
    let landscape = repo("data/landscapes/pnpoly_RTX_3090.json.gz");
    let args = [
        "compare-strategies",
        &landscape,
        "--strategies",
        "default",
        "--variant",
        "default:global_share=0.5:min_leaf=3",
        "--budgets",
        "50",
        "--seeds",
        "3",
        "--json",
    ];
    let comparison = json_of(&kerntune(&args));
    let contenders = comparison["contenders"].as_array().expect("contenders");
    let labels: Vec<&str> = contenders.iter().filter_map(|c| c["label"].as_str()).collect();
    assert_eq!(labels, ["default", "default:global_share=0.5:min_leaf=3"]);
    assert_eq!(contenders[1]["strategy"], "default");
    assert_eq!(contenders[1]["options"], serde_json::json!({"global_share": 0.5, "min_leaf": 3}));
    assert_ne!(contenders[0]["curve"], contenders[1]["curve"], "the options changed the search");

    let misspelt = kerntune(&["compare-strategies", &landscape, "--variant", "default:min_leaves=3", "--seeds", "1"]);
    assert_eq!(misspelt.status.code(), Some(1));
    let message = String::from_utf8_lossy(&misspelt.stderr);
    assert!(
        message.contains("--variant default:min_leaves=3") && message.contains("unknown field `min_leaves`"),
        "{message}"
    );
    let bare = kerntune(&["compare-strategies", &landscape, "--variant", "default", "--seeds", "1"]);
    assert_eq!(bare.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&bare.stderr).contains("sets no option"));
}

#[test]
fn a_run_where_every_configuration_fails_the_same_way_stops_early_and_exits_1() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache: serde_json::Map<String, Json> = (0..40)
        .map(|b| {
            let entry = serde_json::json!({"block_size_x": b, "time": "RuntimeFailedConfig", "compile_time": 10.0});
            (b.to_string(), entry)
        })
        .collect();
    let document = serde_json::json!({"tune_params": {"block_size_x": (0..40).collect::<Vec<_>>()}, "objective": "time", "cache": cache});
    let file = dir.path().join("all_failed.json");
    std::fs::write(&file, document.to_string()).expect("writes");
    let output = kerntune(&["simulate", &file.display().to_string(), "--strategy", "brute_force", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: no configuration ran and passed its check") && stderr.contains("every one failed"),
        "{stderr}"
    );
    let summary: Json = serde_json::from_slice(&output.stdout).expect("the summary is still printed");
    assert_eq!(summary["stop"], "all_failed");
    assert!(summary["evaluations"].as_u64().is_some_and(|n| n < 40), "{summary}");
}

/// Progress bars are drawn only on a terminal: a run whose output goes to a pipe or a file
/// writes nothing while it goes, then its summary (or, with `--json`, only its object).
#[test]
fn without_a_terminal_runs_show_no_progress_only_their_summary() {
    let landscape = repo("data/landscapes/pnpoly_RTX_3090.json.gz");
    let runs: [&[&str]; 3] = [
        &["simulate", "--max-fevals", "40"],
        &["simulate", "--max-fevals", "40", "--json"],
        &["compare-strategies", &landscape, "--strategies", "random_sample", "--budgets", "10", "--seeds", "2"],
    ];
    for args in runs {
        let output = kerntune(args);
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?} wrote to standard error");
        assert!(!stdout.contains('\r') && !stdout.contains("\x1b["), "{args:?} drew on standard output: {stdout:?}");
    }
    let text = kerntune(runs[0]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("\nBest: "));
    let json = kerntune(runs[1]);
    assert_eq!(String::from_utf8_lossy(&json.stdout).lines().count(), 1, "one JSON object");
}

/// A Kernel Tuner cache recorded with an NVMLObserver: configuration a=1 is the fastest,
/// a=3 uses the least energy, a=2 lies between on both, a=4 is worse than a=2 on both.
fn energy_landscape(dir: &Path) -> String {
    let cache = r#"{"tune_params": {"a": [1, 2, 3, 4]}, "objective": "time", "cache": {
        "1": {"a": 1, "time": 1.0, "times": [1.0], "nvml_energy": 0.40, "nvml_power": 400.0},
        "2": {"a": 2, "time": 1.5, "times": [1.5], "nvml_energy": 0.30, "nvml_power": 200.0},
        "3": {"a": 3, "time": 3.0, "times": [3.0], "nvml_energy": 0.21, "nvml_power": 70.0},
        "4": {"a": 4, "time": 2.0, "times": [2.0], "nvml_energy": 0.50, "nvml_power": 250.0}}}"#;
    let file = dir.join("energy.json");
    std::fs::write(&file, cache).expect("write");
    file.display().to_string()
}

#[test]
fn a_simulation_replays_recorded_energy_as_the_objective() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = energy_landscape(dir.path());
    let best = |objective: &[&str]| {
        let mut args = vec!["simulate", &file, "--strategy", "brute_force", "--json"];
        args.extend(objective);
        let result = json_of(&kerntune(&args));
        (result["best"]["config"]["a"].as_i64(), result["best"]["objective"].as_f64(), result["objective"].clone())
    };
    assert_eq!(best(&[]), (Some(1), Some(1.0), Json::from("time")));
    assert_eq!(best(&["--objective", "energy"]), (Some(3), Some(0.21), Json::from("energy")));
    // edp: 0.40, 0.45, 0.63, 1.0 J·ms.
    assert_eq!(best(&["--objective", "edp"]).0, Some(1));
    // energy * time**2 penalises the slow one: 0.4, 0.675, 1.89, 2.0.
    assert_eq!(best(&["--objective", "energy*time**2"]).0, Some(1));
    let (a, value, _) = best(&["--objective", "1 / nvml_power", "--objective-higher-is-better"]);
    assert_eq!(a, Some(3));
    assert!(value.is_some_and(|v| (v * 70.0 - 1.0).abs() < 1e-12), "{value:?}");
}

#[test]
fn bad_objectives_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = energy_landscape(dir.path());
    let without = dir.path().join("no_energy.json");
    std::fs::write(
        &without,
        r#"{"tune_params": {"a": [1, 2]}, "objective": "time", "cache": {
        "1": {"a": 1, "time": 2.0, "times": [2.0]}, "2": {"a": 2, "time": 1.0, "times": [1.0]}}}"#,
    )
    .expect("write");
    let cases: [(&[&str], &str); 4] = [
        (&["simulate", &file, "--objective", "enrgy"], "unknown name 'enrgy'"),
        (&["simulate", &file, "--objective", "energy *"], "objective"),
        (&["simulate", &without.display().to_string(), "--objective", "energy"], "energy was not measured"),
        (
            &["tune", &repo("examples/cuda/vector_add/spec.toml"), "--pareto", "time,volts", "--dry-run"],
            "Pareto axis 'volts'",
        ),
    ];
    for (args, expected) in cases {
        let output = kerntune(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn results_show_the_measured_values_of_an_imported_energy_cache() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = energy_landscape(dir.path());
    let db = dir.path().join("r.db").display().to_string();
    assert!(kerntune(&["import", &file, "--db", &db]).status.success());
    let shown = json_of(&kerntune(&["results", &db, "--json"]));
    let best = &shown[0]["best"];
    assert_eq!(best[0]["config"]["a"], 1, "ranked by the recorded objective, the time: {shown}");
    assert_eq!(best[0]["observables"], serde_json::json!({"energy_J": 0.40, "power_W": 400.0}));
    let text = String::from_utf8_lossy(&kerntune(&["results", &db]).stdout).to_string();
    let header = text.lines().find(|l| l.contains("energy_J")).unwrap_or_else(|| panic!("{text}"));
    assert!(header.contains("power_W"), "{text}");
    assert!(text.contains("0.4000") && text.contains("400.0"), "{text}");
}

/// The vector_add example's spec with `edit` applied to its text, written into `dir`.
fn edited_vector_add(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> String {
    let text = std::fs::read_to_string(repo("examples/cuda/vector_add/spec.toml")).expect("the example");
    let source = repo("examples/cuda/vector_add/vector_add.cu");
    let text = text.replace("source = \"vector_add.cu\"", &format!("source = {source:?}"));
    let path = dir.join(name);
    std::fs::write(&path, edit(text)).expect("write");
    path.display().to_string()
}

/// Issue 37, item 3: what the user wrote is checked before anything is built, compiled or
/// probed, in every mode of `tune` (a dry run accepted what a tuning run would refuse),
/// and each mistake is one line naming it, exit 1.
#[test]
fn issue_37_every_mode_refuses_what_the_user_got_wrong_before_any_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = edited_vector_add(dir.path(), "spec.toml", |t| t);
    let unknown_in_spec =
        edited_vector_add(dir.path(), "strategy.toml", |t| format!("{t}\n[search]\nstrategy = \"nosuch\"\n"));
    let raising = edited_vector_add(dir.path(), "raising.toml", |t| {
        t.replace("[kernel]", "restrictions = [\"block_size_x / 0 > 1\"]\n\n[kernel]")
    });
    let zero = edited_vector_add(dir.path(), "zero.toml", |t| t.replace("n = 50_000_000", "n = 0"));
    let db = dir.path().join("results.db").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["tune", &spec, "--dry-run", "--strategy", "nosuch"], "unknown strategy 'nosuch' (available: "),
        (vec!["tune", &spec, "--compile-only", "--strategy", "nosuch", "--db", &db], "unknown strategy 'nosuch'"),
        (vec!["tune", &spec, "--strategy", "nosuch", "--db", &db], "unknown strategy 'nosuch'"),
        (vec!["tune", &unknown_in_spec, "--dry-run"], "unknown strategy 'nosuch'"),
        (vec!["tune", &spec, "--dry-run", "--option", "trees=0"], "options of strategy 'default': trees must be at least 1"),
        (
            vec!["tune", &raising, "--dry-run"],
            "no configuration satisfies the restrictions: 'block_size_x / 0 > 1' raises for every configuration (on the first: division by zero)",
        ),
        (vec!["tune", &zero, "--dry-run"], "no configuration can be launched (the first, block_size_x=64 tile=1: problem size 'n' of axis x is 0; a problem size is at least 1)"),
        (vec!["tune", &spec, "--dry-run", "--arch", "sm_xx"], "--arch \"sm_xx\" is not an NVIDIA architecture"),
    ];
    for (args, expected) in cases {
        let stderr = one_line_error(&kerntune(&args));
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert!(!Path::new(&db).exists(), "nothing was stored: the mistakes were found first");
}

/// Issue 37: numbers out of range are usage mistakes (exit 2) that say what is accepted;
/// a negative `--max-fevals` is a value, not an unknown flag.
#[test]
fn issue_37_a_negative_budget_and_an_empty_sample_are_usage_mistakes_that_say_what_is_accepted() {
    let space = repo("data/spaces/triton_matmul_wide.json");
    for (args, expected) in [
        (
            &["simulate", "--max-fevals", "-5"][..],
            "invalid value '-5' for '--max-fevals <MAX_FEVALS>': give a whole number of evaluations, 0 or more (0: no limit)",
        ),
        (&["simulate", "--max-fevals", "ten"], "give a whole number of evaluations"),
        (&["space", &space, "--sample", "0"], "invalid value '0' for '--sample <N>': 0 is not in 1.."),
    ] {
        let output = kerntune(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// Issue 37, item 4: a results database that cannot be opened says why, in the system's
/// words, instead of SQLite's "Error code 14".
#[test]
fn issue_37_a_db_that_cannot_be_opened_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let folder = dir.path().display().to_string();
    let directory = format!("error: results database {folder}: is a directory; name a file in it");
    let cases = [
        (vec!["simulate", "--max-fevals", "3", "--db", &folder], directory.clone()),
        (vec!["results", &folder], directory),
        (
            vec!["simulate", "--max-fevals", "3", "--db", "/proc/kt.db"],
            "error: results database /proc/kt.db: cannot be opened for writing: no such file or directory".into(),
        ),
    ];
    for (args, expected) in cases {
        let output = kerntune(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end(), expected, "{args:?}");
    }
}

/// Issue 37, item 3: a cap raised past what the machine can give (as the refusal's hint
/// suggests) is an error when the allocation fails, not an abort with a backtrace.
#[test]
fn issue_37_a_space_the_machine_cannot_hold_under_a_raised_cap_is_an_error_not_an_abort() {
    let dir = tempfile::tempdir().expect("temp dir");
    let big = dir.path().join("big.json");
    grid_space(&big, 9, 10, &[]);
    // 10^9 configurations, 8 GB of keys, under a 300 MB address space.
    let output = Command::new("sh")
        .args(["-c", "ulimit -v 300000 && exec \"$0\" space \"$1\""])
        .arg(kerntune_binary())
        .arg(&big)
        .env("KERNTUNE_SPACE_MEMORY", "100G")
        .output()
        .expect("sh runs");
    let stderr = one_line_error(&output);
    assert!(stderr.contains("does not fit in this machine's memory"), "{stderr}");
    assert!(stderr.contains("--sample N") && stderr.contains("KERNTUNE_SPACE_MEMORY"), "{stderr}");
}

/// Issue 35: a spec's `shapes` lists the problem sizes of a many-shape run. A dry run checks
/// the space at every size; a size list that cannot make a run is one line saying what to
/// do, before any work.
#[test]
fn issue_35_a_spec_with_shapes_is_checked_at_every_size_and_bad_size_lists_are_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let with = |name: &str, shapes: &str| edited_vector_add(dir.path(), name, |t| format!("shapes = {shapes}\n{t}"));
    let sweep = with("sweep.toml", "[{ n = 1_000_000 }, { n = 4096 }]");
    let report = json_lines(&kerntune(&["tune", &sweep, "--dry-run", "--json"]));
    assert_eq!(report.len(), 2, "one report per size: {report:?}");
    assert!(report.iter().all(|r| r["count"].as_u64().is_some_and(|n| n > 0)), "{report:?}");
    let text = String::from_utf8_lossy(&kerntune(&["tune", &sweep, "--dry-run"]).stdout).to_string();
    assert!(text.contains("Size n=1000000:") && text.contains("Size n=4096:"), "{text}");
    let db = dir.path().join("results.db").display().to_string();
    for (shapes, expected) in [
        ("[]", "shapes is empty: list the sizes to tune"),
        ("[{ n = 64 }, { n = 64 }]", "shapes lists n=64 twice: list each size once"),
        ("[{ m = 64 }]", "shapes: 'm' is not a [problem] variable (the spec has n): a size sets [problem] values"),
        ("[{ n = 64 }, { n = 128, m = 1 }]", "give every size the same variables"),
    ] {
        let spec = with("bad.toml", shapes);
        for mode in ["--dry-run", "--compile-only"] {
            let stderr = one_line_error(&kerntune(&["tune", &spec, mode, "--db", &db]));
            assert!(stderr.contains(expected), "{shapes} {mode}: {stderr}");
        }
    }
}

/// The JSON objects a successful command printed, one per line.
fn json_lines(output: &std::process::Output) -> Vec<serde_json::Value> {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}
