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
use kerntune_pipeline::protocol::{ArgSetup, Bytes, CompileJob, KernelImage, ReferenceSetup, Setup};
use kerntune_pipeline::refillable;
use kerntune_pipeline::{Binary, Geometry, Language};
use kerntune_space::{Expression, Space, Value};
use kerntune_store::TuningInfo;

use crate::spec::{ArgKind, KernelSpec, Reference};

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
                geometry: self.spec.geometry(config)?,
            }),
        }
    }

    fn reference(
        &self,
        reference: &Reference,
        device: &DeviceInfo,
        compile: &mut dyn FnMut(CompileJob) -> Result<Binary, String>,
    ) -> Result<ReferenceSetup, String> {
        let spec = self.spec;
        let (source, name, options, geometry) = match reference {
            Reference::Outputs(data) => return Ok(ReferenceSetup::Outputs { data: data.clone(), sets: Vec::new() }),
            Reference::Config(values) => {
                let Instance { source, name, geometry } = self.instance(values)?;
                (source, name, spec.options_for(values), geometry)
            }
            Reference::Kernel { name, source, options, grid, block } => {
                let mut text = spec.source_for(&self.first);
                text.truncate(text.len() - spec.source.len());
                text.push_str(source);
                let values = spec.values(&self.first);
                let dimension = |e: &Expression| -> Result<u32, String> {
                    let n = e
                        .evaluate_with(&values)
                        .ok()
                        .and_then(|v| v.as_number())
                        .ok_or_else(|| format!("reference geometry '{e}'"))?;
                    Ok(n.ceil().max(1.0) as u32)
                };
                let geometry = Geometry {
                    grid: [dimension(&grid[0])?, dimension(&grid[1])?, dimension(&grid[2])?],
                    block: [dimension(&block[0])?, dimension(&block[1])?, dimension(&block[2])?],
                    shared_bytes: 0,
                };
                (text, name.clone(), options.clone(), geometry)
            }
        };
        let job = CompileJob::Cuda { source, name: name.clone(), options, arch: device.arch(), ptxas: None };
        let binary = compile(job).map_err(|e| format!("compiling the reference {name}: {e}"))?;
        let symbol = binary.symbol.unwrap_or(name);
        Ok(ReferenceSetup::Kernel(KernelImage {
            cubin: Bytes(binary.cubin),
            name: symbol,
            geometry,
            params: None,
            cluster_x: 1,
        }))
    }
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
        1 + if random { verify.sets } else { 0 }
    }

    fn preflight(&self) -> Result<(), String> {
        if !kerntune_device::nvrtc_available() {
            return Err("NVRTC (libnvrtc, from the CUDA toolkit) is not installed: kerntune compiles CUDA C with it \
                 (pip install nvidia-cuda-nvrtc, or install the CUDA toolkit)"
                .into());
        }
        if let Some(ptxas) = &self.spec.ptxas {
            ptxas.check().map_err(|e| format!("[compiler] {e}"))?;
        }
        kerntune_device::nvrtc::check_flags(&self.spec.ptxas_flags()).map_err(|e| e.to_string())
    }

    fn compiler(&self) -> Option<String> {
        self.spec.ptxas.as_ref().map(|p| format!("ptxas {} ({})", p.version, p.path.display()))
    }

    fn compile_job(&self, config: &[Value], device: &DeviceInfo) -> Result<CompileJob, String> {
        let Instance { source, name, geometry } = self.instance(config)?;
        check_device_limits(&geometry, device)?;
        let ptxas = self.spec.ptxas_step(config)?;
        Ok(CompileJob::Cuda { source, name, options: self.spec.options_for(config), arch: device.arch(), ptxas })
    }

    fn kernel_image(&self, config: &[Value], binary: Binary) -> Result<KernelImage, String> {
        let Instance { name, geometry, .. } = self.instance(config)?;
        Ok(KernelImage {
            cubin: Bytes(binary.cubin),
            name: binary.symbol.unwrap_or(name),
            geometry,
            params: None,
            cluster_x: 1,
        })
    }

    fn check_outputs(&self, config: &[Value], outputs: &[(usize, PathBuf)]) -> Result<(), String> {
        match &self.check {
            Some(check) => (check.check)(config, outputs),
            None => Ok(()),
        }
    }

    fn objective(
        &self,
        config: &[Value],
        time_ms: f64,
        metrics: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<f64, String> {
        self.spec.objective_value(config, time_ms, metrics)
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
    ) -> Result<Setup, String> {
        let spec = self.spec;
        let reference = spec.verify.as_ref().map(|v| self.reference(&v.reference, device, compile)).transpose()?;
        let problem: Vec<Value> = spec.problem.iter().map(|(_, v)| v.clone()).collect();
        let mut args = Vec::new();
        for (position, arg) in spec.args.iter().enumerate() {
            let evaluate = |e: &Expression| {
                e.evaluate_with(&problem).map_err(|err| format!("argument {}: '{e}': {err}", arg.name))
            };
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
        let tolerances = spec.verify.as_ref().map(|v| v.tolerances.clone()).unwrap_or_default();
        Ok(Setup {
            args,
            timing: spec.timing.clone(),
            reference,
            tolerances,
            bitwise: false,
            verify_sets: spec.verify.as_ref().map_or(0, |v| v.sets),
            constants: self.constants.clone(),
            outputs_dir: self.check.as_ref().map(|c| c.dir.clone()),
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
}

/// Limits every kernel of the device has, whatever it compiles to: a reason the
/// configuration is invalid, known before compiling.
pub fn check_device_limits(geometry: &Geometry, device: &DeviceInfo) -> Result<(), String> {
    if geometry.threads_per_block() > device.max_threads_per_block as u64 {
        return Err(format!(
            "{} threads per block; the device allows {}",
            geometry.threads_per_block(),
            device.max_threads_per_block
        ));
    }
    if u64::from(geometry.shared_bytes) > device.max_shared_per_block_optin as u64 {
        return Err(format!(
            "{} bytes of dynamic shared memory per block; the device allows {}",
            geometry.shared_bytes, device.max_shared_per_block_optin
        ));
    }
    Ok(())
}
