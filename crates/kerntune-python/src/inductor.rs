//! What `kerntune.torch` (TorchInductor's GEMM choices) keeps in the results store and the
//! rule by which a Triton template replaces ATen's GEMM. Torch's side (its lookup keys, its
//! hooks, timing both kernels) is the Python package's; the store and the verdict are here,
//! where the finalists' rule already lives.

use std::path::PathBuf;

use kerntune_pipeline::finalists::{decide, paired_ratio, Verdict};
use pyo3::prelude::*;
use serde_json::{json, Map, Value};

use crate::errors;

/// The artifact kind under which a GEMM's choice for Inductor is kept with its tuning.
const CHOICE: &str = "inductor_choice";

/// Keeps `choice` (JSON: the lookup key, the table entry and how it was chosen) with the
/// tuning numbered `tuning`, at its configuration `config` (JSON object).
#[pyfunction]
pub fn save_inductor_choice(py: Python<'_>, db: PathBuf, tuning: i64, config: &str, choice: &str) -> PyResult<()> {
    let config: Map<String, Value> = serde_json::from_str(config).map_err(errors::spec)?;
    let _: Value = serde_json::from_str(choice).map_err(errors::spec)?;
    py.detach(|| {
        let store = kerntune_store::Store::open(&db).map_err(errors::store)?;
        let Some(id) = store.tuning_numbered(tuning).map_err(errors::store)? else {
            return Err(errors::store(format!("{}: no tuning numbered {tuning}", db.display())));
        };
        store.save_artifact(id, &config, CHOICE, choice.as_bytes(), "kerntune.torch").map_err(errors::store)
    })
}

/// Every GEMM choice for Inductor kept in the store at `db`, oldest first, as a JSON list of
/// what `save_inductor_choice` was given (an absent store holds none).
#[pyfunction]
pub fn inductor_choices(py: Python<'_>, db: PathBuf) -> PyResult<String> {
    py.detach(|| {
        if !db.exists() {
            return Ok("[]".to_string());
        }
        let store = kerntune_store::Store::open(&db).map_err(errors::store)?;
        let mut choices = Vec::new();
        for (_, artifact) in store.artifacts_of_kind(CHOICE).map_err(errors::store)? {
            if let Ok(choice) = serde_json::from_slice::<Value>(&artifact.data) {
                choices.push(choice);
            }
        }
        Ok(Value::Array(choices).to_string())
    })
}

/// Whether a contender (a tuned Triton template) replaces the incumbent (ATen's GEMM),
/// from times taken in interleaved rounds: the incumbent's, a second copy of the
/// incumbent's (the A/A control) and the contender's, one of each per round. The rule is
/// the finalists' (`kerntune_pipeline::finalists::decide`): the contender wins only when
/// its ratio's interval lies wholly below the control's. Returns JSON: `control` and
/// `contender` (ratio, low, high), `verdict` and `replaces`.
#[pyfunction]
pub fn replaces_incumbent(incumbent: Vec<f64>, copy: Vec<f64>, contender: Vec<f64>, blocks: usize) -> PyResult<String> {
    let rounds = incumbent.len();
    if rounds == 0 || copy.len() != rounds || contender.len() != rounds || blocks == 0 || blocks > rounds {
        return Err(errors::spec(format!(
            "replaces_incumbent: {rounds} rounds of the incumbent, {} of its copy, {} of the contender, {blocks} \
             blocks: give the same number of rounds of each, at least one per block",
            copy.len(),
            contender.len()
        )));
    }
    let control = paired_ratio(&incumbent, &copy, blocks);
    let ratio = paired_ratio(&incumbent, &contender, blocks);
    let (_, verdict) = decide(&control, &[ratio]);
    Ok(json!({
        "control": control,
        "contender": ratio,
        "verdict": verdict,
        "replaces": verdict == Verdict::Overtaken,
    })
    .to_string())
}
