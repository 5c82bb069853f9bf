//! Compiler controls on the CUDA path without a GPU: a chosen ptxas (the `nvidia-cuda-nvcc`
//! wheel's, which CI installs) assembles NVRTC's PTX with each configuration's controls,
//! ACF files generated at test time by CompileIQ (never kept in the repository).
//!
//! Without the pip ptxas, or CompileIQ, a test skips with a note; `KERNTUNE_REQUIRE_PTXAS`
//! (CI sets it) turns those skips into failures. CompileIQ's ptxas search space is a
//! release asset of CompileIQ's, not on PyPI: without it (`KERNTUNE_CIQ_SEARCH_SPACE`) the
//! tests that need real ACF files skip whatever the flag says.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{json_of, kerntune, repo};
use kerntune_device::ptxas::Ptxas;
use kerntune_store::Store;

fn required() -> bool {
    std::env::var_os("KERNTUNE_REQUIRE_PTXAS").is_some()
}

/// The pip ptxas, with NVRTC; `None` (a skip) when either is missing.
fn pip_ptxas() -> Option<Ptxas> {
    let nvrtc = kerntune_device::nvrtc_available();
    match (nvrtc, Ptxas::resolve("pip", Path::new("."))) {
        (true, Ok(ptxas)) => Some(ptxas),
        (_, outcome) => {
            let why = outcome.err().map_or("NVRTC is not installed".to_string(), |e| e.to_string());
            assert!(!required(), "KERNTUNE_REQUIRE_PTXAS is set: {why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// `count` ACF files from CompileIQ's first generation, written into `dir`.
fn compileiq_acfs(dir: &Path, count: usize) -> Option<Vec<PathBuf>> {
    let script = format!(
        "import sys; sys.path.insert(0, {module:?}); import _compileiq\n\
         missing = _compileiq.available()\n\
         if missing: print('missing-compileiq:', missing); sys.exit(0)\n\
         import os\n\
         if not os.environ.get(_compileiq.SEARCH_SPACE_ENV): print('missing-space: CompileIQ\\'s ptxas search space is not on this machine: set', _compileiq.SEARCH_SPACE_ENV, 'to its .bin (the tests never download it)'); sys.exit(0)\n\
         try:\n    search = _compileiq.AcfSearch(directory={dir:?})\n\
         except _compileiq.CompileIQUnavailable as e: print('missing-space:', e); sys.exit(0)\n\
         for _, path in search.ask()[:{count}]: print(path)",
        module = repo("python/kerntune"),
        dir = dir.display().to_string(),
    );
    let output = Command::new("python3").args(["-c", &script]).output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    if let Some(why) = stdout.strip_prefix("missing-compileiq: ") {
        assert!(!required(), "KERNTUNE_REQUIRE_PTXAS is set: {why}");
        eprintln!("skipped: {}", why.trim());
        return None;
    }
    if let Some(why) = stdout.strip_prefix("missing-space: ") {
        eprintln!("skipped: {}", why.trim());
        return None;
    }
    Some(stdout.lines().map(PathBuf::from).collect())
}

/// The vector-add example with one configuration, `compiler` appended, in a fresh folder:
/// the folder and the spec's path.
fn vector_add_with(compiler: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(repo("examples/cuda/vector_add/vector_add.cu"), dir.path().join("vector_add.cu")).expect("copies");
    let spec = std::fs::read_to_string(repo("examples/cuda/vector_add/spec.toml")).expect("reads");
    let spec = spec
        .replace("block_size_x = [64, 128, 256, 512, 1024]\ntile = [1, 2, 4, 8]", "block_size_x = [256]\ntile = [1]");
    std::fs::write(dir.path().join("spec.toml"), format!("{spec}\n{compiler}\n")).expect("writes");
    let path = dir.path().join("spec.toml").display().to_string();
    (dir, path)
}

/// Compiles the spec without a GPU into `db`: the stored cubins and failures, by config.
fn compile_only(spec: &str, db: &Path) -> (Vec<kerntune_store::Artifact>, Vec<(String, String)>) {
    json_of(&kerntune(&["tune", spec, "--compile-only", "--db", &db.display().to_string(), "--json"]));
    let store = Store::open(db).expect("opens");
    let tuning = store.tunings().expect("lists")[0].id;
    let failures = store
        .evaluations(tuning)
        .expect("reads")
        .into_iter()
        .map(|row| (serde_json::to_string(&row.config).expect("json"), row.evaluation.reason.unwrap_or_default()))
        .collect();
    (store.artifacts(tuning, "cubin").expect("reads"), failures)
}

#[test]
fn ptxas_knobs_compile_through_the_chosen_ptxas_into_different_cubins() {
    let Some(ptxas) = pip_ptxas() else { return };
    let (dir, spec) = vector_add_with(&format!(
        "[compiler]\nptxas = {:?}\n[compiler.controls]\nopt_level = [3, 0]\ncutlass_name = [false, true]\nmaxrregcount = [0, 32]",
        ptxas.path.display().to_string()
    ));
    let (cubins, failures) = compile_only(&spec, &dir.path().join("c.db"));
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(cubins.len(), 8);
    let mut distinct: Vec<&[u8]> = cubins.iter().map(|a| a.data.as_slice()).collect();
    distinct.sort();
    distinct.dedup();
    assert!(distinct.len() >= 6, "-O0 against -O3 and a renamed entry change the binary: {} distinct", distinct.len());
    for artifact in &cubins {
        let renamed = artifact.config["cutlass_name"] == serde_json::json!(true);
        assert_eq!(artifact.provenance.contains("\"cutlass_vector_add\""), renamed, "{}", artifact.provenance);
    }
}

#[test]
fn an_acf_this_ptxas_rejects_fails_its_configuration_naming_both_versions() {
    let Some(ptxas) = pip_ptxas() else { return };
    let (dir, spec) = vector_add_with(&format!(
        "[compiler]\nptxas = {:?}\n[compiler.controls]\nacf = [\"none\", \"edited.acf\"]",
        ptxas.path.display().to_string()
    ));
    // An ACF whose bytes were edited (its version field among them): ptxas reads none of it.
    std::fs::write(dir.path().join("edited.acf"), [0x13u8, 0x03, 0xff, 0x00].repeat(64)).expect("writes");
    let (cubins, failures) = compile_only(&spec, &dir.path().join("c.db"));
    assert_eq!(cubins.len(), 1, "the configuration without an ACF compiles");
    assert_eq!(failures.len(), 1, "{failures:?}");
    let reason = &failures[0].1;
    assert!(reason.contains("Invalid compiler controls file"), "{reason}");
    assert!(reason.contains("edited.acf (its version cannot be read)"), "{reason}");
    assert!(reason.contains(&format!("ptxas {}", ptxas.version)), "{reason}");
}

#[test]
fn compileiq_acfs_give_the_cuda_kernel_different_cubins() {
    let Some(ptxas) = pip_ptxas() else { return };
    let acf_dir = tempfile::tempdir().expect("temp dir");
    let Some(acfs) = compileiq_acfs(acf_dir.path(), 2) else { return };
    let names: Vec<String> = acfs.iter().map(|p| format!("{:?}", p.display().to_string())).collect();
    let (dir, spec) = vector_add_with(&format!(
        "[compiler]\nptxas = {:?}\n[compiler.controls]\nacf = [\"none\", {}]",
        ptxas.path.display().to_string(),
        names.join(", ")
    ));
    let (cubins, failures) = compile_only(&spec, &dir.path().join("c.db"));
    assert!(failures.is_empty(), "{failures:?}");
    let mut distinct: Vec<&[u8]> = cubins.iter().map(|a| a.data.as_slice()).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!((cubins.len(), distinct.len()), (3, 3), "each ACF makes its own binary");
}

#[test]
fn a_missing_ptxas_is_a_one_line_error_before_any_work() {
    let (dir, spec) = vector_add_with("[compiler]\nptxas = \"./no-such-ptxas\"");
    let output = kerntune(&["tune", &spec, "--compile-only", "--db", &dir.path().join("c.db").display().to_string()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("[compiler] ptxas") && stderr.contains("no-such-ptxas: no such file"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn a_controls_budget_of_no_candidate_is_refused_in_one_line_before_any_work() {
    let Some(ptxas) = pip_ptxas() else { return };
    let (_dir, spec) = vector_add_with(&format!("[compiler]\nptxas = {:?}", ptxas.path.display().to_string()));
    let output = kerntune(&["tune", &spec, "--controls", "compileiq", "--controls-budget", "0"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs a budget of 1 or more candidate ACF files"), "{stderr}");
}
