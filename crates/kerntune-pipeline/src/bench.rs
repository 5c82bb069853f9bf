//! The benchmark worker: a child process that owns one GPU. It creates the arguments once
//! (random floating-point inputs drawn on the GPU itself, see `inputs`), computes the
//! reference outputs, and for each configuration loads the cubin, checks the
//! device limits, runs it once on poisoned outputs and verifies them (that run is also the
//! warm-up, never timed), then times it: an L2 flush before every timed launch, outside the
//! events that time it; samples until the median's 95% interval is tight enough or the time
//! cap is reached, or until it is clearly slower than the best. Where NVML reads the GPU's
//! clocks, the samples are taken again once if the clocks moved under them, and the first
//! configuration waits for the clocks to settle; [`crate::sampling`] takes every decision.
//!
//! Where the reference is a kernel, a configuration that was not stopped early is checked
//! again after its timing, on extra input sets ([`Setup::verify_sets`], see `sets`), and at
//! other problem sizes where the setup names them ([`Setup::edges`], see `edges`). The
//! stages after the search ask about two kernels at once: their outputs compared, or their
//! times interleaved (see `pairs`).
//!
//! Anything that breaks the CUDA context ends the process after it has replied; the
//! supervisor starts a fresh one. A kernel that hangs is killed by the supervisor.

use std::ffi::c_void;
use std::io::{BufRead, Write};
use std::time::Instant;

use kerntune_device::draw::Drawer;
use kerntune_device::{fill, DType, TensorMap};
use kerntune_store::Status;

use crate::error::FailureKind;
use crate::protocol::{
    output_file, ArgSetup, Bytes, EvaluateRequest, EvaluateResult, FromBench, KernelImage, ParamSource, ReferenceSetup,
    Relocation, Setup, SetupTimes, ToBench,
};
use crate::schedule::Interleaved;
use crate::timing::{EnergyMode, Flush, Timing};
use kerntune_device::driver::{Context, CudaError, DeviceBuffer, Event, FunctionAttributes, Module};
use kerntune_device::nvml::{nvml, Gauge};
use kerntune_device::verify::Comparer;

mod edges;
mod inputs;
mod pairs;
mod sets;
pub use sets::refillable;
mod timed;

/// Why an objective over energy or power cannot be tuned here: the worker's setup fails
/// with it, and the run with it, before any configuration.
const ENERGY_UNREADABLE: &str = "the objective needs the GPU's energy counter, which NVML (libnvidia-ml.so.1) does not report on this machine; tune for time, or on an NVIDIA GPU of Volta or newer with its driver";

/// Runs the worker on standard input and output until the input closes.
pub fn run(ordinal: usize) -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut reply = |message: &FromBench| {
        let line = serde_json::to_string(message).unwrap_or_default();
        // The supervisor going away ends the worker; nothing else can be done.
        writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
    };
    let context = match Context::open(ordinal) {
        Ok(context) => context,
        Err(error) => {
            reply(&FromBench::Fatal { message: format!("cannot open GPU #{ordinal}: {error}") });
            return 1;
        }
    };
    if !reply(&FromBench::Ready { device: context.info.clone() }) {
        return 1;
    }
    let mut worker: Option<Worker> = None;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let message: ToBench = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(error) => {
                reply(&FromBench::Fatal { message: format!("bad request: {error}") });
                return 1;
            }
        };
        match message {
            ToBench::Setup(setup) => {
                // A later setup (a kept worker's next tuning) replaces the earlier: its
                // buffers are freed first, so that the GPU never holds both.
                drop(worker.take());
                let clock = Instant::now();
                let mut drawing = 0.0;
                match Worker::new(&context, setup, &mut drawing) {
                    Ok(ready) => {
                        worker = Some(ready);
                        let times = SetupTimes { seconds: clock.elapsed().as_secs_f64(), drawing_s: drawing };
                        reply(&FromBench::SetupDone { times });
                    }
                    Err(message) => {
                        reply(&FromBench::Fatal { message });
                        return 1;
                    }
                }
            }
            ToBench::Compare { original, candidate, sets, seed } => {
                let Some(worker) = worker.as_mut() else {
                    reply(&FromBench::Fatal { message: "compare before setup".into() });
                    return 1;
                };
                match worker.compare(&context, &original, &candidate, sets, seed, &mut |launches| {
                    reply(&FromBench::Waiting { launches });
                }) {
                    Ok((differing, first_difference)) => {
                        reply(&FromBench::Compared { sets, differing, first_difference });
                        if released_badly(&context) {
                            return 2;
                        }
                    }
                    Err(message) => {
                        reply(&FromBench::Fatal { message });
                        return 1;
                    }
                };
            }
            ToBench::Interleave { a, b, rounds, blocks, seed } => {
                let Some(worker) = worker.as_mut() else {
                    reply(&FromBench::Fatal { message: "interleave before setup".into() });
                    return 1;
                };
                let plan = pairs::Interleaving { rounds, blocks, seed };
                match worker.interleave(&context, [&a, &b], plan, &mut |launches| {
                    reply(&FromBench::Waiting { launches });
                }) {
                    Ok(Interleaved { a, b, clocks }) => {
                        reply(&FromBench::Interleaved { a, b, clocks });
                        if released_badly(&context) {
                            return 2;
                        }
                    }
                    Err(message) => {
                        reply(&FromBench::Fatal { message });
                        return 1;
                    }
                };
            }
            ToBench::Evaluate(request) => {
                let Some(worker) = worker.as_mut() else {
                    reply(&FromBench::Fatal { message: "evaluate before setup".into() });
                    return 1;
                };
                let mut result = worker.evaluate(&context, &request, &mut |launches| {
                    reply(&FromBench::Waiting { launches });
                });
                result.context_lost |= released_badly(&context);
                let lost = result.context_lost;
                reply(&FromBench::Result(result));
                if lost {
                    return 2;
                }
            }
        }
    }
    0
}

/// Says on standard error which releases (of modules, scratch buffers, events) failed
/// since the last call, and whether one of them left the context unusable, in which case
/// the worker must end as after a sticky launch error.
fn released_badly(context: &Context) -> bool {
    let errors = context.take_release_errors();
    for error in &errors {
        eprintln!("kerntune: releasing GPU resources failed: {error}");
    }
    errors.iter().any(CudaError::sticky)
}

struct Argument {
    dtype: DType,
    len: usize,
    buffer: Option<DeviceBuffer>,
    /// The setup's contents of a floating-point input, to restore after random inputs.
    contents: Option<inputs::Contents>,
    output: bool,
    poison: bool,
    /// Initial contents of an output that is restored rather than poisoned.
    initial: Option<DeviceBuffer>,
    reference: Option<DeviceBuffer>,
    /// Zeroed before every launch.
    reset: bool,
}

struct Worker {
    arguments: Vec<Argument>,
    /// One 8-byte slot per kernel argument: a device pointer or a scalar's bytes.
    slots: Vec<u64>,
    timing: Timing,
    tolerances: Vec<(usize, f64, f64)>,
    bitwise: bool,
    comparer: Option<Comparer>,
    /// Draws the setup's random floating-point data on the GPU (none: the host did).
    drawer: Option<Drawer>,
    extra_sets: Option<sets::ExtraSets>,
    /// Workers of the setup's edge sizes, in their order.
    edges: Vec<edges::Edge>,
    flush: Option<DeviceBuffer>,
    flushes: u8,
    events: Vec<(Event, Event)>,
    constants: Vec<(String, Bytes)>,
    outputs_dir: Option<std::path::PathBuf>,
    /// The GPU's clocks, where NVML is there to read them.
    gauge: Option<Gauge>,
    /// Whether the clocks were left to settle before the first configuration's samples.
    clocks_settled: bool,
}

/// Why an evaluation ended early, as it will be recorded: a failure of some
/// [`FailureKind`], or an early stop.
struct Ended {
    status: Status,
    reason: String,
    context_lost: bool,
}

impl Ended {
    fn failed(kind: FailureKind, reason: String) -> Ended {
        Ended { status: kind.status(), reason, context_lost: false }
    }

    fn cuda(kind: FailureKind, doing: &str, error: CudaError) -> Ended {
        Ended { status: kind.status(), reason: format!("{doing}: {error}"), context_lost: error.sticky() }
    }
}

/// Writes into each pointer table the addresses of this worker's buffers that its entries
/// stand for. The tables are inputs, never poisoned or redrawn, so this holds for the run.
fn relocate(context: &Context, arguments: &[Argument], relocations: &[Relocation]) -> Result<(), String> {
    let mut tables: Vec<(usize, Vec<u8>)> = Vec::new();
    for relocation in relocations {
        let Relocation { table, entry, target, offset } = *relocation;
        let buffer_of = |position: usize| arguments.get(position).and_then(|a| a.buffer.as_ref().map(|b| (a, b)));
        let (Some((table_arg, table_buffer)), Some((target_arg, target_buffer))) =
            (buffer_of(table), buffer_of(target))
        else {
            return Err(format!("a pointer table's entry names argument #{table} or #{target}, which is not a buffer"));
        };
        let table_bytes = table_arg.len * table_arg.dtype.size();
        if table_arg.dtype.size() != 8 || (entry + 1) * 8 > table_bytes {
            return Err(format!("pointer table #{table} has no 64-bit entry {entry}"));
        }
        if offset >= (target_arg.len * target_arg.dtype.size()) as u64 {
            return Err(format!(
                "pointer table #{table}, entry {entry}: offset {offset} is past the end of buffer #{target}"
            ));
        }
        let index = match tables.iter().position(|(position, _)| *position == table) {
            Some(index) => index,
            None => {
                let mut data = vec![0u8; table_bytes];
                context
                    .download(table_buffer, &mut data)
                    .map_err(|e| format!("reading pointer table #{table}: {e}"))?;
                tables.push((table, data));
                tables.len() - 1
            }
        };
        let address = target_buffer.pointer() + offset;
        tables[index].1[entry * 8..(entry + 1) * 8].copy_from_slice(&address.to_le_bytes());
    }
    for (table, data) in &tables {
        if let Some(buffer) = &arguments[*table].buffer {
            context.upload(buffer, data).map_err(|e| format!("writing pointer table #{table}: {e}"))?;
        }
    }
    Ok(())
}

impl Worker {
    /// Adds the seconds spent drawing inputs on the CPU to `drawing`.
    fn new(context: &Context, mut setup: Setup, drawing: &mut f64) -> Result<Worker, String> {
        let edge_setups = std::mem::take(&mut setup.edges);
        let mut inputs = inputs::Inputs { drawer: inputs::Inputs::drawer_for(context, &setup.args), drawing };
        let mut arguments = Vec::new();
        let mut slots = Vec::new();
        for arg in &setup.args {
            match arg {
                ArgSetup::Buffer { name, dtype, len, init, output, poison, seed, reset } => {
                    let (buffer, contents) = inputs
                        .buffer(context, *dtype, *len, init, *seed)
                        .map_err(|e| format!("argument {name}: {e}"))?;
                    let initial = if *output && !*poison {
                        let copy = context.alloc(buffer.bytes()).map_err(|e| e.to_string())?;
                        context.copy(&buffer, &copy).map_err(|e| e.to_string())?;
                        Some(copy)
                    } else {
                        None
                    };
                    slots.push(buffer.pointer());
                    let contents = (!*output && dtype.is_float()).then_some(contents);
                    arguments.push(Argument {
                        dtype: *dtype,
                        len: *len,
                        buffer: Some(buffer),
                        contents,
                        output: *output,
                        poison: *poison,
                        initial,
                        reference: None,
                        reset: *reset,
                    });
                }
                ArgSetup::Scalar { bytes, .. } => {
                    let mut slot = [0u8; 8];
                    slot[..bytes.0.len().min(8)].copy_from_slice(&bytes.0[..bytes.0.len().min(8)]);
                    slots.push(u64::from_le_bytes(slot));
                    arguments.push(Argument {
                        dtype: DType::U8,
                        len: 0,
                        buffer: None,
                        contents: None,
                        output: false,
                        poison: false,
                        initial: None,
                        reference: None,
                        reset: false,
                    });
                }
            }
        }
        relocate(context, &arguments, &setup.relocations)?;
        let flush = match setup.timing.flush {
            Flush::L2 => Some(context.alloc(2 * context.info.l2_bytes.max(1 << 20)).map_err(|e| e.to_string())?),
            Flush::None => None,
        };
        let gauge = nvml().zip(context.pci_bus_id()).and_then(|(nvml, address)| nvml.device(address));
        if setup.timing.energy == EnergyMode::Require && gauge.as_ref().and_then(Gauge::energy_mj).is_none() {
            return Err(ENERGY_UNREADABLE.to_string());
        }
        let mut worker = Worker {
            arguments,
            slots,
            timing: setup.timing,
            tolerances: setup.tolerances,
            bitwise: setup.bitwise,
            comparer: None,
            drawer: None,
            extra_sets: None,
            edges: Vec::new(),
            flush,
            flushes: 0,
            events: Vec::new(),
            constants: setup.constants.clone(),
            outputs_dir: setup.outputs_dir.clone(),
            gauge,
            clocks_settled: false,
        };
        match &setup.reference {
            Some(ReferenceSetup::Kernel(reference)) => {
                worker.comparer = Some(Comparer::new(context)?);
                worker.compute_reference(context, reference, &setup.args, setup.verify_sets, &mut inputs)?;
            }
            Some(ReferenceSetup::Outputs { data, sets }) => {
                worker.comparer = Some(Comparer::new(context)?);
                worker.load_reference(context, data)?;
                worker.extra_sets = worker.load_given_sets(context, sets)?;
            }
            None => {}
        }
        worker.drawer = inputs.drawer.take();
        worker.edges = edges::open(context, edge_setups, inputs.drawing)?;
        context.synchronize().map_err(|e| e.to_string())?;
        Ok(worker)
    }

    /// The expected outputs, given as data.
    fn load_reference(&mut self, context: &Context, data: &[kerntune_device::Init]) -> Result<(), String> {
        if data.len() != self.tolerances.len() {
            return Err(format!("{} reference outputs for {} checked outputs", data.len(), self.tolerances.len()));
        }
        for ((position, _, _), init) in self.tolerances.clone().iter().zip(data) {
            let argument = &mut self.arguments[*position];
            let bytes = fill(argument.dtype, argument.len, init, 0)
                .map_err(|e| format!("reference of output #{position}: {e}"))?;
            let buffer = context.alloc(bytes.len()).map_err(|e| e.to_string())?;
            context.upload(&buffer, &bytes).map_err(|e| e.to_string())?;
            argument.reference = Some(buffer);
        }
        self.check_reference(context)
    }

    /// The reference kernel's outputs on the setup's inputs, and on `sets` extra input sets.
    fn compute_reference(
        &mut self,
        context: &Context,
        reference: &KernelImage,
        args: &[ArgSetup],
        sets: u32,
        inputs: &mut inputs::Inputs<'_>,
    ) -> Result<(), String> {
        let module = self.load(context, reference).map_err(|e| format!("loading the reference: {e}"))?;
        let function = module.function(&reference.name).map_err(|e| format!("the reference kernel: {e}"))?;
        function.allow_dynamic_shared(reference.geometry.shared_bytes).map_err(|e| e.to_string())?;
        let (mut pointers, _scratch) = self.kernel_pointers(context, reference).map_err(|e| e.to_string())?;
        let mut run = |worker: &Worker| {
            worker.prepare_outputs(context).map_err(|e| e.to_string())?;
            launch_image(context, &function, reference, &mut pointers)
                .and_then(|()| context.synchronize())
                .map_err(|e| format!("running the reference kernel: {e}"))
        };
        run(self)?;
        for (position, _, _) in self.tolerances.clone() {
            let argument = &mut self.arguments[position];
            let Some(buffer) = &argument.buffer else { continue };
            let copy = context.alloc(buffer.bytes()).map_err(|e| e.to_string())?;
            context.copy(buffer, &copy).map_err(|e| e.to_string())?;
            argument.reference = Some(copy);
        }
        self.check_reference(context)?;
        self.extra_sets = self.draw_sets(context, args, sets, &mut run, inputs)?;
        Ok(())
    }

    fn check_reference(&self, context: &Context) -> Result<(), String> {
        for (position, _, _) in &self.tolerances {
            if let Some(reference) = &self.arguments[*position].reference {
                self.reference_defined(context, *position, reference)?;
            }
        }
        Ok(())
    }

    /// A reference that leaves NaN (or an unwritten element) cannot judge anything.
    fn reference_defined(&self, context: &Context, position: usize, reference: &DeviceBuffer) -> Result<(), String> {
        let argument = &self.arguments[position];
        let Some(comparer) = &self.comparer else { return Ok(()) };
        let check = comparer
            .compare(context, reference, reference, argument.dtype, argument.len, 0.0, 0.0, false)
            .map_err(|e| e.to_string())?;
        if check.nan > 0 {
            return Err(format!(
                "the reference leaves {} NaN elements in output #{position} (first at {})",
                check.nan, check.first_bad
            ));
        }
        Ok(())
    }

    /// The parameter pointers of a launch of `kernel`, and what they point at that must
    /// live until it has run: scratch buffers, values and TMA descriptors. Each pointer
    /// points at the argument's value (an argument's 8-byte slot holds a scalar or a device
    /// address); cuLaunchKernel reads as many bytes as the parameter has.
    fn kernel_pointers(
        &mut self,
        context: &Context,
        kernel: &KernelImage,
    ) -> Result<(Vec<*mut c_void>, Scratch), CudaError> {
        let Some(params) = &kernel.params else {
            return Ok((
                self.slots.iter_mut().map(|slot| (slot as *mut u64).cast::<c_void>()).collect(),
                Scratch::default(),
            ));
        };
        let programs: u64 = kernel.geometry.grid.iter().map(|g| u64::from(*g)).product();
        let mut scratch = Scratch::default();
        let mut pointers = Vec::with_capacity(params.len());
        for param in params {
            let pointer = match param {
                ParamSource::Arg { index } => (&mut self.slots[*index] as *mut u64).cast::<c_void>(),
                ParamSource::Scratch { bytes_per_program } => {
                    let mut address = 0;
                    if *bytes_per_program > 0 {
                        let buffer = context.alloc((bytes_per_program * programs) as usize)?;
                        context.fill(&buffer, 0)?;
                        address = buffer.pointer();
                        scratch.buffers.push(buffer);
                    }
                    scratch.hold(Held::Value(address))
                }
                ParamSource::Value { bytes } => {
                    let mut value = [0u8; 8];
                    let length = bytes.0.len().min(8);
                    value[..length].copy_from_slice(&bytes.0[..length]);
                    scratch.hold(Held::Value(u64::from_le_bytes(value)))
                }
                ParamSource::TensorMap { index, map } => {
                    scratch.hold(Held::TensorMap(TensorMap::encode(map, self.slots[*index])?))
                }
            };
            pointers.push(pointer);
        }
        Ok((pointers, scratch))
    }

    /// Poisons outputs (all bytes 0xFF: NaN for floats) or restores in-place ones, and
    /// zeroes the buffers reset before every launch.
    fn prepare_outputs(&self, context: &Context) -> Result<(), CudaError> {
        for argument in self.arguments.iter().filter(|a| a.output && !a.reset) {
            let Some(buffer) = &argument.buffer else { continue };
            match (&argument.initial, argument.poison) {
                (Some(initial), false) => context.copy(initial, buffer)?,
                _ => context.fill(buffer, 0xFF)?,
            }
        }
        self.reset_buffers(context)
    }

    /// Zeroes the buffers that a kernel expects to find at zero (`reset_to_zero`).
    fn reset_buffers(&self, context: &Context) -> Result<(), CudaError> {
        for buffer in self.arguments.iter().filter(|a| a.reset).filter_map(|a| a.buffer.as_ref()) {
            context.fill(buffer, 0)?;
        }
        Ok(())
    }

    fn evaluate(
        &mut self,
        context: &Context,
        request: &EvaluateRequest,
        waiting: &mut dyn FnMut(usize),
    ) -> EvaluateResult {
        let mut result = EvaluateResult::empty(request.id);
        if let Err(ended) = self.measure(context, request, &mut result, waiting) {
            result.status = ended.status;
            result.reason = Some(ended.reason);
            result.context_lost = ended.context_lost;
        }
        result
    }

    fn measure(
        &mut self,
        context: &Context,
        request: &EvaluateRequest,
        result: &mut EvaluateResult,
        waiting: &mut dyn FnMut(usize),
    ) -> Result<(), Ended> {
        let kernel = &request.kernel;
        let module =
            self.load(context, kernel).map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "loading the module", e))?;
        let function = module
            .function(&kernel.name)
            .map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "finding the kernel", e))?;
        let attributes = function
            .attributes()
            .map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "reading the kernel's attributes", e))?;
        result.attributes = Some(attributes);
        check_limits(context, &attributes, &request.kernel)?;
        let geometry = kernel.geometry;
        function
            .allow_dynamic_shared(geometry.shared_bytes)
            .map_err(|e| Ended::cuda(FailureKind::InvalidConfig, "raising the dynamic shared memory limit", e))?;
        let (mut pointers, _scratch) = self
            .kernel_pointers(context, kernel)
            .map_err(|e| Ended::cuda(FailureKind::Device, "allocating scratch memory", e))?;
        let launch = |pointers: &mut [*mut c_void]| launch_image(context, &function, kernel, pointers);

        // The checked run, on poisoned outputs; it is also the warm-up, and never timed.
        let verify_start = Instant::now();
        self.prepare_outputs(context).map_err(|e| Ended::cuda(FailureKind::Device, "poisoning the outputs", e))?;
        self.ensure_events(context, 1).map_err(|e| Ended::cuda(FailureKind::Device, "creating events", e))?;
        let (start, stop) = &self.events[0];
        start.record(context).map_err(|e| Ended::cuda(FailureKind::Device, "recording an event", e))?;
        launch(&mut pointers).map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "launching", e))?;
        stop.record(context).map_err(|e| Ended::cuda(FailureKind::Device, "recording an event", e))?;
        waiting(1);
        context.synchronize().map_err(|e| Ended::cuda(FailureKind::LaunchFailed, "running", e))?;
        // Not a sample (the first launch after loading is never timed as one), but GPU time
        // spent in the tuned kernel all the same.
        result.verify_kernel_ms = start.elapsed_ms(stop).unwrap_or(0.0);
        self.verify(context)?;
        result.verified_sets = u32::from(self.arguments.iter().any(|a| a.reference.is_some()));
        self.write_outputs(context, request.id)?;
        result.verify_s = verify_start.elapsed().as_secs_f64();

        self.time(context, request, &launch, &mut pointers, result, waiting)?;
        // Only a configuration that may win is checked further: one stopped early is slower
        // than the best by the early-stop factor (its check on the setup's inputs stands).
        // In a brute force most are, and each further check is a launch of the kernel.
        let verify_start = Instant::now();
        let checked = self
            .verify_sets(context, &mut pointers, &launch, &mut result.verified_sets, waiting)
            .and_then(|()| self.verify_edges(context, &function, kernel, &mut result.verified_sets, waiting));
        result.verify_s += verify_start.elapsed().as_secs_f64();
        if checked.is_err() {
            // Its times are not a result.
            result.samples.clear();
            result.clocks = None;
            result.energy = None;
        }
        checked
    }

    fn verify(&self, context: &Context) -> Result<(), Ended> {
        let references: Vec<Option<&DeviceBuffer>> =
            self.tolerances.iter().map(|(position, _, _)| self.arguments[*position].reference.as_ref()).collect();
        self.verify_against(context, &references)
    }

    /// Compares the outputs with `references`, one per checked output (in the order of the
    /// tolerances), within the tolerances.
    fn verify_against(&self, context: &Context, references: &[Option<&DeviceBuffer>]) -> Result<(), Ended> {
        let Some(comparer) = &self.comparer else { return Ok(()) };
        let mut problems = Vec::new();
        for ((position, atol, rtol), reference) in self.tolerances.iter().zip(references) {
            let argument = &self.arguments[*position];
            let (Some(buffer), Some(reference)) = (&argument.buffer, reference) else { continue };
            let found = comparer
                .compare(context, buffer, reference, argument.dtype, argument.len, *atol, *rtol, self.bitwise)
                .map_err(|e| Ended::cuda(FailureKind::Device, "comparing outputs", e))?;
            if found.bad > 0 {
                problems.push(format!(
                    "output #{position}: {} of {} elements wrong ({} NaN or unwritten), first at index {}, largest error {:.3e} (atol {atol}, rtol {rtol})",
                    found.bad, argument.len, found.nan, found.first_bad, found.max_error
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Ended::failed(FailureKind::WrongAnswer, problems.join("; ")))
        }
    }

    /// Loads a kernel's module and fills its `__constant__` symbols.
    fn load(&self, context: &Context, kernel: &KernelImage) -> Result<Module, CudaError> {
        let module = context.load_module(&kernel.cubin.0)?;
        for (name, bytes) in &self.constants {
            module.write_global(name, &bytes.0)?;
        }
        Ok(module)
    }

    /// Writes every output buffer to the setup's outputs folder, for the supervisor's check.
    fn write_outputs(&self, context: &Context, id: u32) -> Result<(), Ended> {
        let Some(dir) = &self.outputs_dir else { return Ok(()) };
        for (position, argument) in self.arguments.iter().enumerate().filter(|(_, a)| a.output) {
            let Some(buffer) = &argument.buffer else { continue };
            let mut bytes = vec![0u8; buffer.bytes()];
            context
                .download(buffer, &mut bytes)
                .map_err(|e| Ended::cuda(FailureKind::Device, "reading the outputs back", e))?;
            let file = output_file(dir, id, position);
            std::fs::write(&file, &bytes).map_err(|e| {
                Ended::failed(FailureKind::Device, format!("writing the outputs to {}: {e}", file.display()))
            })?;
        }
        Ok(())
    }

    fn flush(&mut self, context: &Context) -> Result<(), CudaError> {
        let Some(buffer) = &self.flush else { return Ok(()) };
        // A different byte each time, so no layer of the memory system can skip the writes.
        self.flushes = self.flushes.wrapping_add(1);
        context.fill(buffer, self.flushes)
    }

    fn ensure_events(&mut self, context: &Context, count: usize) -> Result<(), CudaError> {
        while self.events.len() < count {
            self.events.push((context.event()?, context.event()?));
        }
        Ok(())
    }
}

/// What the parameters of one launch point at beyond the arguments' slots: scratch
/// buffers, and the values and TMA descriptors passed by value, each boxed so that its
/// address stays put while `Scratch` moves.
#[derive(Default)]
struct Scratch {
    // Boxed: the vector moves its elements as it grows, and pointers to them are handed out.
    #[allow(clippy::vec_box)]
    held: Vec<Box<Held>>,
    buffers: Vec<DeviceBuffer>,
}

enum Held {
    /// A scalar or a device address, little-endian in 8 bytes.
    Value(u64),
    TensorMap(TensorMap),
}

impl Scratch {
    /// Keeps `value` until the launch and returns the parameter pointer to it.
    fn hold(&mut self, value: Held) -> *mut c_void {
        let mut boxed = Box::new(value);
        let pointer = match boxed.as_mut() {
            Held::Value(value) => (value as *mut u64).cast::<c_void>(),
            Held::TensorMap(map) => map.as_mut_ptr(),
        };
        self.held.push(boxed);
        pointer
    }
}

fn launch_image(
    context: &Context,
    function: &kerntune_device::driver::Function<'_>,
    kernel: &KernelImage,
    pointers: &mut [*mut c_void],
) -> Result<(), CudaError> {
    let g = &kernel.geometry;
    if kernel.cluster_x > 1 {
        context.launch_cluster(function, g.grid, g.block, g.shared_bytes, kernel.cluster_x, pointers)
    } else {
        context.launch(function, g.grid, g.block, g.shared_bytes, pointers)
    }
}

/// Device limits that make a configuration invalid (not an error of the run).
fn check_limits(context: &Context, attributes: &FunctionAttributes, kernel: &KernelImage) -> Result<(), Ended> {
    let info = &context.info;
    let threads = kernel.geometry.threads_per_block();
    let invalid = |reason: String| Err(Ended::failed(FailureKind::InvalidConfig, reason));
    if threads > info.max_threads_per_block as u64 {
        return invalid(format!("{threads} threads per block; the device allows {}", info.max_threads_per_block));
    }
    if threads > attributes.max_threads_per_block as u64 {
        return invalid(format!(
            "{threads} threads per block, but with {} registers per thread at most {} fit",
            attributes.registers, attributes.max_threads_per_block
        ));
    }
    let shared = attributes.static_shared_bytes as u64 + u64::from(kernel.geometry.shared_bytes);
    if shared > info.max_shared_per_block_optin as u64 {
        return invalid(format!(
            "{shared} bytes of shared memory per block; the device allows {}",
            info.max_shared_per_block_optin
        ));
    }
    Ok(())
}
