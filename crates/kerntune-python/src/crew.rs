//! The workers this process keeps between its tunings while `kerntune._crew.kept()` asks
//! (a model's GEMMs, a many-shape run's sizes): see `kerntune_pipeline::Crew`.

use std::sync::atomic::{AtomicBool, Ordering};

use kerntune_pipeline::Kept;
use kerntune_run::{start_crew, Front, Tuning, Workers};
use pyo3::prelude::*;

static KEPT: Kept = Kept::new();
static KEEPING: AtomicBool = AtomicBool::new(false);

/// Keeps each tuning's workers for the next (`keep`), or stops keeping them: the workers
/// kept now stop.
#[pyfunction]
pub fn keep_workers(py: Python<'_>, keep: bool) {
    KEEPING.store(keep, Ordering::SeqCst);
    if !keep {
        py.detach(|| KEPT.release());
    }
}

/// The worker programs of a tuning, as a Triton job names them (`kerntune._job`).
#[derive(serde::Deserialize)]
struct Commands {
    bench_worker: Vec<String>,
    compile_worker: Vec<String>,
    #[serde(default)]
    worker_env: std::collections::BTreeMap<String, String>,
}

/// Starts the workers (`commands`: JSON of `bench_worker`, `compile_worker` and
/// `worker_env`) that a tuning of `request` (JSON) will ask for, and keeps them for it; the
/// next tuning inside `kerntune._crew.kept()` starts on them. Returns why not, where they
/// could not start (the tuning then starts its own and says what is wrong).
#[pyfunction]
pub fn start_workers(py: Python<'_>, commands: &str, request: &str) -> PyResult<Option<String>> {
    let request = crate::tuning::request_of(request)?;
    let commands: Commands = serde_json::from_str(commands).map_err(crate::errors::spec)?;
    let env: Vec<(String, String)> = commands.worker_env.into_iter().collect();
    let command = |argv: &[String]| crate::tuning::worker_command(argv, env.clone());
    let workers = Workers::new(command(&commands.bench_worker)?, command(&commands.compile_worker)?);
    Ok(py.detach(|| match start_crew(&workers, &request, Front::Python) {
        Ok(crew) => {
            KEPT.put(crew);
            None
        }
        Err(error) => Some(error.to_string()),
    }))
}

/// `tuning`, on the kept workers and leaving its own, while this process keeps them.
pub(crate) fn keeping<'a>(tuning: Tuning<'a>) -> Tuning<'a> {
    if KEEPING.load(Ordering::SeqCst) {
        tuning.keeping_workers_in(&KEPT)
    } else {
        tuning
    }
}
