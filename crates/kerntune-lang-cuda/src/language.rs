//! The CUDA C language: configurations of a [`KernelSpec`] become NVRTC compile jobs (the
//! parameters as `#define`s, the options filled in), launched with the spec's geometry
//! under the kernel's symbol that NVRTC reports (so C++ and templated kernels work).
//!
//! A front with conventions of its own (Kernel Tuner's, applied in Python) can supply
//! each configuration's source, kernel name and geometry ([`Instance`]), `__constant__`
//! contents, and a check of the outputs that it runs itself ([`OutputCheck`]).

use std::path::PathBuf;
use std::time::Duration;

use kerntune_device::DeviceInfo;
use kerntune_pipeline::protocol::{ArgSetup, Bytes, CompileJob, EdgeSetup, KernelImage, ReferenceSetup, Setup};
use kerntune_pipeline::refillable;
use kerntune_pipeline::{Binary, EnergyMode, Flush, Geometry, Language, LanguageError, Timing};

use crate::error::LimitError;
use kerntune_space::{Expression, Space, Value};
use kerntune_store::TuningInfo;

use crate::spec::{ArgKind, KernelSpec, Reference, Verify};

/// What one configuration compiles and how it launches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The complete source, definitions included.
    pub source: String,
    /// The kernel's C++ name expression (`matmul`, `kernel<float, 4>`).
    pub name: String,
    pub geometry: Geometry,
}

/// A configuration's instance, or why it cannot run (it is then `invalid_config`).
pub type InstanceFn<'a> = Box<dyn Fn(&[Value]) -> Result<Instance, String> + 'a>;

/// Judges a configuration's outputs from their files (by argument position): why they
/// are wrong, if they are.
pub type CheckFn<'a> = Box<dyn Fn(&[Value], &[(usize, PathBuf)]) -> Result<(), String> + 'a>;

/// A check of a configuration's outputs that the supervisor runs on the files the
/// benchmark worker wrote into `dir`.
pub struct OutputCheck<'a> {
    pub dir: PathBuf,
    pub check: CheckFn<'a>,
}

impl std::fmt::Debug for OutputCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputCheck").field("dir", &self.dir).finish_non_exhaustive()
    }
}

pub struct CudaLanguage<'a> {
    spec: &'a KernelSpec,
    /// The first valid configuration: its parameters are defined when a reference kernel
    /// shares the tuned kernel's file, so that the file compiles.
    first: Vec<Value>,
    instance: Option<InstanceFn<'a>>,
    constants: Vec<(String, Bytes)>,
    check: Option<OutputCheck<'a>>,
}

impl std::fmt::Debug for CudaLanguage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaLanguage")
            .field("kernel", &self.spec.kernel_name)
            .field("instances_from_caller", &self.instance.is_some())
            .field("constants", &self.constants.len())
            .field("output_check", &self.check.is_some())
            .finish()
    }
}

impl<'a> CudaLanguage<'a> {
    pub fn new(spec: &'a KernelSpec, space: &Space) -> CudaLanguage<'a> {
        let first = space.ids().next().map(|id| space.values(id).into_iter().cloned().collect()).unwrap_or_default();
        CudaLanguage { spec, first, instance: None, constants: Vec::new(), check: None }
    }

    /// Each configuration's source, name and geometry come from `instance` instead of the
    /// spec's definitions and launch rules.
    pub fn with_instances(mut self, instance: InstanceFn<'a>) -> Self {
        self.instance = Some(instance);
        self
    }

    /// `__constant__` symbols to fill after every module load.
    pub fn with_constants(mut self, constants: Vec<(String, Vec<u8>)>) -> Self {
        self.constants = constants.into_iter().map(|(name, bytes)| (name, Bytes(bytes))).collect();
        self
    }

    /// Outputs are written to files after each checked run and judged by `check`.
    pub fn with_output_check(mut self, check: OutputCheck<'a>) -> Self {
        self.check = Some(check);
        self
    }

    /// The source, kernel name and geometry of one configuration.
    pub fn instance(&self, config: &[Value]) -> Result<Instance, String> {
        match &self.instance {
            Some(instance) => instance(config),
            None => Ok(Instance {
                source: self.spec.source_for(config),
                name: self.spec.kernel_name.clone(),
                geometry: self.spec.geometry(config).map_err(|e| e.to_string())?,
            }),
        }
    }

    /// The reference compiled (or given as data), for the setup's size and each edge size.
    fn reference(
        &self,
        reference: &Reference,
        device: &DeviceInfo,
        compile: &mut dyn FnMut(CompileJob) -> Result<Binary, String>,
    ) -> Result<CompiledReference, String> {
        let spec = self.spec;
        let (source, name, options) = match reference {
            Reference::Outputs(data) => return Ok(CompiledReference::Outputs(data.clone())),
            Reference::Config(values) => {
                let Instance { source, name, .. } = self.instance(values)?;
                (source, name, spec.options_for(values))
            }
            Reference::Kernel { name, source, options, .. } => {
                let mut text = spec.source_for(&self.first);
                text.truncate(text.len() - spec.source.len());
                text.push_str(source);
                (text, name.clone(), options.clone())
            }
        };
        let job = CompileJob::Cuda { source, name: name.clone(), options, arch: device.arch(), ptxas: None };
        let binary = compile(job).map_err(|e| format!("compiling the reference {name}: {e}"))?;
        Ok(CompiledReference::Kernel { cubin: binary.cubin, symbol: binary.symbol.unwrap_or(name) })
    }

    /// The reference's launch at the problem size `problem` (values in the spec's order).
    fn reference_geometry(&self, reference: &Reference, problem: &[Value]) -> Result<Geometry, String> {
        match reference {
            Reference::Config(values) if self.instance.is_some() => Ok(self.instance(values)?.geometry),
            Reference::Config(values) => {
                self.spec.launch.geometry(&with_problem(problem, values)).map_err(|e| e.to_string())
            }
            Reference::Kernel { grid, block, .. } => {
                let values = with_problem(problem, &self.first);
                let dimension = |e: &Expression| -> Result<u32, String> {
                    let n = e
                        .evaluate_with(&values)
                        .ok()
                        .and_then(|v| v.as_number())
                        .ok_or_else(|| format!("reference geometry '{e}'"))?;
                    Ok(n.ceil().max(1.0) as u32)
                };
                Ok(Geometry {
                    grid: [dimension(&grid[0])?, dimension(&grid[1])?, dimension(&grid[2])?],
                    block: [dimension(&block[0])?, dimension(&block[1])?, dimension(&block[2])?],
                    shared_bytes: 0,
                })
            }
            Reference::Outputs(_) => Err("expected outputs have no launch".into()),
        }
    }

    /// The reference's setup at the problem size `problem`: `sets` are the given input sets
    /// of expected outputs (none from a spec).
    fn reference_at(
        &self,
        reference: &Reference,
        compiled: &CompiledReference,
        problem: &[Value],
    ) -> Result<ReferenceSetup, String> {
        Ok(match compiled {
            CompiledReference::Outputs(data) => ReferenceSetup::Outputs { data: data.clone(), sets: Vec::new() },
            CompiledReference::Kernel { cubin, symbol } => ReferenceSetup::Kernel(KernelImage {
                cubin: Bytes(cubin.clone()),
                name: symbol.clone(),
                geometry: self.reference_geometry(reference, problem)?,
                params: None,
                cluster_x: 1,
                edges: Vec::new(),
            }),
        })
    }

    /// The kernel's arguments at the problem size `problem` (values in the spec's order).
    fn arguments(&self, problem: &[Value]) -> Result<Vec<ArgSetup>, String> {
        let spec = self.spec;
        let mut args = Vec::new();
        for (position, arg) in spec.args.iter().enumerate() {
            let evaluate =
                |e: &Expression| e.evaluate_with(problem).map_err(|err| format!("argument {}: '{e}': {err}", arg.name));
            args.push(match &arg.kind {
                ArgKind::Buffer { size, init, output, poison } => {
                    let len = evaluate(size)?
                        .as_number()
                        .filter(|n| *n >= 0.0)
                        .ok_or_else(|| format!("argument {}: size is not a count", arg.name))?;
                    ArgSetup::Buffer {
                        name: arg.name.clone(),
                        dtype: arg.dtype,
                        len: len as usize,
                        init: init.clone(),
                        output: *output,
                        poison: *poison,
                        seed: spec.timing.seed.wrapping_mul(1_000_003).wrapping_add(position as u64),
                        reset: false,
                    }
                }
                ArgKind::Scalar { value } => {
                    let bytes = kerntune_device::scalar_bytes(arg.dtype, &evaluate(value)?)
                        .map_err(|e| format!("argument {}: {e}", arg.name))?;
                    ArgSetup::Scalar { name: arg.name.clone(), bytes: Bytes(bytes) }
                }
            });
        }
        Ok(args)
    }

    /// The setup of each edge size: its arguments and its reference's launch; checked once
    /// on them, never timed.
    fn edge_setups(&self, verify: &Verify, compiled: &CompiledReference) -> Result<Vec<EdgeSetup>, String> {
        let timing = Timing { flush: Flush::None, energy: EnergyMode::Off, ..self.spec.timing.clone() };
        verify
            .sizes
            .iter()
            .map(|edge| {
                let problem = edge.values();
                let at = |e: String| format!("at the edge size {}: {e}", edge.label);
                let setup = Setup {
                    args: self.arguments(&problem).map_err(at)?,
                    timing: timing.clone(),
                    reference: Some(self.reference_at(&verify.reference, compiled, &problem).map_err(at)?),
                    tolerances: verify.tolerances.clone(),
                    bitwise: false,
                    verify_sets: 0,
                    constants: self.constants.clone(),
                    outputs_dir: None,
                    edges: Vec::new(),
                    relocations: Vec::new(),
                };
                Ok(EdgeSetup { label: edge.label.clone(), setup })
            })
            .collect()
    }

    /// A configuration's launch at each edge size: `None` where its restrictions exclude
    /// it there; an error (it is then invalid) where its geometry cannot be computed there.
    fn edge_launches(&self, config: &[Value]) -> Result<Vec<Option<Geometry>>, String> {
        let Some(verify) = &self.spec.verify else { return Ok(Vec::new()) };
        verify
            .sizes
            .iter()
            .map(|edge| {
                if !edge.admits(config) {
                    return Ok(None);
                }
                let geometry = self.spec.launch.geometry(&with_problem(&edge.values(), config));
                geometry.map(Some).map_err(|e| format!("at the edge size {}: {e}", edge.label))
            })
            .collect()
    }
}

/// A reference ready for any problem size: a compiled kernel, or expected outputs.
enum CompiledReference {
    Kernel { cubin: Vec<u8>, symbol: String },
    Outputs(Vec<kerntune_device::Init>),
}

/// The values of [`KernelSpec::names`] with the problem at another size.
fn with_problem(problem: &[Value], config: &[Value]) -> Vec<Value> {
    problem.iter().chain(config).cloned().collect()
}

impl Language for CudaLanguage<'_> {
    fn kernel_name(&self) -> &str {
        &self.spec.kernel_name
    }

    fn tuning_info(&self, device: &str) -> TuningInfo {
        self.spec.tuning_info(device)
    }

    fn verified_sets(&self) -> u32 {
        let Some(verify) = &self.spec.verify else { return u32::from(self.check.is_some()) };
        let random = self.spec.args.iter().any(|arg| match &arg.kind {
            ArgKind::Buffer { init, output, poison, .. } => refillable(init, *output, *poison, false),
            ArgKind::Scalar { .. } => false,
        });
        1 + if random { verify.sets } else { 0 } + verify.sizes.len() as u32
    }

    fn verified_sizes(&self) -> Vec<String> {
        self.spec.verify.as_ref().map(|v| v.sizes.iter().map(|edge| edge.label.clone()).collect()).unwrap_or_default()
    }

    fn preflight(&self) -> Result<(), LanguageError> {
        if !kerntune_device::nvrtc_available() {
            return Err(LanguageError::Toolchain(format!(
                "NVRTC (libnvrtc) is not installed: kerntune compiles CUDA C with it; {} (or set KERNTUNE_NVRTC to \
                 a libnvrtc.so, or install the CUDA toolkit)",
                kerntune_device::wheels::install_hint("nvidia-cuda-nvrtc")
            )));
        }
        if let Some(ptxas) = &self.spec.ptxas {
            ptxas.check().map_err(|e| LanguageError::Toolchain(format!("[compiler] {e}")))?;
        }
        kerntune_device::nvrtc::check_flags(&self.spec.ptxas_flags())
            .map_err(|e| LanguageError::Toolchain(e.to_string()))
    }

    fn compiler(&self) -> Option<String> {
        self.spec.ptxas.as_ref().map(|p| format!("ptxas {} ({})", p.version, p.path.display()))
    }

    fn compile_job(&self, config: &[Value], device: &DeviceInfo) -> Result<CompileJob, LanguageError> {
        let Instance { source, name, geometry } = self.instance(config).map_err(LanguageError::InvalidConfig)?;
        check_device_limits(&geometry, device)?;
        let ptxas = self.spec.ptxas_step(config).map_err(LanguageError::InvalidConfig)?;
        Ok(CompileJob::Cuda { source, name, options: self.spec.options_for(config), arch: device.arch(), ptxas })
    }

    fn kernel_image(&self, config: &[Value], binary: Binary) -> Result<KernelImage, LanguageError> {
        let Instance { name, geometry, .. } = self.instance(config).map_err(LanguageError::InvalidConfig)?;
        Ok(KernelImage {
            cubin: Bytes(binary.cubin),
            name: binary.symbol.unwrap_or(name),
            geometry,
            params: None,
            cluster_x: 1,
            edges: self.edge_launches(config).map_err(LanguageError::InvalidConfig)?,
        })
    }

    fn check_outputs(&self, config: &[Value], outputs: &[(usize, PathBuf)]) -> Result<(), LanguageError> {
        match &self.check {
            Some(check) => (check.check)(config, outputs).map_err(LanguageError::WrongOutputs),
            None => Ok(()),
        }
    }

    fn objective(
        &self,
        config: &[Value],
        time_ms: f64,
        metrics: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<f64, LanguageError> {
        self.spec.objective_value(config, time_ms, metrics).map_err(LanguageError::Objective)
    }

    fn early_stop_applies(&self) -> bool {
        let spec = self.spec;
        let params = spec.problem.len()..spec.problem.len() + spec.params.len();
        spec.objective_expression.as_ref().is_none_or(|f| f.monotone_in_time(params))
    }

    fn setup(
        &self,
        device: &DeviceInfo,
        compile: &mut dyn FnMut(CompileJob) -> Result<Binary, String>,
    ) -> Result<Setup, LanguageError> {
        let spec = self.spec;
        let problem: Vec<Value> = spec.problem.iter().map(|(_, v)| v.clone()).collect();
        let (reference, edges) = match &spec.verify {
            None => (None, Vec::new()),
            Some(verify) => {
                if !verify.sizes.is_empty() && self.instance.is_some() {
                    return Err(LanguageError::Setup(
                        "[verify] sizes needs the spec's own launch rules; this front launches each \
                         configuration its own way"
                            .into(),
                    ));
                }
                let compiled = self.reference(&verify.reference, device, compile).map_err(LanguageError::Setup)?;
                let reference =
                    self.reference_at(&verify.reference, &compiled, &problem).map_err(LanguageError::Setup)?;
                (Some(reference), self.edge_setups(verify, &compiled).map_err(LanguageError::Setup)?)
            }
        };
        let tolerances = spec.verify.as_ref().map(|v| v.tolerances.clone()).unwrap_or_default();
        Ok(Setup {
            args: self.arguments(&problem).map_err(LanguageError::Setup)?,
            timing: spec.timing.clone(),
            reference,
            tolerances,
            bitwise: false,
            verify_sets: spec.verify.as_ref().map_or(0, |v| v.sets),
            constants: self.constants.clone(),
            outputs_dir: self.check.as_ref().map(|c| c.dir.clone()),
            edges,
            relocations: Vec::new(),
        })
    }

    fn launch_timeout(&self) -> Duration {
        self.spec.timing.launch_timeout
    }

    fn compile_timeout(&self) -> Duration {
        self.spec.timing.compile_timeout
    }

    fn compile_timeout_adapts(&self) -> bool {
        self.spec.timing.compile_timeout_adapts
    }

    /// NVRTC's first compile in a process is slow and does not run side by side: on a host
    /// of 64 cores, 64 new workers took 4.3 to 8.2 s each for it, 8 took at most 0.8 s, and a
    /// warm worker compiles the shared-memory matmul in 0.02 s (docs/design-notes.md,
    /// "Compile workers that start few and grow"). The pool grows from here while compiles
    /// hold the GPUs back.
    fn compile_workers_to_start(&self, most: usize) -> usize {
        most.min(NVRTC_FIRST_WORKERS)
    }
}

/// Compile workers a CUDA C tuning starts with (see `compile_workers_to_start`).
const NVRTC_FIRST_WORKERS: usize = 8;

/// Limits every kernel of the device has, whatever it compiles to: a reason the
/// configuration is invalid, known before compiling.
pub fn check_device_limits(geometry: &Geometry, device: &DeviceInfo) -> Result<(), LimitError> {
    if geometry.threads_per_block() > device.max_threads_per_block as u64 {
        return Err(LimitError::Threads {
            threads: geometry.threads_per_block(),
            allowed: device.max_threads_per_block,
        });
    }
    if u64::from(geometry.shared_bytes) > device.max_shared_per_block_optin as u64 {
        return Err(LimitError::SharedMemory {
            bytes: geometry.shared_bytes,
            allowed: device.max_shared_per_block_optin,
        });
    }
    Ok(())
}
