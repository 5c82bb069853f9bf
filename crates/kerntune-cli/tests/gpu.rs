//! Tuning on a real GPU. These run only where a GPU is (`gpu/check.sh` runs them on the
//! device machine with `--ignored`, pointing `KERNTUNE_BIN` and `KERNTUNE_REPO` at the
//! binary and the checkout there); CI, without a GPU, skips them.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{json_of, kerntune_binary, repo};

fn tune(args: &[&str], db: &std::path::Path) -> Output {
    Command::new(kerntune_binary())
        .arg("tune")
        .args(args)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .output()
        .expect("kerntune runs")
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_example_tunes_and_verifies() {
    let dir = tempfile::tempdir().expect("temp dir");
    for example in ["vector_add", "matmul_naive", "matmul_register", "matmul_sram", "conv2d"] {
        let spec = repo(&format!("examples/cuda/{example}/spec.toml"));
        let result =
            json_of(&tune(&[&spec, "--strategy", "random_sample", "--max-fevals", "8"], &dir.path().join("r.db")));
        assert_eq!(result["evaluations"], 8, "{example}");
        assert!(result["best"]["objective"].as_f64().is_some_and(|o| o > 0.0), "{example}: {result}");
        assert!(result["statuses"].get("invalid_output").is_none(), "{example}: {}", result["statuses"]);
        // A reference kernel and random inputs: the spec's inputs and 2 redrawn sets.
        assert_eq!(result["verified_sets"], 3, "{example}");
        let results = result["results"].as_array().expect("results");
        assert!(results.iter().all(|row| row["status"] != "ok" || row["verified_sets"] == 3), "{example}: {results:?}");
        println!(
            "{example}: best {} {} ({})",
            result["best"]["objective"], result["objective"], result["best"]["description"]
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn out_of_bounds_wrong_and_hanging_kernels_cost_only_their_configurations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("crates/kerntune-cli/tests/gpu/faulty.toml");
    let result = json_of(&tune(&[&spec, "--strategy", "brute_force"], &dir.path().join("r.db")));
    println!("{}", result["statuses"]);
    assert_eq!(result["evaluations"], 8);
    let statuses = &result["statuses"];
    assert_eq!(statuses["ok"], 2, "mode 0 works with both block sizes");
    assert_eq!(statuses["invalid_output"], 2, "mode 1 writes the wrong elements");
    assert_eq!(statuses["runtime_failed"], 2, "mode 2 faults");
    assert_eq!(statuses["timeout"], 2, "mode 3 hangs");
    assert_eq!(result["best"]["config"]["mode"], 0);
    for row in result["results"].as_array().expect("results") {
        match row["status"].as_str() {
            Some("ok") => assert_eq!(row["verified_sets"], 3, "the spec's inputs and 2 redrawn sets: {row}"),
            Some("invalid_output") => assert_eq!(row["verified_sets"], 0, "wrong on the spec's inputs: {row}"),
            _ => {}
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_kernel_right_on_the_specs_inputs_only_fails_on_a_redrawn_input_set() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("crates/kerntune-cli/tests/gpu/remembers.toml");
    let result = json_of(&tune(&[&spec, "--strategy", "brute_force"], &dir.path().join("r.db")));
    println!("{}", result["statuses"]);
    assert_eq!(result["verified_sets"], 3);
    assert_eq!(result["statuses"]["invalid_output"], 2, "mode 1 remembers the spec's inputs");
    for row in result["results"].as_array().expect("results") {
        if row["config"]["mode"] == 1 {
            assert_eq!(row["status"], "invalid_output", "{row}");
            assert_eq!(row["verified_sets"], 1, "it passes on the spec's inputs: {row}");
            let reason = row["reason"].as_str().unwrap_or_default();
            assert!(reason.starts_with("on input set 2 of 3"), "{reason}");
        } else {
            assert!(row["status"] == "ok" || row["status"] == "early_stopped", "{row}");
            assert_eq!(row["verified_sets"], 3, "{row}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_rerun_answers_from_the_store_in_under_a_second() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("examples/cuda/matmul_sram/spec.toml");
    let db = dir.path().join("r.db");
    let first = json_of(&tune(&[&spec, "--max-fevals", "20"], &db));
    let clock = Instant::now();
    let again = json_of(&tune(&[&spec, "--max-fevals", "20"], &db));
    let seconds = clock.elapsed().as_secs_f64();
    assert_eq!(again["from_store"], 20);
    assert_eq!(again["best"], first["best"]);
    assert!(seconds < 1.0, "the rerun took {seconds:.2} s");
    println!("rerun from the store: {seconds:.3} s");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_run_killed_midway_resumes_without_repeating_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("examples/cuda/matmul_sram/spec.toml");
    let db = dir.path().join("r.db");
    let mut child = Command::new(kerntune_binary())
        .args(["tune", &spec, "--strategy", "brute_force", "--db"])
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let rows = || {
        kerntune_store::Store::open(&db)
            .ok()
            .and_then(|s| s.tunings().ok())
            .map_or(0, |t| t.iter().map(|t| t.evaluations).sum::<usize>())
    };
    while rows() < 30 {
        assert!(Instant::now() < deadline, "too slow");
        std::thread::sleep(Duration::from_millis(50));
    }
    Command::new("kill").args(["-KILL", &child.id().to_string()]).status().expect("kill");
    child.wait().expect("exits");
    let stored = rows();
    let resumed = json_of(&tune(&[&spec, "--strategy", "brute_force"], &db));
    assert_eq!(resumed["from_store"], stored);
    assert_eq!(resumed["evaluations"], 107);
    assert_eq!(rows(), 107);
    println!("killed after {stored} rows; resumed and finished 107");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_measurement_records_the_clocks_around_its_samples() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("examples/cuda/matmul_sram/spec.toml");
    let db = dir.path().join("r.db");
    let result = json_of(&tune(&[&spec, "--strategy", "random_sample", "--max-fevals", "24"], &db));
    assert!(result["statuses"]["ok"].as_u64().is_some_and(|ok| ok > 0), "{}", result["statuses"]);
    let store = kerntune_store::Store::open(&db).expect("the store opens");
    let tuning = store.tunings().expect("tunings")[0].id;
    let measured: Vec<_> = store
        .evaluations(tuning)
        .expect("evaluations")
        .into_iter()
        .filter(|stored| stored.evaluation.status == kerntune_store::Status::Ok)
        .map(|stored| stored.evaluation.metrics)
        .collect();
    let count = |key: &str| measured.iter().filter(|m| m.get(key) == Some(&serde_json::json!(true))).count();
    let (remeasured, unsteady) = (count("remeasured"), count("clocks_unsteady"));
    for metrics in &measured {
        println!(
            "SM {}->{} MHz, {}->{} C, {} mW, reasons {}, remeasured {} ({})",
            metrics["sm_mhz_before"],
            metrics["sm_mhz_after"],
            metrics["temperature_c_before"],
            metrics["temperature_c_after"],
            metrics["power_mw"],
            metrics["throttle_reasons"],
            metrics["remeasured"],
            metrics.get("remeasure_reason").unwrap_or(&serde_json::Value::Null)
        );
        assert!(metrics["sm_mhz_after"].as_u64().is_some_and(|mhz| mhz > 0), "NVML read no SM clock: {metrics:?}");
        assert!(metrics["temperature_c_after"].as_u64().is_some(), "NVML read no temperature: {metrics:?}");
    }
    println!("{} measured, {remeasured} re-measured, {unsteady} unsteady", measured.len());
    // Re-measuring most configurations would mean the readings before the samples catch the
    // clocks mid-change, not that the clocks moved under the samples.
    assert!(remeasured * 2 <= measured.len(), "{remeasured} of {} re-measured", measured.len());
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_early_stop_factor_follows_the_runs_own_noise() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("examples/cuda/matmul_sram/spec.toml");
    let result = json_of(&tune(
        &[&spec, "--strategy", "random_sample", "--max-fevals", "40", "--finalists", "1"],
        &dir.path().join("r.db"),
    ));
    let rows = result["results"].as_array().expect("results");
    let factors: Vec<f64> = rows.iter().filter_map(|row| row["early_stop_factor"].as_f64()).collect();
    println!("early-stop factors in order: {factors:?}");
    // The first measured configuration has no best to compare with; every later one has a bar.
    let measured = rows.iter().filter(|row| row["status"] == "ok" || row["status"] == "early_stopped").count();
    assert!(factors.len() + 1 >= measured, "{} factors for {measured} measured", factors.len());
    // Wide until 8 configurations were measured in full, then from their noise, in range.
    assert_eq!(factors.first().copied(), Some(1.25), "{factors:?}");
    let learned = factors.last().copied().expect("a factor");
    assert!((1.05..=1.5).contains(&learned), "{learned}");
    assert_ne!(learned, 1.25, "the factor never left its starting value: {factors:?}");
}
