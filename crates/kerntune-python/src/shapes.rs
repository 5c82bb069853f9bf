//! Many-shape runs, reached from Python: which size lists are accepted and the run's report
//! per size. The loop over the sizes is the Python package's (each size's arguments are
//! the caller's to make); what a size learns from is in each size's request.

use kerntune_run::{Shape, ShapeRow, Transfer};
use pyo3::prelude::*;

use crate::errors;

/// Why the sizes (JSON, a list of objects) cannot make a many-shape run, in one line; `None`
/// when they can. The caller raises it as its own `ArgumentError`.
#[pyfunction]
pub fn shapes_refusal(shapes: &str) -> PyResult<Option<String>> {
    let shapes: Vec<Shape> = serde_json::from_str(shapes)
        .map_err(|e| errors::spec(format!("shapes: give a list of dicts of the variables that differ ({e})")))?;
    Ok(kerntune_run::check_shapes(&shapes).err().map(|e| e.to_string()))
}

/// The report of a many-shape run from its sizes' lines (JSON, a list of the `shape`
/// entries of each size's result).
#[pyfunction]
pub fn shapes_table(rows: &str, objective: &str) -> PyResult<String> {
    let rows: Vec<ShapeRow> = serde_json::from_str(rows).map_err(errors::spec)?;
    Ok(kerntune_run::shapes_table(&rows, objective))
}

/// A size (JSON, an object of its variables) as the report names it: `M=64, N=4096`.
#[pyfunction]
pub fn shape_label(shape: &str) -> PyResult<String> {
    let shape: Shape = serde_json::from_str(shape).map_err(errors::spec)?;
    Ok(kerntune_run::shape_label(&shape))
}

/// The size a size learns from (`transfer`: JSON, a `kerntune_run::Transfer`), as JSON, or
/// `None` when it learns from none (no size tuned before it is near: other variables, other
/// non-numeric values).
#[pyfunction]
pub fn transfer_nearest(transfer: &str) -> PyResult<Option<String>> {
    let transfer: Transfer = serde_json::from_str(transfer).map_err(errors::spec)?;
    transfer.nearest().map(|tuned| serde_json::to_string(&tuned.shape).map_err(errors::spec)).transpose()
}
