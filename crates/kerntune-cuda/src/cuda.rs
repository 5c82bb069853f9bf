//! The CUDA C frontend: configurations of a [`KernelSpec`] become NVRTC compile jobs (the
//! parameters as `#define`s, the options filled in), launched with the spec's geometry.

use std::time::Duration;

use kerntune_engine::spec::{ArgKind, Geometry, KernelSpec, Reference};
use kerntune_space::{Expression, Space, Value};

use crate::driver::DeviceInfo;
use crate::pipeline::Frontend;
use crate::protocol::{ArgSetup, Bytes, CompileJob, KernelImage, LaunchInfo, ReferenceSetup, Setup};

#[derive(Debug)]
pub struct CudaFrontend<'a> {
    spec: &'a KernelSpec,
    /// The first valid configuration: its parameters are defined when a reference kernel
    /// shares the tuned kernel's file, so that the file compiles.
    first: Vec<Value>,
}

impl<'a> CudaFrontend<'a> {
    pub fn new(spec: &'a KernelSpec, space: &Space) -> CudaFrontend<'a> {
        let first = space.ids().next().map(|id| space.values(id).into_iter().cloned().collect()).unwrap_or_default();
        CudaFrontend { spec, first }
    }

    fn reference(
        &self,
        reference: &Reference,
        device: &DeviceInfo,
        compile: &mut dyn FnMut(CompileJob) -> Result<(Vec<u8>, Option<LaunchInfo>), String>,
    ) -> Result<ReferenceSetup, String> {
        let spec = self.spec;
        let (source, name, options, geometry) = match reference {
            Reference::Outputs(data) => return Ok(ReferenceSetup::Outputs { data: data.clone() }),
            Reference::Config(values) => {
                (spec.source_for(values), spec.kernel_name.clone(), spec.options_for(values), spec.geometry(values)?)
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
        let job = CompileJob::Cuda { source, name: name.clone(), options, arch: device.arch() };
        let (cubin, _) = compile(job).map_err(|e| format!("compiling the reference {name}: {e}"))?;
        Ok(ReferenceSetup::Kernel(KernelImage { cubin: Bytes(cubin), name, geometry, params: None, cluster_x: 1 }))
    }
}

impl Frontend for CudaFrontend<'_> {
    fn compile_job(&self, config: &[Value], device: &DeviceInfo) -> Result<CompileJob, String> {
        let geometry = self.spec.geometry(config)?;
        if geometry.threads_per_block() > device.max_threads_per_block as u64 {
            return Err(format!(
                "{} threads per block; the device allows {}",
                geometry.threads_per_block(),
                device.max_threads_per_block
            ));
        }
        Ok(CompileJob::Cuda {
            source: self.spec.source_for(config),
            name: self.spec.kernel_name.clone(),
            options: self.spec.options_for(config),
            arch: device.arch(),
        })
    }

    fn kernel_image(
        &self,
        config: &[Value],
        cubin: Vec<u8>,
        _launch: Option<LaunchInfo>,
    ) -> Result<KernelImage, String> {
        let geometry = self.spec.geometry(config)?;
        Ok(KernelImage {
            cubin: Bytes(cubin),
            name: self.spec.kernel_name.clone(),
            geometry,
            params: None,
            cluster_x: 1,
        })
    }

    fn objective(&self, config: &[Value], time_ms: f64) -> Result<f64, String> {
        self.spec.objective_value(config, time_ms)
    }

    fn early_stop_applies(&self) -> bool {
        let spec = self.spec;
        let params = spec.problem.len()..spec.problem.len() + spec.params.len();
        spec.objective_expression.as_ref().is_none_or(|e| e.variables().iter().all(|v| !params.contains(v)))
    }

    fn setup(
        &self,
        device: &DeviceInfo,
        compile: &mut dyn FnMut(CompileJob) -> Result<(Vec<u8>, Option<LaunchInfo>), String>,
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
                    let bytes = kerntune_engine::spec::scalar_bytes(arg.dtype, &evaluate(value)?)
                        .map_err(|e| format!("argument {}: {e}", arg.name))?;
                    ArgSetup::Scalar { name: arg.name.clone(), bytes: Bytes(bytes) }
                }
            });
        }
        let tolerances = spec.verify.as_ref().map(|v| v.tolerances.clone()).unwrap_or_default();
        Ok(Setup { args, timing: spec.timing.clone(), reference, tolerances, bitwise: false })
    }

    fn launch_timeout(&self) -> Duration {
        self.spec.timing.launch_timeout
    }

    fn compile_timeout(&self) -> Duration {
        self.spec.timing.compile_timeout
    }
}
