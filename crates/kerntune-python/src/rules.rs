//! Rules the Python package applies, declared once in Rust and reached from here: the
//! architecture a compile targets (with that architecture's limits), the store's
//! fingerprint, Kernel Tuner's launch geometry, and the relay that runs a worker on a Ray
//! cluster.

use std::path::PathBuf;

use kerntune_pipeline::{RayGpus, RayRelay, WorkerCommand};
use pyo3::prelude::*;

use crate::errors;

/// The device a compile for `arch` (`sm_90`, `sm_90a`) targets, with that architecture's
/// per-block limits, as JSON; a `SpecError` when `arch` is not an NVIDIA architecture.
#[pyfunction]
pub fn compile_target(arch: &str) -> PyResult<String> {
    let target = kerntune_device::DeviceInfo::compile_target(arch).map_err(errors::spec)?;
    serde_json::to_string(&target).map_err(errors::backend)
}

/// The store's fingerprint of `parts` (16 hexadecimal digits), the one kernel specs get.
#[pyfunction]
pub fn fingerprint(parts: Vec<String>) -> String {
    kerntune_store::fingerprint(&parts)
}

/// Kernel Tuner's launch of one configuration from what `tune_kernel`'s conventions gave
/// for it (`sizes` per axis, the factors of each axis's grid divisor, the block and the
/// dynamic shared memory): `(grid, block, shared_bytes)`; a `ValueError` with the reason
/// the configuration cannot launch.
#[pyfunction]
pub fn kernel_tuner_geometry(
    sizes: [f64; 3],
    divisors: [Vec<f64>; 3],
    block: [i64; 3],
    shared_bytes: i64,
) -> PyResult<([u32; 3], [u32; 3], u32)> {
    let geometry =
        kerntune_lang_cuda::divided_geometry(sizes, &divisors, block, shared_bytes).map_err(errors::launch)?;
    Ok((geometry.grid, geometry.block, geometry.shared_bytes))
}

/// The command (program first) that runs `argv` as a worker in a Ray actor on the cluster
/// at `address`, through `python`'s relay: `env` names the variables passed on, `ship` the
/// files written at the same path on the actor's node, `gpus` the GPUs the actor holds.
#[pyfunction]
#[pyo3(signature = (python, address, argv, env, ship, gpus))]
pub fn ray_command(
    python: String,
    address: String,
    argv: Vec<String>,
    env: Vec<String>,
    ship: Vec<PathBuf>,
    gpus: usize,
) -> PyResult<Vec<String>> {
    let (program, args) = argv.split_first().ok_or_else(|| errors::spec("a worker's command is empty"))?;
    let mut worker = WorkerCommand::new(program, args.to_vec());
    worker.env = env.into_iter().map(|name| (name, String::new())).collect();
    let relayed = RayRelay { address, python }.wrap_shipping(&worker, gpus, &ship);
    Ok(std::iter::once(relayed.program.display().to_string()).chain(relayed.args).collect())
}

/// How many of the Ray cluster's GPUs at `address` measure, checked by `python`'s relay:
/// `count` of them, or every one with `all` (0 and not `all`: none, this machine's measure);
/// a `BackendError` with the one-line reason when the cluster cannot serve that.
#[pyfunction]
pub fn ray_check(py: Python<'_>, python: String, address: String, count: usize, all: bool) -> PyResult<usize> {
    let gpus = match (all, count) {
        (true, _) => Some(RayGpus::All),
        (false, 0) => None,
        (false, n) => Some(RayGpus::Count(n)),
    };
    py.detach(|| RayRelay { address, python }.measuring_gpus(gpus).map_err(errors::backend))
}
