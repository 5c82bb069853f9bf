//! Dispatch tables for `kerntune._dispatch`: the table file's format, the nearest-key rule
//! and the exports (vLLM's fused-MoE file, a C/C++ header), all from kerntune-store's
//! `formats::dispatch`, as the CLI uses them. Tables and keys cross as JSON text; errors
//! are `SpecError`s naming the table as `origin` does.

use std::path::PathBuf;

use kerntune_store::formats::dispatch::{self, DispatchTable, TableFormat};
use pyo3::prelude::*;
use serde_json::Value as Json;

use crate::errors;

fn parse_table(table: &str) -> PyResult<DispatchTable> {
    serde_json::from_str(table).map_err(|error| errors::spec(format!("a dispatch table: {error}")))
}

/// The text of the table file of `table` (JSON: `kernel`, `key`, `entries`).
#[pyfunction]
pub fn table_text(table: &str) -> PyResult<String> {
    Ok(parse_table(table)?.text())
}

/// The table in the file at `path` (JSON: `kernel`, `key`, `entries`), refused when it is
/// not a table of `kernel` keyed by `key` where those are given; `origin` names it in errors.
#[pyfunction]
#[pyo3(signature = (path, origin, kernel = None, key = None))]
pub fn table_read(path: PathBuf, origin: &str, kernel: Option<&str>, key: Option<Vec<String>>) -> PyResult<String> {
    let text = std::fs::read_to_string(&path).map_err(|error| errors::spec(format!("{origin}: {error}")))?;
    let table = DispatchTable::parse(&text, origin).map_err(errors::spec)?;
    if let (Some(kernel), Some(key)) = (kernel, key) {
        table.check_for(kernel, &key, origin).map_err(errors::spec)?;
    }
    serde_json::to_string(&table).map_err(errors::spec)
}

/// The index in `tuned` (a JSON list of keys) of the key nearest `key` (JSON), or `None`
/// when none can stand for it.
#[pyfunction]
pub fn table_nearest(key: &str, tuned: &str) -> PyResult<Option<usize>> {
    let key: Json = serde_json::from_str(key).map_err(errors::spec)?;
    let tuned: Vec<Json> = serde_json::from_str(tuned).map_err(errors::spec)?;
    Ok(dispatch::nearest(&key, &tuned))
}

/// Writes `table` (JSON) as the file `request` asks for (JSON: `format` and its options)
/// to `output`, under the format's own name when `output` is a folder; returns the path
/// written and the number of entries. `origin` names the table in errors.
#[pyfunction]
pub fn table_export(table: &str, origin: &str, request: &str, output: PathBuf) -> PyResult<(String, usize)> {
    let table = parse_table(table)?;
    let format: TableFormat =
        serde_json::from_str(request).map_err(|error| errors::spec(format!("export options: {error}")))?;
    let export = table.export(&format, origin).map_err(errors::spec)?;
    let path = export.write(&output).map_err(errors::store)?;
    Ok((path.display().to_string(), export.entries))
}
