//! The extension module `kerntune._kerntune`: thin bindings over kerntune's Rust crates.
//!
//! The friendly API lives in the pure-Python package (`python/kerntune/`); this module
//! offers what it needs: tuning a Triton kernel or a CUDA C kernel with Kernel Tuner's
//! conventions, each described by a JSON job, compiling either without a GPU, enumerating
//! a space, dispatch tables and their exports, and the worker processes' entry points.
//! Results cross as JSON text. Every error kind maps to a Python exception class of its
//! own (`errors.rs`). Long calls release the GIL and check for Ctrl-C after every
//! evaluation.

mod crew;
mod errors;
mod formats;
mod inductor;
mod kernel_tuner;
mod rules;
mod shapes;
mod tables;
mod tuning;

use pyo3::prelude::*;

/// Runs the benchmark worker on standard input and output (see `kerntune._worker`).
#[pyfunction]
fn run_bench_worker(py: Python<'_>, device: usize) -> i32 {
    py.detach(|| kerntune_pipeline::run_bench_worker(device))
}

/// Runs the NVRTC compile worker on standard input and output.
#[pyfunction]
fn run_compile_worker(py: Python<'_>) -> i32 {
    py.detach(kerntune_pipeline::run_compile_worker)
}

/// The results database used when none is given.
#[pyfunction]
fn default_db() -> String {
    kerntune_store::Store::default_path().display().to_string()
}

/// Writes the HTML report of the store at `db` (every tuning, or the one numbered
/// `tuning`) to `path`.
#[pyfunction]
#[pyo3(signature = (db, path, tuning = None))]
fn write_report(py: Python<'_>, db: std::path::PathBuf, path: std::path::PathBuf, tuning: Option<i64>) -> PyResult<()> {
    py.detach(|| {
        if !db.exists() {
            return Err(errors::store(format!("{}: no such results database", db.display())));
        }
        let store = kerntune_store::Store::open(&db).map_err(errors::store)?;
        let page = kerntune_run::report::html::page(&store, tuning).map_err(errors::report)?;
        std::fs::write(&path, page).map_err(|e| errors::store(format!("writing {}: {e}", path.display())))
    })
}

/// The valid configurations of `params` (a JSON object of `name: [values]`) under
/// `restrictions`, as a JSON list of objects, at most `limit` of them, in order.
#[pyfunction]
#[pyo3(signature = (params, restrictions, limit = None))]
fn valid_configs(params: &str, restrictions: Vec<String>, limit: Option<usize>) -> PyResult<String> {
    let space = tuning::space_of(params, &restrictions)?;
    let configs: Vec<serde_json::Value> = space
        .ids()
        .take(limit.unwrap_or(usize::MAX))
        .map(|id| serde_json::Value::Object(space.config_json(id)))
        .collect();
    Ok(serde_json::Value::Array(configs).to_string())
}

/// Triton's compile options as kerntune tunes them, declared once (in Rust): `names`, the
/// `defaults` a configuration that leaves one out gets, and the `compilers_choice` values a
/// launch spells by leaving the option out. JSON.
#[pyfunction]
fn triton_options() -> String {
    use kerntune_lang_triton::{is_compilers_choice, option_default, OPTION_NAMES};
    let defaults: serde_json::Map<String, serde_json::Value> =
        OPTION_NAMES.iter().filter_map(|name| Some((name.to_string(), option_default(name)?))).collect();
    let compilers_choice: serde_json::Map<String, serde_json::Value> = defaults
        .iter()
        .filter(|(name, value)| is_compilers_choice(name, value))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    serde_json::json!({"names": OPTION_NAMES, "defaults": defaults, "compilers_choice": compilers_choice}).to_string()
}

#[pymodule]
fn _kerntune(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    // NVIDIA's wheels (NVRTC, ptxas) are looked up in the environment of this Python.
    let executable: String = m.py().import("sys")?.getattr("executable")?.extract()?;
    if !executable.is_empty() {
        kerntune_device::wheels::set_host_python(executable.into());
    }
    m.add_function(wrap_pyfunction!(run_bench_worker, m)?)?;
    m.add_function(wrap_pyfunction!(run_compile_worker, m)?)?;
    m.add_function(wrap_pyfunction!(default_db, m)?)?;
    m.add_function(wrap_pyfunction!(valid_configs, m)?)?;
    m.add_function(wrap_pyfunction!(write_report, m)?)?;
    m.add_function(wrap_pyfunction!(triton_options, m)?)?;
    m.add_function(wrap_pyfunction!(tuning::tune_triton, m)?)?;
    m.add_function(wrap_pyfunction!(crew::keep_workers, m)?)?;
    m.add_function(wrap_pyfunction!(crew::start_workers, m)?)?;
    m.add_function(wrap_pyfunction!(tuning::compile_triton, m)?)?;
    m.add_function(wrap_pyfunction!(tuning::device_info, m)?)?;
    m.add_function(wrap_pyfunction!(tuning::check_search, m)?)?;
    m.add_function(wrap_pyfunction!(tuning::request_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(shapes::shapes_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(shapes::shapes_table, m)?)?;
    m.add_function(wrap_pyfunction!(shapes::shape_label, m)?)?;
    m.add_function(wrap_pyfunction!(shapes::transfer_nearest, m)?)?;
    m.add_function(wrap_pyfunction!(formats::t4_results, m)?)?;
    m.add_function(wrap_pyfunction!(formats::kernel_tuner_cache, m)?)?;
    m.add_function(wrap_pyfunction!(formats::kernel_tuner_key, m)?)?;
    m.add_function(wrap_pyfunction!(formats::kernel_tuner_document, m)?)?;
    m.add_function(wrap_pyfunction!(formats::export_text, m)?)?;
    m.add_function(wrap_pyfunction!(tables::table_text, m)?)?;
    m.add_function(wrap_pyfunction!(tables::table_read, m)?)?;
    m.add_function(wrap_pyfunction!(tables::table_nearest, m)?)?;
    m.add_function(wrap_pyfunction!(tables::table_export, m)?)?;
    m.add_function(wrap_pyfunction!(inductor::save_inductor_choice, m)?)?;
    m.add_function(wrap_pyfunction!(inductor::inductor_choices, m)?)?;
    m.add_function(wrap_pyfunction!(inductor::replaces_incumbent, m)?)?;
    m.add_function(wrap_pyfunction!(rules::compile_target, m)?)?;
    m.add_function(wrap_pyfunction!(rules::fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(rules::kernel_tuner_geometry, m)?)?;
    m.add_function(wrap_pyfunction!(rules::ray_command, m)?)?;
    m.add_function(wrap_pyfunction!(rules::ray_check, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_tuner::tune_kernel_tuner, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_tuner::compile_kernel_tuner, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
