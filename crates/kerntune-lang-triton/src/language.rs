//! Triton on the GPU pipeline: compile jobs for the Triton compile worker, and launches in
//! Triton's ABI.

use std::time::Duration;

use kerntune_device::{DeviceInfo, Init};
use kerntune_engine::objective::Formula;
use kerntune_pipeline::protocol::{ArgSetup, CompileJob, GivenSet, KernelImage, ReferenceSetup, Setup};
use kerntune_pipeline::{Binary, EnergyMode, Geometry, Language, LanguageError, Timing};
use kerntune_space::{Param, Value};
use kerntune_store::{Objective, TuningInfo};
use serde_json::Map;

use kerntune_pipeline::controls::Controls;

use crate::error::LaunchError;
use crate::job::{is_compilers_choice, is_control_option, JobError, TritonArg, TritonJob, OPTION_NAMES};

/// The launch grid of a configuration (in programs, before `num_ctas`): the user's grid
/// function or expression.
pub type GridFn<'a> = Box<dyn Fn(&[Value]) -> Result<[u64; 3], String> + 'a>;

/// The block shape of each host-side tensor descriptor argument under a configuration, by
/// argument name (`[64, 64]`): what the user's `pre_hook` sets, which Triton compiles into
/// the kernel's signature and the benchmark worker encodes into the descriptor.
pub type DescriptorFn<'a> = Box<dyn Fn(&[Value]) -> Result<Map<String, serde_json::Value>, String> + 'a>;

pub struct TritonLanguage<'a> {
    job: &'a TritonJob,
    params: Vec<Param>,
    grid: GridFn<'a>,
    descriptors: Option<DescriptorFn<'a>>,
    timing: Timing,
    objective: Objective,
    objective_expression: Option<Formula>,
}

impl std::fmt::Debug for TritonLanguage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TritonLanguage").field("kernel", &self.job.kernel_name).finish()
    }
}

impl<'a> TritonLanguage<'a> {
    pub fn new(job: &'a TritonJob, grid: GridFn<'a>) -> Result<TritonLanguage<'a>, JobError> {
        let params = job.param_list()?;
        let objective_expression = job.objective_formula(&params)?;
        let objective = match &job.objective {
            None => Objective::time(),
            Some(spec) => {
                let mut objective = Objective::named(&spec.name);
                if let Some(higher) = spec.higher_is_better {
                    objective.higher_is_better = higher;
                }
                objective
            }
        };
        let mut timing = job.timing()?;
        if objective_expression.as_ref().is_some_and(Formula::needs_energy) {
            timing.energy = EnergyMode::Require;
        }
        Ok(TritonLanguage { job, timing, params, grid, descriptors: None, objective, objective_expression })
    }

    /// The kernel takes host-side tensor descriptors whose block shapes `descriptors` gives.
    pub fn with_descriptors(mut self, descriptors: DescriptorFn<'a>) -> Self {
        self.descriptors = Some(descriptors);
        self
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    pub fn objective(&self) -> &Objective {
        &self.objective
    }

    fn option(&self, config: &[Value], name: &str) -> Option<Value> {
        self.params.iter().position(|p| p.name() == name).map(|i| config[i].clone())
    }

    fn option_int(&self, config: &[Value], name: &str, default: i64) -> i64 {
        self.option(config, name).and_then(|v| v.as_int()).unwrap_or(default)
    }

    /// Why a configuration cannot launch on `device`, known before compiling.
    fn check_launch(&self, config: &[Value], device: &DeviceInfo) -> Result<(), LaunchError> {
        let num_warps = self.option_int(config, "num_warps", 4);
        let threads = 32 * num_warps;
        if threads > i64::from(device.max_threads_per_block) || num_warps < 1 {
            return Err(LaunchError::Warps { num_warps, threads, allowed: device.max_threads_per_block });
        }
        let num_ctas = self.option_int(config, "num_ctas", 1);
        if num_ctas > 1 && device.compute_capability.0 < 9 {
            return Err(LaunchError::Clusters(num_ctas));
        }
        Ok(())
    }

    /// The compile job of a configuration, or why it cannot launch on `device`.
    fn build_job(&self, config: &[Value], device: &DeviceInfo) -> Result<CompileJob, LaunchError> {
        self.check_launch(config, device)?;
        let mut constexprs = Map::new();
        let mut options = Map::new();
        for (param, value) in self.params.iter().zip(config) {
            let json = value.to_json();
            if !OPTION_NAMES.contains(&param.name()) {
                constexprs.insert(param.name().to_string(), json);
            } else if !is_compilers_choice(param.name(), &json) && !is_control_option(param.name()) {
                options.insert(param.name().to_string(), json);
            }
        }
        let controls = Controls::of(&self.params, config, is_control_option, std::path::Path::new(""))
            .map_err(LaunchError::Controls)?;
        let mut words: Vec<String> =
            options.get("ptx_options").and_then(|v| v.as_str()).map(|text| vec![text.to_string()]).unwrap_or_default();
        words.extend(controls.args);
        if !words.is_empty() {
            options.insert("ptx_options".into(), words.join(" ").into());
        }
        let descriptors = match &self.descriptors {
            Some(blocks) => blocks(config).map_err(LaunchError::Front)?,
            None => Map::new(),
        };
        Ok(CompileJob::Triton { constexprs, options, descriptors, setup: Some(self.job.compile_setup.clone()) })
    }

    /// How a compiled configuration launches; an error is why it cannot.
    fn image(&self, config: &[Value], binary: Binary) -> Result<KernelImage, LaunchError> {
        let Binary { cubin, launch, .. } = binary;
        let launch = launch.ok_or(LaunchError::NoLaunchInfo)?;
        let programs = (self.grid)(config).map_err(LaunchError::Front)?;
        let grid_x = programs[0].checked_mul(u64::from(launch.num_ctas)).ok_or(LaunchError::GridOverflow)?;
        let limits = [(1u64 << 31) - 1, 65_535, 65_535];
        let grid = [grid_x, programs[1], programs[2]];
        for axis in 0..3 {
            if grid[axis] == 0 || grid[axis] > limits[axis] {
                let axis_name = ['x', 'y', 'z'][axis];
                return Err(LaunchError::Grid { axis: axis_name, programs: grid[axis], limit: limits[axis] });
            }
        }
        Ok(KernelImage {
            cubin: kerntune_pipeline::protocol::Bytes(cubin),
            name: launch.name.clone(),
            geometry: Geometry {
                grid: grid.map(|g| g as u32),
                block: [32 * launch.num_warps, 1, 1],
                shared_bytes: launch.shared_bytes,
            },
            params: Some(launch.params),
            cluster_x: launch.num_ctas.max(1),
            edges: Vec::new(),
        })
    }
}

impl Language for TritonLanguage<'_> {
    fn kernel_name(&self) -> &str {
        &self.job.kernel_name
    }

    fn tuning_info(&self, device: &str) -> TuningInfo {
        self.job.tuning_info(device, self.params.clone(), self.objective.clone())
    }

    /// The reference is expected outputs (the user's `answer`, or what Triton computed) on
    /// the call's own tensors, and on each input set the front drew and computed too.
    fn verified_sets(&self) -> u32 {
        self.job.reference.as_ref().map_or(0, |_| 1 + self.job.extra_sets.len() as u32)
    }

    fn preflight(&self) -> Result<(), LanguageError> {
        let Some(chosen) = &self.job.ptxas else { return Ok(()) };
        let ptxas = kerntune_device::ptxas::Ptxas { path: chosen.path.clone(), version: chosen.version.clone() };
        ptxas.check().map_err(|e| LanguageError::Toolchain(e.to_string()))
    }

    fn compiler(&self) -> Option<String> {
        self.job.ptxas.as_ref().map(|p| format!("ptxas {} ({})", p.version, p.path.display()))
    }

    /// Compiler controls reach Triton's ptxas (`TRITON_PTXAS_PATH`, the chosen one) as
    /// words of `ptx_options`, after the configuration's own.
    fn compile_job(&self, config: &[Value], device: &DeviceInfo) -> Result<CompileJob, LanguageError> {
        Ok(self.build_job(config, device)?)
    }

    fn kernel_image(&self, config: &[Value], binary: Binary) -> Result<KernelImage, LanguageError> {
        Ok(self.image(config, binary)?)
    }

    fn objective(
        &self,
        config: &[Value],
        time_ms: f64,
        metrics: &Map<String, serde_json::Value>,
    ) -> Result<f64, LanguageError> {
        let Some(formula) = &self.objective_expression else { return Ok(time_ms) };
        let mut values: Vec<Value> = config.to_vec();
        if let Some(spec) = &self.job.objective {
            values.extend(spec.values.values().map(|v| Value::from_json(v).unwrap_or(Value::Int(0))));
        }
        formula.evaluate(&values, time_ms, metrics).map_err(LanguageError::Objective)
    }

    fn early_stop_applies(&self) -> bool {
        self.objective_expression.as_ref().is_none_or(|f| f.monotone_in_time(0..self.params.len()))
    }

    fn setup(
        &self,
        _device: &DeviceInfo,
        _compile: &mut dyn FnMut(CompileJob) -> Result<Binary, String>,
    ) -> Result<Setup, LanguageError> {
        let args = self
            .job
            .args
            .iter()
            .map(|arg| match arg {
                TritonArg::Buffer { name, dtype, len, file, output, poison, reset } => ArgSetup::Buffer {
                    name: name.clone(),
                    dtype: *dtype,
                    len: *len,
                    init: Init::Raw(file.clone()),
                    output: *output,
                    poison: *poison,
                    seed: 0,
                    reset: *reset,
                },
                TritonArg::Scalar { name, bytes } => ArgSetup::Scalar { name: name.clone(), bytes: bytes.clone() },
                // Never passed: the compiled kernel's parameter list leaves it out.
                TritonArg::Constant { name } => ArgSetup::Scalar { name: name.clone(), bytes: Default::default() },
            })
            .collect();
        let (reference, tolerances) = match &self.job.reference {
            None => (None, Vec::new()),
            Some(outputs) => (
                Some(ReferenceSetup::Outputs {
                    data: outputs.iter().map(|o| Init::Raw(o.file.clone())).collect(),
                    sets: self
                        .job
                        .extra_sets
                        .iter()
                        .map(|set| GivenSet {
                            inputs: set.inputs.iter().map(|(p, file)| (*p, Init::Raw(file.clone()))).collect(),
                            expected: set.expected.iter().map(|file| Init::Raw(file.clone())).collect(),
                        })
                        .collect(),
                }),
                outputs.iter().map(|o| (o.position, o.atol, o.rtol)).collect(),
            ),
        };
        Ok(Setup {
            args,
            timing: self.timing.clone(),
            reference,
            tolerances,
            bitwise: false,
            verify_sets: 0,
            constants: Vec::new(),
            outputs_dir: None,
            edges: Vec::new(),
            relocations: self.job.relocations.clone(),
        })
    }

    fn launch_timeout(&self) -> Duration {
        self.timing.launch_timeout
    }

    fn compile_timeout(&self) -> Duration {
        self.timing.compile_timeout
    }

    fn compile_timeout_adapts(&self) -> bool {
        self.timing.compile_timeout_adapts
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A job of one input and one checked output, with `sets` further input sets.
    fn job(sets: usize) -> TritonJob {
        let extra: Vec<_> = (1..=sets)
            .map(|set| json!({ "inputs": [[0, format!("x.set{set}.bin")]], "expected": [format!("y.set{set}.bin")] }))
            .collect();
        serde_json::from_value(json!({
            "kernel_name": "k",
            "params": { "BLOCK": [128, 256] },
            "args": [
                { "kind": "buffer", "name": "x", "dtype": "f32", "len": 16, "file": "x.bin", "output": false },
                { "kind": "buffer", "name": "y", "dtype": "f32", "len": 16, "file": "y.bin", "output": true },
                { "kind": "constant", "name": "BLOCK" },
            ],
            "reference": [{ "position": 1, "file": "y.expected.bin", "atol": 0.01, "rtol": 0.01 }],
            "extra_sets": extra,
            "fingerprint": "f",
            "problem": {},
            "compile_worker": ["python"],
            "compile_setup": "/tmp/setup.json",
            "bench_worker": ["kerntune"],
        }))
        .expect("a job")
    }

    #[test]
    fn the_fronts_input_sets_reach_the_setup_and_count_as_verified_sets() {
        let job = job(2);
        let language = TritonLanguage::new(&job, Box::new(|_: &[Value]| Ok([1, 1, 1]))).expect("a language");
        assert_eq!(language.verified_sets(), 3);
        let device = DeviceInfo::compile_target("sm_90").expect("a target");
        let setup = language.setup(&device, &mut |_| Err("no compile".into())).expect("a setup");
        let Some(ReferenceSetup::Outputs { data, sets }) = setup.reference else { panic!("{:?}", setup.reference) };
        assert_eq!(data, [Init::Raw("y.expected.bin".into())]);
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[1].inputs, [(0, Init::Raw("x.set2.bin".into()))]);
        assert_eq!(sets[1].expected, [Init::Raw("y.set2.bin".into())]);
    }

    #[test]
    fn without_a_reference_no_set_is_verified() {
        let mut job = job(2);
        job.reference = None;
        let language = TritonLanguage::new(&job, Box::new(|_: &[Value]| Ok([1, 1, 1]))).expect("a language");
        assert_eq!(language.verified_sets(), 0);
    }
}
