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
        } else if row["status"] == "ok" {
            assert_eq!(row["verified_sets"], 3, "{row}");
        } else {
            assert_eq!(row["status"], "early_stopped", "{row}");
            assert_eq!(row["verified_sets"], 1, "a configuration stopped early cannot win: {row}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_kernel_right_only_where_its_blocks_divide_the_size_fails_at_an_edge_size() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("crates/kerntune-cli/tests/gpu/tail.toml");
    let result = json_of(&tune(&[&spec, "--strategy", "brute_force"], &dir.path().join("r.db")));
    println!("{}", result["statuses"]);
    // The spec's inputs, 2 redrawn sets and the edge size.
    assert_eq!(result["verified_sets"], 4);
    assert_eq!(result["verified_sizes"], serde_json::json!(["n = 1000001"]));
    assert_eq!(result["statuses"]["invalid_output"], 2, "mode 1 drops the tail at n = 1000001");
    for row in result["results"].as_array().expect("results") {
        let reason = row["reason"].as_str().unwrap_or_default();
        if row["config"]["mode"] == 1 {
            assert_eq!(row["status"], "invalid_output", "{row}");
            assert!(reason.starts_with("at the edge size n = 1000001"), "{reason}");
            assert!(row["verified_sets"].as_u64().is_some_and(|n| n < 4), "it passes at the spec's size: {row}");
        } else if row["status"] == "ok" {
            assert_eq!(row["verified_sets"], 4, "{row}");
        } else {
            assert_eq!(row["status"], "early_stopped", "{row}");
            assert_eq!(row["verified_sets"], 1, "a configuration stopped early cannot win: {row}");
        }
    }
    assert_eq!(result["best"]["config"]["mode"], 0);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_rerun_answers_from_the_store_without_starting_a_worker() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("examples/cuda/matmul_sram/spec.toml");
    let db = dir.path().join("r.db");
    let first = json_of(&tune(&[&spec, "--max-fevals", "20"], &db));
    let clock = Instant::now();
    let again = json_of(&tune(&[&spec, "--max-fevals", "20"], &db));
    let seconds = clock.elapsed().as_secs_f64();
    assert_eq!(again["from_store"], 20);
    assert_eq!(again["best"], first["best"]);
    // Nothing compiled or measured: no worker was started. The time is printed as a figure,
    // never checked (a shared machine may be slow: 0.15 s on one H100, 1.12 s once on a
    // four-GPU host).
    assert!(again["compile_workers"].is_null() && again["workers"].is_null(), "{again}");
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
    let result = json_of(&tune(&[&spec, "--strategy", "brute_force", "--finalists", "1"], &dir.path().join("r.db")));
    let rows = result["results"].as_array().expect("results");
    // Rows come in the order the evaluations finished: the factor an evaluation was held to
    // depends on how many configurations were measured in full before it was sent (the one
    // before it may still have been running then, so allow one).
    let mut full = 0;
    let mut learned = Vec::new();
    for row in rows {
        if let Some(factor) = row["early_stop_factor"].as_f64() {
            if full < 8 {
                assert_eq!(factor, 1.25, "wide until 8 configurations were measured in full: {row}");
            } else if full > 8 {
                assert!((1.05..=1.5).contains(&factor), "{factor}: {row}");
                learned.push(factor);
            }
        }
        full += usize::from(row["status"] == "ok");
    }
    println!("{full} measured in full; factors once learned: {learned:?}");
    assert!(full > 9 && !learned.is_empty(), "too few configurations measured in full ({full}) to learn the noise");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn an_energy_objective_tunes_end_to_end_and_keeps_the_pareto_front() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("examples/cuda/vector_add/spec.toml");
    let args = [&spec[..], "--strategy", "random_sample", "--max-fevals", "6", "--objective", "energy"];
    let result = json_of(&tune(&[&args[..], &["--pareto", "time,energy"]].concat(), &dir.path().join("e.db")));
    assert_eq!(result["objective"], "energy");
    assert_eq!(result["higher_is_better"], false);
    let ok: Vec<&serde_json::Value> =
        result["results"].as_array().expect("results").iter().filter(|r| r["status"] == "ok").collect();
    assert!(!ok.is_empty(), "{result}");
    for row in &ok {
        let energy = row["observables"]["energy_J"].as_f64().expect("energy per launch");
        let power = row["observables"]["power_W"].as_f64().expect("power");
        let time_ms = row["time_ms"].as_f64().expect("time");
        // A 50M-element vector add moves 600 MB: between 0.1 and 10 ms, at 50 to 1500 W.
        assert!((50.0..1500.0).contains(&power), "{row}");
        assert!((1e-3..20.0).contains(&energy) && energy / (time_ms * 1e-3) < 2000.0, "{row}");
        assert_eq!(row["objective"].as_f64(), Some(energy), "the objective is the energy: {row}");
    }
    let best = result["best"]["objective"].as_f64().expect("best");
    assert!(ok.iter().all(|r| r["objective"].as_f64().is_some_and(|o| o >= best)), "{result}");
    let front = result["pareto"]["front"].as_array().expect("a Pareto front");
    assert!(!front.is_empty() && front.len() <= ok.len(), "{result}");
    assert_eq!(result["pareto"]["axes"], serde_json::json!(["time", "energy_J"]));
    println!("energy objective: best {best:.4e} J per launch; Pareto front of {} points", front.len());
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn graph_timing_gives_the_same_time_as_events_for_a_long_kernel() {
    // For a kernel of about a millisecond, launch overhead is negligible either way: both
    // modes must agree within noise (graph mode only starts the first launch from a cold L2).
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = repo("examples/cuda/vector_add/spec.toml");
    let time = |mode: &str| {
        let args = [&spec[..], "--strategy", "brute_force", "--max-fevals", "1", "--finalists", "1", "--timing", mode];
        let result = json_of(&tune(&args, &dir.path().join(format!("{mode}.db"))));
        result["best"]["time_ms"].as_f64().expect("a time")
    };
    let (events, graph) = (time("events"), time("graph"));
    println!("vector_add: events {events:.4} ms, graph {graph:.4} ms per launch");
    assert!((graph / events - 1.0).abs() < 0.15, "events {events} ms, graph {graph} ms");
}

/// Issue 35: a spec's `shapes` tunes every size, the later learning from the earlier, and
/// a configuration compiled at one size is not compiled again at the next (problem
/// variables are not `#define`d, so its binary is the same).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_many_shape_spec_tunes_every_size_and_compiles_each_configuration_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = repo("examples/cuda/vector_add/spec.toml");
    let text = std::fs::read_to_string(&source).expect("the example spec");
    let folder = std::path::Path::new(&source).parent().expect("its folder").display().to_string();
    let text = text.replace("source = \"vector_add.cu\"", &format!("source = \"{folder}/vector_add.cu\""));
    let spec = dir.path().join("sweep.toml");
    std::fs::write(&spec, format!("shapes = [{{ n = 1_000_000 }}, {{ n = 4_000_000 }}]\n{text}")).expect("write");
    let report =
        json_of(&tune(&[spec.to_str().expect("a path"), "--strategy", "brute_force"], &dir.path().join("r.db")));
    let shapes = report["shapes"].as_array().expect("a line per size");
    assert_eq!(shapes.len(), 2, "{report}");
    assert_eq!(shapes[1]["started_from"]["n"], 1_000_000, "{report}");
    let runs = report["runs"].as_array().expect("each size's run");
    let compiled = |run: &serde_json::Value| -> f64 {
        run["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["costs"]["compile_s"].as_f64().unwrap_or(0.0))
            .sum()
    };
    assert!(compiled(&runs[0]) > 0.0, "the first size compiles");
    assert_eq!(compiled(&runs[1]), 0.0, "the second size compiles nothing again");
    assert!(runs.iter().all(|run| run["best"]["objective"].as_f64().is_some()), "{report}");
}

/// Setups draw their normal and uniform floating-point inputs on the GPU: the numbers
/// follow the distribution asked for, in every element type, overflow to infinity rather
/// than to garbage, and depend on the seed alone.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn inputs_drawn_on_the_gpu_follow_their_distribution_and_depend_on_their_seed_alone() {
    use kerntune_device::draw::Drawer;
    use kerntune_device::driver::Context;
    use kerntune_device::{f16_to_f32, DType, Init};

    let context = Context::open(0).expect("a GPU");
    let drawer = Drawer::new(&context).expect("NVRTC compiles the drawing kernel");
    let len = 1 << 20;
    let draw = |dtype: DType, init: &Init, seed: u64| -> Vec<f64> {
        let buffer = context.alloc(len * dtype.size()).expect("alloc");
        drawer.draw(&context, &buffer, dtype, len, init, seed).expect("draws");
        context.synchronize().expect("runs");
        let mut bytes = vec![0u8; len * dtype.size()];
        context.download(&buffer, &mut bytes).expect("download");
        bytes
            .chunks(dtype.size())
            .map(|b| match dtype {
                DType::F16 => f64::from(f16_to_f32(u16::from_le_bytes([b[0], b[1]]))),
                DType::Bf16 => f64::from(f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)),
                DType::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                _ => f64::from_le_bytes(b.try_into().expect("8 bytes")),
            })
            .collect()
    };
    let moments = |values: &[f64]| {
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
        (mean, variance.sqrt())
    };
    let normal = Init::Normal { mean: 0.5, std: 2.0 };
    for dtype in [DType::F16, DType::Bf16, DType::F32, DType::F64] {
        let values = draw(dtype, &normal, 7);
        let (mean, std) = moments(&values);
        // A million draws: the mean's standard error is 0.002, the deviation's 0.0014;
        // bf16 rounds each value by up to 0.4%.
        assert!((mean - 0.5).abs() < 0.012 && (std - 2.0).abs() < 0.012, "{dtype:?}: mean {mean}, std {std}");
        let beyond = values.iter().filter(|v| (*v - 0.5).abs() > 6.0).count() as f64 / len as f64;
        assert!((0.0020..0.0035).contains(&beyond), "{dtype:?}: {beyond} beyond three deviations (0.0027)");
        let (low, high) = (-3.0, 5.0);
        let values = draw(dtype, &Init::Uniform { low, high }, 7);
        assert!(values.iter().all(|v| (low..=high).contains(v)), "{dtype:?}: uniform within its bounds");
        let (mean, _) = moments(&values);
        assert!((mean - 1.0).abs() < 0.02, "{dtype:?}: uniform mean {mean}");
        assert_eq!(
            draw(dtype, &normal, 7).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            draw(dtype, &normal, 7).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{dtype:?}: same seed, same data"
        );
        let (first, other) = (draw(dtype, &normal, 7), draw(dtype, &normal, 8));
        let same = first.iter().zip(&other).filter(|(a, b)| a == b).count();
        assert!(same < len / 50, "{dtype:?}: another seed, other data ({same} equal)");
    }
    let huge = draw(DType::F16, &Init::Normal { mean: 0.0, std: 1e6 }, 3);
    assert!(huge.iter().all(|v| !v.is_nan()), "no NaN from an overflow");
    assert!(huge.iter().filter(|v| v.is_infinite()).count() > len * 9 / 10, "beyond f16's range: infinity");
}
