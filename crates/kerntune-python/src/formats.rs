//! The files kerntune shares with other tools, written by the Rust writers that the CLI
//! uses too: T4 results files (from `tune_kernel`'s results list, as Kernel Tuner's
//! `file_utils` writes them, or from a stored tuning, as `kerntune export` writes them) and
//! Kernel Tuner's cache file (`cache=`).

use std::path::PathBuf;

use kerntune_store::formats::{kernel_tuner, t4, Exchange};
use kerntune_store::Store;
use pyo3::prelude::*;
use serde_json::Value as Json;

use crate::errors;

fn list(text: &str, what: &str) -> PyResult<Vec<Json>> {
    match serde_json::from_str(text).map_err(errors::spec)? {
        Json::Array(items) => Ok(items),
        _ => Err(errors::spec(format!("{what}: expected a JSON list"))),
    }
}

/// The T4 document (JSON) of `results`, `tune_kernel`'s results list as JSON, whose
/// parameters are `names`.
#[pyfunction]
pub fn t4_results(results: &str, names: Vec<String>, objective: &str) -> PyResult<String> {
    let rows = kernel_tuner::results(&list(results, "results")?, &names, objective).map_err(errors::store)?;
    Ok(t4::results_document(objective, &rows).to_string())
}

/// The text of Kernel Tuner's cache file `document` (its header and the entries it holds,
/// as JSON) with `results` (`tune_kernel`'s results list, as JSON) in it, each in place of
/// the entry of its configuration.
#[pyfunction]
pub fn kernel_tuner_cache(document: &str, results: &str) -> PyResult<String> {
    let mut document: Json = serde_json::from_str(document).map_err(errors::spec)?;
    kernel_tuner::add_results(&mut document, &list(results, "results")?).map_err(errors::store)?;
    Ok(kernel_tuner::text(&document))
}

/// The Kernel Tuner cache document at `path` (JSON), closed as Kernel Tuner would read it
/// where its run left it open for appending; `None` when there is no such file.
#[pyfunction]
pub fn kernel_tuner_document(path: PathBuf) -> PyResult<Option<String>> {
    if !path.is_file() {
        return Ok(None);
    }
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| errors::store(format!("{origin}: {e}")))?;
    let document = kernel_tuner::document(&text, &origin).map_err(errors::store)?;
    Ok(Some(Json::Object(document).to_string()))
}

/// The key of `config` (JSON) in a cache whose parameters are `names`.
#[pyfunction]
pub fn kernel_tuner_key(names: Vec<String>, config: &str) -> PyResult<String> {
    let config: serde_json::Map<String, Json> = serde_json::from_str(config).map_err(errors::spec)?;
    Ok(kernel_tuner::key(&names.iter().map(String::as_str).collect::<Vec<_>>(), &config))
}

/// The text of the tuning in the store `db` as a `format` file (`"t4"` or
/// `"kernel_tuner"`), the tuning of kernel `kernel` where the store holds several.
#[pyfunction]
#[pyo3(signature = (db, format, kernel = None))]
pub fn export_text(py: Python<'_>, db: PathBuf, format: &str, kernel: Option<String>) -> PyResult<String> {
    let exchange = match format {
        "t4" => Exchange::T4,
        "kernel_tuner" => Exchange::KernelTuner,
        other => return Err(errors::spec(format!("format {other:?}: give \"t4\" or \"kernel_tuner\""))),
    };
    py.detach(|| {
        if !db.exists() {
            return Err(errors::store(format!("{}: no such results database", db.display())));
        }
        let store = Store::open(&db).map_err(errors::store)?;
        let tuning = store.one_tuning(kernel.as_deref()).map_err(errors::store)?;
        let rows = store.evaluations(tuning.id).map_err(errors::store)?;
        Ok(exchange.text(&tuning.info, &rows))
    })
}
