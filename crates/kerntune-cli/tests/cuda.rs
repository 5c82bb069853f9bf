//! The CUDA path without a GPU: checking a space, compiling every configuration with
//! NVRTC (installed from PyPI in CI), and the message a tuning run gives with no GPU.

mod common;

use common::{json_of, kerntune, repo};
use kerntune_store::Store;

/// NVRTC is needed to compile; CI installs it (`nvidia-cuda-nvrtc`) and sets
/// `KERNTUNE_REQUIRE_NVRTC`, elsewhere its absence skips the test with a note.
fn nvrtc() -> bool {
    if kerntune_device::nvrtc_available() {
        return true;
    }
    assert!(std::env::var_os("KERNTUNE_REQUIRE_NVRTC").is_none(), "NVRTC is required here but was not found");
    eprintln!("skipped: NVRTC is not installed (scripts/test.sh installs nvidia-cuda-nvrtc into .venv)");
    false
}

/// A copy of the vector-add example in a fresh folder, its source and spec passed through
/// `source` and `spec`: the folder (kept while it lives), the spec's path and a database path.
fn vector_add_copy(
    source: impl FnOnce(String) -> String,
    spec: impl FnOnce(String) -> String,
) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let read = |name: &str| std::fs::read_to_string(repo(&format!("examples/cuda/vector_add/{name}"))).expect("reads");
    std::fs::write(dir.path().join("vector_add.cu"), source(read("vector_add.cu"))).expect("writes");
    std::fs::write(dir.path().join("spec.toml"), spec(read("spec.toml"))).expect("writes");
    let spec_path = dir.path().join("spec.toml").display().to_string();
    let db = dir.path().join("cubins.db").display().to_string();
    (dir, spec_path, db)
}

#[test]
fn dry_run_counts_and_checks_every_configuration() {
    let result = json_of(&kerntune(&["tune", &repo("examples/cuda/matmul_sram/spec.toml"), "--dry-run", "--json"]));
    assert_eq!(result["count"], 107);
    assert_eq!(result["invalid_geometry"], 0);
}

#[test]
fn tuning_without_a_usable_gpu_says_so_in_one_line() {
    let output = kerntune(&["tune", &repo("examples/cuda/vector_add/spec.toml"), "--device", "99"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.contains("no NVIDIA driver on this machine") || stderr.contains("no GPU #99"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn compile_only_keeps_a_cubin_for_every_configuration() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("cubins.db");
    let db_arg = db.display().to_string();
    let result = json_of(&kerntune(&[
        "tune",
        &repo("examples/cuda/vector_add/spec.toml"),
        "--compile-only",
        "--db",
        &db_arg,
        "--json",
    ]));
    assert_eq!(
        (result["count"].as_u64(), result["compiled"].as_u64(), result["failed"].as_u64()),
        (Some(20), Some(20), Some(0))
    );
    let store = Store::open(&db).expect("opens");
    let tuning = store.tunings().expect("lists")[0].clone();
    let config = serde_json::json!({"block_size_x": 256, "tile": 4}).as_object().cloned().expect("object");
    let (cubin, provenance) = store.artifact(tuning.id, &config, "cubin").expect("query").expect("stored");
    assert!(cubin.starts_with(b"\x7fELF"), "a cubin is an ELF file");
    assert!(provenance.contains("sm_90"), "{provenance}");
}

#[test]
fn a_configuration_that_does_not_compile_fails_alone_with_the_compilers_message() {
    if !nvrtc() {
        return;
    }
    let (_dir, spec_path, db) = vector_add_copy(
        |source| format!("#if tile == 4\n#error tile 4 is not supported\n#endif\n{source}"),
        |spec| spec,
    );
    let output = kerntune(&["tune", &spec_path, "--compile-only", "--db", &db]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(stdout.contains("Compiled 15 of 20") && stdout.contains("5 failed"), "{stdout}");
    assert!(stdout.contains("tile 4 is not supported"), "{stdout}");
}

#[test]
fn ptxas_options_are_tuned_with_the_parameters_and_acf_needs_a_newer_ptxas() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(repo("examples/cuda/vector_add/vector_add.cu"), dir.path().join("vector_add.cu")).expect("copies");
    let spec = std::fs::read_to_string(repo("examples/cuda/vector_add/spec.toml")).expect("reads");
    let spec = spec.replace("tile = 1 }", "tile = 1, ptxas_options = \"\" }");
    let with_controls = spec.replace(
        "tile = [1, 2, 4, 8]",
        "tile = [1, 2, 4, 8]\nptxas_options = [\"\", \"-O1\", \"--allow-expensive-optimizations=true\"]",
    );
    std::fs::write(dir.path().join("spec.toml"), &with_controls).expect("writes");
    let spec_path = dir.path().join("spec.toml").display().to_string();
    let db = dir.path().join("c.db").display().to_string();
    let result = json_of(&kerntune(&["tune", &spec_path, "--compile-only", "--db", &db, "--json"]));
    assert_eq!((result["count"].as_u64(), result["failed"].as_u64()), (Some(60), Some(0)), "{result}");
    let with_acf = spec
        .replace("tile = [1, 2, 4, 8]", "tile = [1, 2, 4, 8]\nptxas_options = [\"--apply-controls tuned.acf\"]")
        .replace("ptxas_options = \"\" }", "ptxas_options = \"--apply-controls tuned.acf\" }");
    std::fs::write(dir.path().join("spec.toml"), with_acf).expect("writes");
    let output = kerntune(&["tune", &spec_path, "--compile-only", "--db", &db]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("need ptxas 13.3 or newer"), "{stderr}");
}

#[test]
fn compile_only_resumes_from_the_store_and_refuses_a_bad_architecture_before_any_work() {
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("cubins.db").display().to_string();
    let spec = repo("examples/cuda/vector_add/spec.toml");
    let first = json_of(&kerntune(&["tune", &spec, "--compile-only", "--db", &db, "--json"]));
    assert_eq!((first["compiled"].as_u64(), first["from_store"].as_u64()), (Some(20), Some(0)), "{first}");
    let again = json_of(&kerntune(&["tune", &spec, "--compile-only", "--db", &db, "--json"]));
    assert_eq!((again["compiled"].as_u64(), again["from_store"].as_u64()), (Some(20), Some(20)), "{again}");
    assert_eq!(again["compile_s"].as_f64(), Some(0.0), "nothing was compiled again");

    let output = kerntune(&["tune", &spec, "--compile-only", "--arch", "sm_xx", "--db", &db]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("\"sm_xx\" is not an NVIDIA architecture"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn compile_only_fails_when_no_configuration_compiles() {
    if !nvrtc() {
        return;
    }
    let (_dir, spec_path, db) = vector_add_copy(|_| "this is not CUDA\n".to_string(), |spec| spec);
    let output = kerntune(&["tune", &spec_path, "--compile-only", "--db", &db]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: no configuration compiled for sm_90"), "{stderr}");
}

/// Issue 37, item 4: the compiler's message names the spec's source file and the line in
/// it (it named a file after the kernel, `vector_add.cu` here by chance, and counted the
/// `#define`d parameters as lines).
#[test]
fn a_syntax_error_is_reported_against_the_source_file_and_its_own_line() {
    if !nvrtc() {
        return;
    }
    let (dir, _, db) = vector_add_copy(|source| source, |spec| spec);
    let broken = "// line 1\n// line 2\nextern \"C\" __global__ void vector_add(float *c) { c[0] = 1 }\n";
    std::fs::write(dir.path().join("kernel_body.cu"), broken).expect("writes");
    let spec = std::fs::read_to_string(dir.path().join("spec.toml")).expect("reads");
    std::fs::write(dir.path().join("spec.toml"), spec.replace("\"vector_add.cu\"", "\"kernel_body.cu\""))
        .expect("writes");
    let spec_path = dir.path().join("spec.toml").display().to_string();
    let output = kerntune(&["tune", &spec_path, "--compile-only", "--db", &db]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kernel_body.cu(3): error"), "{stderr}");
    assert!(!stderr.contains("vector_add.cu("), "{stderr}");
}

#[test]
fn an_interrupted_compile_only_run_exits_130_and_the_next_one_compiles_only_the_rest() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    if !nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("cubins.db");
    let db_arg = db.display().to_string();
    let spec = repo("examples/cuda/matmul_sram/spec.toml");
    let args = ["tune", spec.as_str(), "--compile-only", "--db", db_arg.as_str(), "--compile-workers", "2", "--json"];
    let mut child = Command::new(common::kerntune_binary())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kerntune starts");
    let stored = || {
        Store::open(&db)
            .ok()
            .and_then(|store| {
                let tuning = store.tunings().ok()?.first()?.id;
                store.artifacts(tuning, "cubin").ok().map(|a| a.len())
            })
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while stored() < 5 {
        assert!(Instant::now() < deadline, "too few cubins stored in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs").success());
    assert_eq!(child.wait().expect("kerntune exits").code(), Some(130));
    let kept = stored();
    assert!((5..107).contains(&kept), "{kept} cubins kept");
    let resumed = json_of(&kerntune(&args));
    assert_eq!(resumed["from_store"].as_u64(), Some(kept as u64), "{resumed}");
    assert_eq!(
        resumed["compiled"].as_u64().zip(resumed["failed"].as_u64()).map(|(c, f)| c + f),
        Some(107),
        "{resumed}"
    );
}

#[test]
fn a_dry_run_computes_every_argument_size_and_refuses_one_that_cannot_be() {
    let (_dir, spec_path, _) = vector_add_copy(
        |source| source,
        |spec| {
            let first_size = spec.lines().find(|l| l.trim_start().starts_with("size =")).expect("a buffer").to_string();
            spec.replacen(&first_size, "size = \"n / 0\"", 1)
        },
    );
    let output = kerntune(&["tune", &spec_path, "--dry-run"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("size 'n / 0'") && stderr.contains("division"), "{stderr}");
}

/// Issue 37, item 1: `kerntune` installed in a Python environment (the quickstart's
/// `.venv/bin/kerntune`) looks for NVIDIA's wheels in that environment, and without NVRTC
/// there its hint installs into that environment, never into whatever `pip` the user has.
#[test]
fn without_nvrtc_the_hint_installs_into_the_environment_kerntune_is_installed_in() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let installed = bin.join("kerntune");
    std::fs::copy(common::kerntune_binary(), &installed).expect("copies the binary");
    // A Python of that environment whose import path holds no wheel at all.
    let python = bin.join("python3");
    std::fs::write(&python, "#!/bin/sh\nexit 0\n").expect("writes");
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let spec = repo("examples/cuda/vector_add/spec.toml");
    let db = dir.path().join("cubins.db").display().to_string();
    let output = std::process::Command::new(&installed)
        .args(["tune", &spec, "--compile-only", "--db", &db])
        .env_remove("KERNTUNE_NVRTC")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .output()
        .expect("kerntune runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !stderr.contains("NVRTC (libnvrtc) is not installed") {
        eprintln!("skipped: this machine has NVRTC outside any Python environment (the toolkit, or the loader's path)");
        return;
    }
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("{} -m pip install 'nvidia-cuda-nvrtc'", python.display())), "{stderr}");
    assert!(stderr.contains("KERNTUNE_NVRTC"), "{stderr}");
}
