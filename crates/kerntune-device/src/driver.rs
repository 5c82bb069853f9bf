//! A small safe layer over the CUDA driver API (through cudarc's `result` level): the
//! context, one stream, device memory, modules, functions, events and launches that a
//! benchmark worker needs, each with RAII and typed errors. Probing comes first
//! ([`driver_available`]), so that commands on a machine without a driver get an error,
//! never cudarc's panic.
//!
//! As in cudarc, every child of a [`Context`] ([`DeviceBuffer`], [`Module`], [`Event`])
//! holds a reference-counted handle on the context's state, so the context outlives them
//! whatever the order of drops; a [`Function`] borrows its module. The handle is an `Rc`,
//! not cudarc's `Arc`: the context is current on one thread only, so neither it nor its
//! children may move to another. `Drop` never panics and never discards an
//! error: a failed release is recorded on the context, where
//! [`Context::take_release_errors`] hands it to the caller.

use std::cell::RefCell;
use std::ffi::c_void;
use std::rc::Rc;

use cudarc::driver::result;
use cudarc::driver::sys;
use serde::{Deserialize, Serialize};

/// Why the driver could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// The driver library cannot be loaded: no NVIDIA driver on this machine.
    #[error("dlopen(libcuda): no CUDA driver on this machine")]
    NoDriver,
    /// The machine has fewer GPUs than the ordinal asked for.
    #[error("cuDeviceGet: no GPU #{ordinal} ({count} found)")]
    NoDevice { ordinal: usize, count: i32 },
    /// A driver call failed: which call, and the driver's name for the error.
    #[error("{call}: {code}")]
    Call {
        call: &'static str,
        code: String,
        /// Whether the error leaves the context unusable (an illegal address, a trap, a
        /// launch failure): the worker must then be replaced.
        sticky: bool,
    },
    /// A request the driver was never asked: a name with a NUL, data larger than its
    /// destination.
    #[error("{call}: {message}")]
    Request { call: &'static str, message: String },
}

impl CudaError {
    /// Whether the error leaves the context unusable, so that its process must be replaced.
    pub fn sticky(&self) -> bool {
        matches!(self, CudaError::Call { sticky: true, .. })
    }

    /// Whether the machine has no usable GPU at all (no driver, no such device).
    pub fn no_gpu(&self) -> bool {
        matches!(self, CudaError::NoDriver | CudaError::NoDevice { .. })
    }
}

fn check<T>(call: &'static str, outcome: Result<T, result::DriverError>) -> Result<T, CudaError> {
    outcome.map_err(|error| {
        let code =
            error.error_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", error.0));
        let sticky = matches!(
            error.0,
            sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
                | sys::CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
                | sys::CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
                | sys::CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
                | sys::CUresult::CUDA_ERROR_INVALID_PC
                | sys::CUresult::CUDA_ERROR_LAUNCH_FAILED
                | sys::CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
                | sys::CUresult::CUDA_ERROR_ASSERT
                | sys::CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
                | sys::CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
                | sys::CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
        );
        CudaError::Call { call, code, sticky }
    })
}

/// Whether the CUDA driver library can be loaded on this machine.
pub fn driver_available() -> bool {
    // SAFETY: only tries to dlopen the library; no symbol is called.
    unsafe { sys::is_culib_present() }
}

/// What the tuner needs to know about a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: i32,
    pub l2_bytes: usize,
    pub max_threads_per_block: i32,
    pub max_shared_per_block: i32,
    pub max_shared_per_block_optin: i32,
    pub max_registers_per_block: i32,
    pub clock_khz: i32,
    pub memory_bytes: usize,
    /// The PCI address (`domain:bus:device.0`, hexadecimal), which names the same GPU
    /// whatever `CUDA_VISIBLE_DEVICES` does to the ordinals; `None` for a compile target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

impl DeviceInfo {
    /// `sm_90` and the like, for compilers.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }
}

/// One of a launch's argument pointers ([`Context::launch`]): the address of the value
/// the kernel's parameter takes, which must have the parameter's type.
pub fn param<T>(value: &mut T) -> *mut c_void {
    (value as *mut T).cast()
}

/// The primary context of one device, current on the calling thread, with one stream.
#[derive(Debug)]
pub struct Context {
    shared: Rc<Shared>,
    pub info: DeviceInfo,
}

/// What the context's children keep alive: the retained primary context, its stream, and
/// the errors of releases that failed.
#[derive(Debug)]
struct Shared {
    device: sys::CUdevice,
    stream: sys::CUstream,
    release_errors: RefCell<Vec<CudaError>>,
}

impl Shared {
    /// Keeps the error of a failed release for [`Context::take_release_errors`].
    fn record(&self, call: &'static str, outcome: Result<(), result::DriverError>) {
        if let Err(error) = check(call, outcome) {
            match self.release_errors.try_borrow_mut() {
                Ok(mut errors) => errors.push(error),
                // Not reachable (nothing holds the list across a release), but a drop must
                // not panic: standard error keeps it then.
                Err(_) => eprintln!("kerntune: releasing GPU resources failed: {error}"),
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the stream is ours, and every child that could use it held this `Rc`
        // and is gone.
        let destroyed = unsafe { result::stream::destroy(self.stream) };
        self.record("cuStreamDestroy", destroyed);
        // SAFETY: retained once in `Context::open` and released once, here, last.
        let released = unsafe { result::primary_ctx::release(self.device) };
        self.record("cuDevicePrimaryCtxRelease", released);
        // No one is left to ask for these; standard error keeps them (a supervisor shows
        // the last line a dead worker wrote).
        for error in self.release_errors.get_mut().drain(..) {
            eprintln!("kerntune: releasing GPU resources failed: {error}");
        }
    }
}

/// How many GPUs the driver sees (0 without a driver).
pub fn device_count() -> Result<usize, CudaError> {
    if !driver_available() {
        return Err(CudaError::NoDriver);
    }
    check("cuInit", result::init())?;
    Ok(check("cuDeviceGetCount", result::device::get_count())?.max(0) as usize)
}

/// The device and its properties, without creating a context (cheap enough for the main
/// process, which never runs kernels itself).
pub fn probe(ordinal: usize) -> Result<(sys::CUdevice, DeviceInfo), CudaError> {
    if !driver_available() {
        return Err(CudaError::NoDriver);
    }
    check("cuInit", result::init())?;
    let count = check("cuDeviceGetCount", result::device::get_count())?;
    if ordinal as i32 >= count {
        return Err(CudaError::NoDevice { ordinal, count });
    }
    let device = check("cuDeviceGet", result::device::get(ordinal as i32))?;
    let attribute = |a: sys::CUdevice_attribute| {
        // SAFETY: `device` is valid; attributes are plain integers.
        check("cuDeviceGetAttribute", unsafe { result::device::get_attribute(device, a) })
    };
    use sys::CUdevice_attribute as A;
    let info = DeviceInfo {
        ordinal,
        name: check("cuDeviceGetName", result::device::get_name(device))?,
        compute_capability: (
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        multiprocessors: attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        l2_bytes: attribute(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
        max_threads_per_block: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_shared_per_block: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_per_block_optin: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        max_registers_per_block: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        clock_khz: attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        // SAFETY: `device` is valid.
        memory_bytes: check("cuDeviceTotalMem", unsafe { result::device::total_mem(device) })?,
        pci_bus_id: Some(format!(
            "{:08x}:{:02x}:{:02x}.0",
            attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            attribute(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
        )),
    };
    Ok((device, info))
}

impl Context {
    pub fn open(ordinal: usize) -> Result<Context, CudaError> {
        let (device, info) = probe(ordinal)?;
        // SAFETY: `device` came from cuDeviceGet; the context is released in Drop.
        let context = check("cuDevicePrimaryCtxRetain", unsafe { result::primary_ctx::retain(device) })?;
        // SAFETY: the context was just retained and outlives this value.
        check("cuCtxSetCurrent", unsafe { result::ctx::set_current(context) })?;
        let stream = match check("cuStreamCreate", result::stream::create(result::stream::StreamKind::NonBlocking)) {
            Ok(stream) => stream,
            Err(error) => {
                // SAFETY: retained above and not yet owned by anything that releases it.
                let _released = unsafe { result::primary_ctx::release(device) };
                return Err(error);
            }
        };
        Ok(Context { shared: Rc::new(Shared { device, stream, release_errors: RefCell::default() }), info })
    }

    pub fn stream(&self) -> sys::CUstream {
        self.shared.stream
    }

    /// The device's PCI address (see [`DeviceInfo::pci_bus_id`]).
    pub fn pci_bus_id(&self) -> Option<&str> {
        self.info.pci_bus_id.as_deref()
    }

    /// The errors of releases (of buffers, modules, events) that failed since the last
    /// call: a failure at release may mean the context is no longer sound.
    pub fn take_release_errors(&self) -> Vec<CudaError> {
        self.shared.release_errors.take()
    }

    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: the stream belongs to this live context.
        check("cuStreamSynchronize", unsafe { result::stream::synchronize(self.shared.stream) })
    }

    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        // SAFETY: a plain allocation in the current context; freed in Drop.
        let pointer = check("cuMemAlloc", unsafe { result::malloc_sync(bytes.max(1)) })?;
        Ok(DeviceBuffer { pointer, bytes, context: Rc::clone(&self.shared) })
    }

    pub fn upload(&self, buffer: &DeviceBuffer, data: &[u8]) -> Result<(), CudaError> {
        assert!(data.len() <= buffer.bytes, "upload larger than the buffer");
        // SAFETY: the buffer holds at least `data.len()` bytes; the copy is synchronous.
        check("cuMemcpyHtoD", unsafe { result::memcpy_htod_sync(buffer.pointer, data) })
    }

    pub fn download(&self, buffer: &DeviceBuffer, out: &mut [u8]) -> Result<(), CudaError> {
        assert!(out.len() <= buffer.bytes, "download larger than the buffer");
        self.synchronize()?;
        // SAFETY: the buffer holds at least `out.len()` bytes; the copy is synchronous.
        check("cuMemcpyDtoH", unsafe { result::memcpy_dtoh_sync(out, buffer.pointer) })
    }

    /// Sets every byte of the buffer, on the stream (asynchronously).
    pub fn fill(&self, buffer: &DeviceBuffer, byte: u8) -> Result<(), CudaError> {
        // SAFETY: the range is the whole live buffer.
        check("cuMemsetD8Async", unsafe {
            result::memset_d8_async(buffer.pointer, byte, buffer.bytes, self.shared.stream)
        })
    }

    /// Copies `bytes` bytes between buffers, on the stream.
    pub fn copy(&self, from: &DeviceBuffer, to: &DeviceBuffer) -> Result<(), CudaError> {
        let bytes = from.bytes.min(to.bytes);
        // SAFETY: both ranges lie inside live buffers.
        check("cuMemcpyDtoDAsync", unsafe {
            result::memcpy_dtod_async(to.pointer, from.pointer, bytes, self.shared.stream)
        })
    }

    pub fn load_module(&self, image: &[u8]) -> Result<Module, CudaError> {
        // The driver wants a NUL-terminated image for PTX; a cubin is an ELF and ignores it.
        let mut owned = image.to_vec();
        owned.push(0);
        // SAFETY: `owned` is a complete image that lives through the call.
        let module = check("cuModuleLoadData", unsafe { result::module::load_data(owned.as_ptr().cast()) })?;
        Ok(Module { module, context: Rc::clone(&self.shared) })
    }

    pub fn event(&self) -> Result<Event, CudaError> {
        // Timing must be enabled (CU_EVENT_DEFAULT), or elapsed time is an error.
        let event = check("cuEventCreate", result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        Ok(Event { event, context: Rc::clone(&self.shared) })
    }

    /// Launches `function` on the stream with argument pointers (each pointing at the
    /// argument's value, as cuLaunchKernel expects: see [`param`]).
    pub fn launch(
        &self,
        function: &Function<'_>,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        // SAFETY: the function's module is alive (borrowed); every argument pointer points
        // at a value of the type the kernel declares, which the caller guarantees by
        // building `args` from the kernel's signature.
        check("cuLaunchKernel", unsafe {
            result::launch_kernel(
                function.function,
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                self.shared.stream,
                args,
            )
        })
    }

    /// Launches with thread-block clusters of `cluster_x` blocks along x (Hopper's
    /// `num_ctas`), spread over the GPU as Triton launches them.
    pub fn launch_cluster(
        &self,
        function: &Function<'_>,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        cluster_x: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        // SAFETY: plain-old-data attribute records, fully initialised below.
        let mut attributes: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
        attributes[0].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attributes[0].value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: cluster_x, y: 1, z: 1 };
        attributes[1].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
        attributes[1].value.clusterSchedulingPolicyPreference =
            sys::CUclusterSchedulingPolicy::CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
        let config = sys::CUlaunchConfig {
            gridDimX: grid[0],
            gridDimY: grid[1],
            gridDimZ: grid[2],
            blockDimX: block[0],
            blockDimY: block[1],
            blockDimZ: block[2],
            sharedMemBytes: shared_bytes,
            hStream: self.shared.stream,
            attrs: attributes.as_mut_ptr(),
            numAttrs: 2,
        };
        // SAFETY: as for `launch`; the configuration and its attributes outlive the call.
        check("cuLaunchKernelEx", unsafe {
            sys::cuLaunchKernelEx(&config, function.function, args.as_mut_ptr(), std::ptr::null_mut()).result()
        })
    }
}

impl Context {
    /// Records what `enqueue` puts on the stream into a CUDA graph instead of running it
    /// (stream capture), and instantiates it: one [`Graph::launch`] then replays every
    /// launch and memset with one launch's overhead.
    pub fn capture(&self, enqueue: &mut dyn FnMut() -> Result<(), CudaError>) -> Result<Graph, CudaError> {
        let stream = self.shared.stream;
        // SAFETY: the stream is this live context's; capture is ended below on every path.
        check("cuStreamBeginCapture", unsafe {
            sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).result()
        })?;
        let enqueued = enqueue();
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: capture was begun on this stream; the out-parameter lives for the call.
        let ended = check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(stream, &mut graph).result() });
        let owned = (!graph.is_null()).then(|| GraphDefinition { graph, context: Rc::clone(&self.shared) });
        enqueued?;
        ended?;
        let Some(definition) = owned else {
            return Err(CudaError::Request { call: "cuStreamEndCapture", message: "no graph was captured".into() });
        };
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: a complete captured graph and an out-parameter.
        check("cuGraphInstantiateWithFlags", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut exec, definition.graph, 0).result()
        })?;
        Ok(Graph { exec, _definition: definition, context: Rc::clone(&self.shared) })
    }
}

/// A captured graph's definition, destroyed on drop.
#[derive(Debug)]
struct GraphDefinition {
    graph: sys::CUgraph,
    context: Rc<Shared>,
}

impl Drop for GraphDefinition {
    fn drop(&mut self) {
        // SAFETY: created by stream capture in the context kept alive here, destroyed once.
        let destroyed = unsafe { sys::cuGraphDestroy(self.graph).result() };
        self.context.record("cuGraphDestroy", destroyed);
    }
}

/// An instantiated CUDA graph ([`Context::capture`]), destroyed on drop.
#[derive(Debug)]
pub struct Graph {
    exec: sys::CUgraphExec,
    _definition: GraphDefinition,
    context: Rc<Shared>,
}

impl Graph {
    /// Runs the whole graph on the context's stream.
    pub fn launch(&self, context: &Context) -> Result<(), CudaError> {
        // SAFETY: an instantiated graph of this context, launched on its stream.
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(self.exec, context.shared.stream).result() })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: instantiated in the context kept alive here, destroyed once, before its
        // definition (a field dropped after this body).
        let destroyed = unsafe { sys::cuGraphExecDestroy(self.exec).result() };
        self.context.record("cuGraphExecDestroy", destroyed);
    }
}

/// Device memory, freed on drop; it keeps its context alive.
#[derive(Debug)]
pub struct DeviceBuffer {
    pointer: sys::CUdeviceptr,
    bytes: usize,
    context: Rc<Shared>,
}

impl DeviceBuffer {
    pub fn pointer(&self) -> u64 {
        self.pointer
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in the context this buffer keeps alive, and
        // freed once.
        let freed = unsafe { result::free_sync(self.pointer) };
        self.context.record("cuMemFree", freed);
    }
}

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// A loaded module, unloaded on drop; it keeps its context alive.
#[derive(Debug)]
pub struct Module {
    module: sys::CUmodule,
    context: Rc<Shared>,
}

/// Resource use of a compiled kernel, as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionAttributes {
    pub registers: i32,
    pub static_shared_bytes: i32,
    pub local_bytes: i32,
    /// The most threads per block the kernel can be launched with (registers limit it).
    pub max_threads_per_block: i32,
}

impl Module {
    pub fn function(&self, name: &str) -> Result<Function<'_>, CudaError> {
        let c_name = std::ffi::CString::new(name)
            .map_err(|_| CudaError::Request { call: "cuModuleGetFunction", message: "name contains NUL".into() })?;
        // SAFETY: the module is loaded; the name is NUL-terminated.
        let function = check("cuModuleGetFunction", unsafe { result::module::get_function(self.module, c_name) })?;
        Ok(Function { function, _module: self })
    }

    /// Writes `data` into the module's global (`__constant__` or `__device__`) variable
    /// `name`, which must be at least that large.
    pub fn write_global(&self, name: &str, data: &[u8]) -> Result<(), CudaError> {
        let fail = |message: String| CudaError::Request { call: "cuModuleGetGlobal", message };
        let c_name = std::ffi::CString::new(name).map_err(|_| fail("name contains NUL".into()))?;
        // SAFETY: the module is loaded; the name is NUL-terminated.
        let (pointer, bytes) = check("cuModuleGetGlobal", unsafe { result::module::get_global(self.module, c_name) })?;
        if data.len() > bytes {
            return Err(fail(format!("'{name}' holds {bytes} bytes; {} given", data.len())));
        }
        // SAFETY: the symbol's storage holds at least `data.len()` bytes; the copy is
        // synchronous.
        check("cuMemcpyHtoD", unsafe { result::memcpy_htod_sync(pointer, data) })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded by cuModuleLoadData in the context this module keeps alive, and
        // unloaded once; no `Function` borrowing it is left.
        let unloaded = unsafe { result::module::unload(self.module) };
        self.context.record("cuModuleUnload", unloaded);
    }
}

/// A kernel of a loaded module; it borrows the module so it cannot outlive it.
#[derive(Debug)]
pub struct Function<'m> {
    function: sys::CUfunction,
    _module: &'m Module,
}

impl Function<'_> {
    pub fn attributes(&self) -> Result<FunctionAttributes, CudaError> {
        use sys::CUfunction_attribute as F;
        let get = |a| {
            // SAFETY: the function is valid while its module is borrowed.
            check("cuFuncGetAttribute", unsafe { result::function::get_function_attribute(self.function, a) })
        };
        Ok(FunctionAttributes {
            registers: get(F::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes: get(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            local_bytes: get(F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            max_threads_per_block: get(F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        })
    }

    /// Makes a launch with `bytes` of dynamic shared memory possible: above the default
    /// 48 KiB that takes an opt-in, below it nothing.
    pub fn allow_dynamic_shared(&self, bytes: u32) -> Result<(), CudaError> {
        if bytes <= DEFAULT_DYNAMIC_SHARED {
            return Ok(());
        }
        // SAFETY: the function is valid while its module is borrowed.
        check("cuFuncSetAttribute", unsafe {
            result::function::set_function_attribute(
                self.function,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        })
    }
}

/// A timing event, destroyed on drop; it keeps its context alive.
#[derive(Debug)]
pub struct Event {
    event: sys::CUevent,
    context: Rc<Shared>,
}

impl Event {
    pub fn record(&self, context: &Context) -> Result<(), CudaError> {
        // SAFETY: both the event and the stream are alive.
        check("cuEventRecord", unsafe { result::event::record(self.event, context.shared.stream) })
    }

    /// Waits until the work recorded before this event has run.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: the event is alive; waiting on one never recorded returns at once.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.event).result() })
    }

    /// Milliseconds from `self` to `end`; both must have completed.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64, CudaError> {
        // SAFETY: both events were created with timing enabled and recorded on one stream.
        check("cuEventElapsedTime", unsafe { result::event::elapsed(self.event, end.event) }).map(f64::from)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate in the context this event keeps alive, and
        // destroyed once.
        let destroyed = unsafe { result::event::destroy(self.event) };
        self.context.record("cuEventDestroy", destroyed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_without_a_gpu_reads_as_before_and_is_told_apart() {
        assert_eq!(CudaError::NoDriver.to_string(), "dlopen(libcuda): no CUDA driver on this machine");
        let missing = CudaError::NoDevice { ordinal: 1, count: 0 };
        assert_eq!(missing.to_string(), "cuDeviceGet: no GPU #1 (0 found)");
        assert!(CudaError::NoDriver.no_gpu() && missing.no_gpu() && !missing.sticky());
        let trap =
            CudaError::Call { call: "cuStreamSynchronize", code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(), sticky: true };
        assert!(trap.sticky() && !trap.no_gpu());
        assert_eq!(trap.to_string(), "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS");
    }
}
