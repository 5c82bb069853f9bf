"""The Triton compile worker: a child process that compiles configurations of one
@triton.jit kernel for a target architecture, with no GPU.

Its kernel comes in a setup file that holds the kernel as data (its source and what the
source uses, see ``kerntune._kernel_source``: the worker never imports or runs the user's
program) and describes the arguments of the call being tuned. Each request names its setup
file (``"setup"``), and the worker loads it when it is not the one it holds: a worker kept
from one tuning to the next (``kerntune._crew``) compiles the next kernel without starting
again. Each configuration is specialized by
Triton's own binder on stand-ins for those arguments, exactly as Triton's JIT specializes
the real call (integers equal to 1 become constants, 16-divisible integers and 16-aligned
pointers get ``tt.divisibility = 16``, and whatever else this Triton version does), then
compiled with ``triton.compile(ASTSource(...), target=GPUTarget(...))``.

A configuration whose shared memory exceeds the device's limit is refused at the start of
the LLVM stage (its allocation passes run first on a copy of the module), before the
lowering to LLVM and ptxas; so is one whose dot accumulator alone needs more than twice
the registers a thread can have (it would spill most of it, and such configurations are
the ones whose compiles run into the time limit: see docs/design-notes.md).

Configurations that differ only in ``num_warps`` and ``num_stages`` share their front end
(the kernel's AST to TTIR, then the TTIR stage): the worker keeps the TTIR of each one it
compiles from the AST, and compiles its siblings from that TTIR (``FrontEnds``).

Protocol: one JSON request per line on stdin (``{"id", "kind": "triton", "constexprs",
"options", "setup"}``), one JSON reply per line on stdout. ``front_end_reused`` in a compiled or
refused (``invalid_config``) reply says whether it came from a sibling's TTIR.
"""

import base64
import contextlib
import hashlib
import json
import os
import re
import struct
import sys
import time


class _Tensor:
    """Stands in for a tensor argument: Triton's binder reads only its dtype and address."""

    def __init__(self, dtype, data_ptr):
        self.dtype = dtype
        self._data_ptr = data_ptr

    def data_ptr(self):
        return self._data_ptr


class OverDeviceLimit(Exception):
    """A configuration the device cannot run as compiled: refused as an invalid configuration."""

    #: Whether the refusal came from compiling a sibling's TTIR (see ``FrontEnds``).
    front_end_reused = False


#: The 32-bit registers one thread can have (every NVIDIA GPU since Kepler).
MAX_REGISTERS = 255

#: A configuration whose dot accumulator needs more than this many times MAX_REGISTERS per
#: thread is refused before the lowering: more than half of it would live in local memory.
REGISTER_FACTOR = 2

#: The compile options in which configurations sharing their front end differ. Triton 3.6's
#: front end reads neither unless the kernel asks (``tl.extra.cuda.num_warps()`` or
#: ``num_threads()``), which ``FrontEnds`` notices; its TTIR stage reads only the architecture.
PER_CONFIGURATION = frozenset({"num_warps", "num_stages"})


def stand_in(arg):
    kind = arg["kind"]
    if kind == "tensor":
        return _Tensor(arg["dtype"], arg["data_ptr"])
    if kind == "tensordesc":
        return descriptor(arg, arg["block_shape"])
    if "triton_dtype" in arg:
        import triton.language as tl

        return tl.dtype(arg["triton_dtype"])
    return arg.get("value")


def descriptor(arg, block_shape):
    """A host-side tensor descriptor over a stand-in tensor, with ``block_shape``. Built
    without the checks of its constructor, which read a real tensor's element size."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    desc = TensorDescriptor.__new__(TensorDescriptor)
    desc.base = _Tensor(arg["dtype"], arg["data_ptr"])
    desc.shape = list(arg["shape"])
    desc.strides = list(arg["strides"])
    desc.block_shape = list(block_shape)
    desc.padding = arg["padding"]
    return desc


#: Triton 3.6 numbers TMA element types on the device otherwise than the driver's
#: ``CUtensorMapDataType`` for three of them (its launcher's conversion).
TMA_HOST_TYPE = {8: 10, 9: 8, 10: 9}


def _packed(fmt, value):
    return {"kind": "value", "bytes": base64.b64encode(struct.pack(fmt, value)).decode()}


def launch_params(arg_names, signature, setup_args, descriptors, tensordesc_meta):
    """The compiled kernel's parameters before its scratch pointers, in Triton 3.6's launch
    ABI: each argument that is not a constexpr, where a host-side tensor descriptor expands
    to the TMA descriptor Triton lowered it to (or, where it did not, its base pointer, shape,
    strides and padding flag), then its shape (i32) and strides (i64)."""
    by_name = {a["name"]: a for a in setup_args}
    meta = list(tensordesc_meta or [])
    params = []
    for index, name in enumerate(arg_names):
        sig = signature[name]
        if sig == "constexpr":
            continue
        if not (isinstance(sig, str) and sig.startswith("tensordesc")):
            params.append({"kind": "arg", "index": index})
            continue
        arg = by_name[name]
        shape, strides = list(arg["shape"]), list(arg["strides"])
        block = list(descriptors.get(name, arg["block_shape"]))
        info = meta.pop(0) if meta else None
        if info is None:
            params.append({"kind": "arg", "index": index})
            params += [_packed("<q", v) for v in shape + strides]
            params.append(_packed("<b", arg["padding"] == "nan"))
        else:
            if info.get("fp4_padded"):
                shape[-1] *= 2
            params.append({"kind": "tensor_map", "index": index, "map": {
                "data_type": TMA_HOST_TYPE.get(info["elem_type"], info["elem_type"]),
                "elem_size": info["elem_size"],
                "shape": shape,
                "strides": strides,
                "block": list(info.get("block_size") or block),
                "swizzle": info["swizzle"],
                "nan_fill": arg["padding"] == "nan",
            }})
        params += [_packed("<i", v) for v in shape] + [_packed("<q", v) for v in strides]
    return params


def refuse_shared(shared, limit, front_end_reused=False):
    """Refuses a configuration needing ``shared`` bytes of shared memory per block where the
    device allows ``limit``."""
    if shared > limit:
        refusal = OverDeviceLimit(f"needs {shared} bytes of shared memory per block; the device allows {limit}")
        refusal.front_end_reused = front_end_reused
        raise refusal


#: The shared memory per block the device of the loaded setup allows (None: not checked).
_shared_limit = None
#: Whether the backend's LLVM stage is wrapped (once per worker).
_wrapped = False


def refuse_large_shared_memory(limit):
    """Wraps the NVIDIA backend's LLVM stage so that a configuration needing more shared
    memory than the device has fails before that stage's lowering to LLVM and before ptxas
    (for the largest tiles those two take tens of seconds; the check takes milliseconds).
    Called again (the next setup of a kept worker), only the limit changes; with ``None``
    nothing is checked."""
    global _shared_limit, _wrapped
    _shared_limit = limit
    if _wrapped or limit is None:
        return
    _wrapped = True
    from triton.backends.nvidia.compiler import CUDABackend

    original = CUDABackend.add_stages

    def refuse(shared):
        refuse_shared(shared, _shared_limit)

    def add_stages(self, stages, options, *rest):
        original(self, stages, options, *rest)
        if "llir" not in stages or _shared_limit is None:
            return
        make_llir = stages["llir"]
        capability = self.target.arch

        def checked(src, metadata):
            registers = accumulator_registers(str(src), options.num_warps)
            if registers > REGISTER_FACTOR * MAX_REGISTERS:
                raise OverDeviceLimit(
                    f"its dot accumulator alone needs {registers} registers per thread with {options.num_warps} warps, "
                    f"more than {REGISTER_FACTOR} x the {MAX_REGISTERS} a thread can have: most of it would spill "
                    f"(refused before the lowering to LLVM)")
            refuse(shared_memory_before_lowering(src, options, capability) or 0)
            out = make_llir(src, metadata)
            refuse(metadata.get("shared", 0) or 0)  # what the stage itself allocated
            return out

        stages["llir"] = checked

    CUDABackend.add_stages = add_stages


class OptionsRead:
    """Compile options as the front end sees them, noting in ``read`` the names it reads."""

    def __init__(self, options, read):
        self._options = options
        self._read = read

    def __getattr__(self, name):
        self._read.add(name)
        return getattr(self._options, name)


class FrontEnds:
    """The TTIR of configurations compiled from the AST, as the TTIR stage left it, each
    under everything it depends on: the source as Triton's cache knows it (kernel,
    signature, constexprs, attributes), the Triton version, the architecture and every
    compile option but ``num_warps`` and ``num_stages``. A configuration with the same key
    compiles from that TTIR, skipping the front end (see docs/design-notes.md), still as
    Triton's compile of its source (``reusing``): Triton caches it under the source's key,
    where a later compile of the configuration from its source finds it (another worker's,
    or the JIT's in the calling process when it launches the winner).

    The files live beside Triton's own cache (``directory``), so every worker of a run, the
    finalists' workers after it and later runs share them.

    The TTIR is kept as soon as its stage has run, so a sibling still finds it when a later
    stage of its own configuration fails (a refusal, ptxas). It is not kept when the front
    end read ``num_warps`` or ``num_stages`` (then it depends on them)."""

    def __init__(self, directory):
        self.directory = directory
        with contextlib.suppress(OSError):  # unwritable: nothing is kept, nothing shared
            os.makedirs(directory, exist_ok=True)
        self.watched = None  # (key, option names read) of the compile from the AST under way
        self.passing = False  # whether the compile under way starts past its TTIR stage (``reusing``)

    @staticmethod
    def key(source, arch, options):
        import triton

        shared = sorted((name, repr(value)) for name, value in options.items() if name not in PER_CONFIGURATION)
        return repr((triton.__version__, source.hash(), arch, shared))

    def path(self, key, suffix):
        return os.path.join(self.directory, hashlib.sha256(key.encode()).hexdigest() + suffix)

    def ttir(self, key):
        """The kept TTIR's file for ``key``, if any."""
        path = self.path(key, ".ttir")
        return path if os.path.exists(path) else None

    @staticmethod
    def write(path, text):
        """Writes ``path`` whole or not at all: other workers may read it at any moment. A
        folder that cannot be written (read-only, full) keeps nothing, and costs no compile."""
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            with open(temporary, "w") as f:
                f.write(text)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(temporary)

    @contextlib.contextmanager
    def watching(self, source, key):
        """Notes which options the front end of ``source`` reads while compiling it, so that
        ``stage_done`` knows whether its TTIR can be shared under ``key``."""
        read = set()
        make_ir = source.make_ir
        source.make_ir = lambda target, options, *rest, **named: make_ir(target, OptionsRead(options, read), *rest, **named)
        self.watched = (key, read)
        try:
            yield
        finally:
            self.watched = None

    @contextlib.contextmanager
    def reusing(self, source, ttir):
        """Makes ``source`` (an ``ASTSource``) build its module from the kept TTIR at
        ``ttir``, which the TTIR stage then passes on unchanged (``keep_front_ends``), so that
        Triton compiles it under the source's own cache key. Yields a call that says whether
        the TTIR served: Triton's cache may answer the source first."""
        from triton._C.libtriton import ir

        served = []

        def from_kept(target, options, codegen_fns, module_map, context):
            module = ir.parse_mlir_module(ttir, context)
            module.context = context
            served.append(True)
            return module

        source.make_ir = from_kept
        self.passing = True
        try:
            yield lambda: bool(served)
        finally:
            del source.make_ir
            self.passing = False

    def stage_done(self, module):
        """Keeps the TTIR stage's output for the compile being watched."""
        if self.watched is None:
            return
        key, read = self.watched
        self.watched = None
        if read & PER_CONFIGURATION or self.ttir(key):
            return
        self.write(self.path(key, ".ttir"), str(module))


def keep_front_ends(front_ends):
    """Wraps the NVIDIA backend's TTIR stage so that its output goes to ``front_ends``
    before the next stage changes the module in place."""
    from triton.backends.nvidia.compiler import CUDABackend

    original = CUDABackend.add_stages

    def add_stages(self, stages, options, *rest):
        original(self, stages, options, *rest)
        if "ttir" not in stages:
            return
        make_ttir = stages["ttir"]

        def kept(src, metadata):
            if front_ends.passing:  # a kept TTIR: already past this stage
                return src
            out = make_ttir(src, metadata)
            front_ends.stage_done(out)
            return out

        stages["ttir"] = kept

    CUDABackend.add_stages = add_stages


def compile_sharing_front_ends(source, target, options, front_ends):
    """Compiles ``source`` (an ``ASTSource``) from a sibling's TTIR where one was kept,
    else from the AST (always, with ``front_ends`` None: sharing is off); returns the
    compiled kernel and whether the TTIR served. Either way Triton caches the compile under
    the source's key. A failure from the TTIR other than a refusal is compiled again from
    the AST: a second path into Triton must never cost a configuration."""
    import triton

    if front_ends is None:
        return triton.compile(source, target=target, options=options), False
    key = front_ends.key(source, target.arch, options)
    ttir = front_ends.ttir(key)
    if ttir is not None:
        try:
            with front_ends.reusing(source, ttir) as served:
                compiled = triton.compile(source, target=target, options=options)
            return compiled, served()
        except OverDeviceLimit as refusal:
            refusal.front_end_reused = True
            raise
        except Exception as error:
            print(f"kerntune: compiling from {ttir} failed ({type(error).__name__}); compiling from the source",
                  file=sys.stderr)
    with front_ends.watching(source, key):
        compiled = triton.compile(source, target=target, options=options)
    return compiled, False


def accumulator_registers(module_text, num_warps):
    """The 32-bit registers per thread that the largest ``tt.dot`` (or Hopper's
    ``warp_group_dot``) result of a TritonGPU module takes at least: its elements spread
    over the block's threads, each held by one thread at least (0 without a dot)."""
    most = 0
    for match in re.finditer(r"(?:tt\.dot|ttng\.warp_group_dot)\b[^\n]*->\s*tensor<([\dx]+)x([a-z]+)(\d+)", module_text):
        elements = 1
        for dim in match.group(1).split("x"):
            elements *= int(dim)
        bits = elements * int(match.group(3))
        most = max(most, -(-bits // (32 * 32 * num_warps)))
    return most


def shared_memory_before_lowering(module, options, capability):
    """The shared memory a TritonGPU module will take, found by running the LLVM stage's
    passes up to its shared-memory allocation on a copy of it (Triton 3.6's order, see
    ``CUDABackend.make_llir``); None when this Triton's passes differ, and the stage's own
    figure then decides after the lowering."""
    import os
    import tempfile

    try:
        from triton._C.libtriton import ir, nvidia, passes
        from triton.backends.nvidia.compiler import get_ptx_version_from_options

        with tempfile.NamedTemporaryFile("w", suffix=".ttgir", delete=False) as f:
            f.write(str(module))
        try:
            copy = ir.parse_mlir_module(f.name, module.context)
        finally:
            os.unlink(f.name)
        copy.context = module.context
        manager = ir.pass_manager(module.context)
        passes.ttgpuir.add_combine_tensor_select_and_if(manager)
        passes.ttgpuir.add_allocate_warp_groups(manager)
        passes.convert.add_scf_to_cf(manager)
        passes.gluon.add_inliner(manager)
        ptx_version = get_ptx_version_from_options(options, capability)
        nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(manager, capability, ptx_version)
        manager.run(copy, "kerntune_shared_memory")
        return copy.get_int_attr("ttg.shared")
    except Exception:  # another Triton: the check after the lowering still holds
        return None


def compile_only_driver(target):
    """Makes Triton's active driver one that names ``target`` and has no device.

    Code generation asks the active driver for the current target (``tl.dot``,
    ``is_cuda()``, tensor-memory checks...). On a machine with a GPU that creates Triton's CUDA
    driver, which imports torch, initialises CUDA and builds its C helpers: seconds per
    worker, for nothing, and it would answer with the GPU's architecture rather than the one
    being compiled for. Without a GPU it answers "no target", which the code generator
    treats as "not CUDA". This driver answers with the compile target everywhere."""
    from triton.backends.driver import DriverBase
    from triton.runtime import driver

    class CompileOnly(DriverBase):
        @classmethod
        def is_active(cls):
            return False

        def get_current_target(self):
            return target

        def get_current_device(self):
            return 0

        def map_python_to_cpp_type(self, ty):
            raise RuntimeError("a compile worker launches nothing")

        def get_active_torch_device(self):
            raise RuntimeError("a compile worker has no device")

        def get_benchmarker(self):
            raise RuntimeError("a compile worker times nothing")

    driver.set_active(CompileOnly())


def ptx_param_count(ptx, name):
    """Parameters of the kernel's entry in its PTX: the launch ABI of this Triton version,
    read off the compiled kernel rather than assumed."""
    match = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if not match:
        raise RuntimeError(f"no .entry {name} in the PTX")
    return len(re.findall(r"\.param\s", match.group(1)))


def without_torch(kernel):
    """Keeps torch out of this worker unless the kernel's values need it. Triton's binder
    imports torch when it is installed, only to recognise torch tensors, which a worker never
    has (its stand-ins carry a dtype name): seconds per worker for nothing, minutes summed
    over a pool (more where torch's bytecode is not cached). Without torch the binder takes
    the same path it takes on a machine without torch."""
    if needs_torch(kernel):
        if "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]  # kept out for an earlier kernel; this one needs it
    elif "torch" not in sys.modules:
        sys.modules["torch"] = None  # `import torch` raises ImportError from here on


def needs_torch(kernel):
    """Whether a captured kernel's values come from torch: a torch module or object it names,
    or a pickled value that refers to torch (a ``torch.dtype``). The kernels' own modules do
    not count: a kernel of ``kerntune.torch`` is not run in its module."""
    for function in kernel["functions"]:
        for value in function["scope"].values():
            named = value.get("module") or (value.get("import") or [""])[0]
            if named.split(".")[0] == "torch":
                return True
            if "pickle" in value and b"torch" in base64.b64decode(value["pickle"]):
                return True
    return False


def name_versions(message, options, arch):
    """A ptxas failure with ACF files in ``ptx_options``, with the versions named: the ACF's
    (unreadable: CompileIQ's files are encrypted) and ptxas's. An ACF is tied to one ptxas."""
    files = re.findall(r"-?-apply-controls=(\S+)", str(options.get("ptx_options") or ""))
    if not files or "ptxas" not in message.lower():
        return message
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(arch)
    acfs = ", ".join(f"ACF {f} (its version cannot be read)" for f in files)
    return f"{message} ({acfs}; ptxas {ptxas.version} at {ptxas.path})"


class Loaded:
    """The kernel of one setup file, ready to compile configurations of: rebuilt from its
    source, with Triton's binder and stand-ins for the call's arguments."""

    def __init__(self, path):
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend
        from triton.runtime.jit import create_function_from_signature

        from kerntune._kernel_source import rebuild

        with open(path) as f:
            setup = json.load(f)
        without_torch(setup["kernel"])
        self.path, self.arch, self.args = path, setup["arch"], setup["args"]
        self.shared_limit = setup.get("shared_limit")
        self.target = GPUTarget("cuda", self.arch, 32)
        compile_only_driver(self.target)
        refuse_large_shared_memory(self.shared_limit or None)
        self.kernel = rebuild(setup["kernel"])
        self.backend = make_backend(self.target)
        self.binder = create_function_from_signature(self.kernel.signature, self.kernel.params, self.backend)
        self.stand_ins = {a["name"]: stand_in(a) for a in self.args}
        self.described = {a["name"]: a for a in self.args}
        self.arg_names = [p.name for p in self.kernel.params]


def warm_up(arch):
    """Compiles a small GEMM for ``arch`` into a throw-away cache: a worker's first compile
    also starts Triton's compiler (its backend, LLVM, ptxas), which took 1.3 s of a 1.5 s
    first compile against 0.25 s for the next on this project's CPU machine. A worker
    started ahead of its first request (``kerntune._crew.prestart``) has that done by then.
    Nothing of it is kept, and a warm-up that fails changes nothing."""
    import tempfile

    import triton
    import triton.language as tl
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def product(a, b, c, BLOCK: tl.constexpr):
        rows = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
        tl.store(c + rows, tl.dot(tl.load(a + rows), tl.load(b + rows)).to(tl.float16))

    target = GPUTarget("cuda", arch, 32)
    try:
        with tempfile.TemporaryDirectory() as cache, knobs.cache.scope():
            knobs.cache.dir = cache
            compile_only_driver(target)
            with contextlib.redirect_stdout(sys.stderr):
                triton.compile(ASTSource(product, {"a": "*fp16", "b": "*fp16", "c": "*fp16"}, {"BLOCK": 64}),
                               target=target, options={"num_warps": 4, "num_stages": 2})
    except Exception as error:  # the first request pays, as without a warm-up
        print(f"kerntune: the compile worker's warm-up failed: {error}", file=sys.stderr)


def main(arch=None):
    # Triton first, whatever the kernel: a worker started ahead of its first request has it
    # imported by then. Importing it does not import torch (``without_torch``).
    import triton  # noqa: F401
    from triton import knobs
    from triton.compiler import ASTSource

    if arch is not None:
        warm_up(arch)

    # KERNTUNE_SHARE_FRONT_END=0 compiles every configuration from the source, whatever
    # earlier runs kept: an escape hatch should a Triton mishandle its own TTIR, and the arm
    # bench/triton_matmul.py's `share` stage compares against.
    front_ends = None
    if os.environ.get("KERNTUNE_SHARE_FRONT_END", "1") != "0":
        front_ends = FrontEnds(os.path.join(knobs.cache.dir, "kerntune-front-ends"))
        keep_front_ends(front_ends)
    loaded = None
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        start = time.perf_counter()
        try:
            wanted = request.get("setup")
            if wanted and (loaded is None or loaded.path != wanted):
                loaded = None  # a setup that fails to load fails this request, and leaves none
                loaded = Loaded(wanted)
            if loaded is None:
                raise RuntimeError("the request names no kernel setup, and the worker holds none")
            kernel, arg_names = loaded.kernel, loaded.arg_names
            kwargs = dict(request["constexprs"])
            kwargs.update(request["options"])
            call = dict(loaded.stand_ins)
            call.update({k: v for k, v in kwargs.items() if k in arg_names})
            descriptors = request.get("descriptors") or {}
            for name, block_shape in descriptors.items():
                call[name] = descriptor(loaded.described[name], block_shape)
            options = {k: v for k, v in kwargs.items() if k not in arg_names}
            bound, specialization, opts = loaded.binder(**call, **options)
            parsed, signature, constexprs, attrs = kernel._pack_args(loaded.backend, options, bound, specialization,
                                                                     opts)
            # Triton prints the whole PTX when ptxas fails: to standard error, not into the replies.
            with contextlib.redirect_stdout(sys.stderr):
                compiled, reused = compile_sharing_front_ends(ASTSource(kernel, signature, constexprs, attrs),
                                                              loaded.target, parsed.__dict__, front_ends)
            metadata = compiled.metadata
            # A compile Triton answers from its cache skips the stages, and the check in them.
            if loaded.shared_limit:
                refuse_shared(metadata.shared or 0, loaded.shared_limit, reused)
            params = launch_params(arg_names, signature, loaded.args, descriptors,
                                   getattr(metadata, "tensordesc_meta", None))
            extra = ptx_param_count(compiled.asm["ptx"], metadata.name) - len(params)
            scratch_sizes = [metadata.global_scratch_size, metadata.profile_scratch_size]
            if extra < 0 or extra > len(scratch_sizes):
                raise RuntimeError(f"the kernel has {extra} parameters beyond its arguments; this Triton's launch ABI is not known")
            params += [{"kind": "scratch", "bytes_per_program": scratch_sizes[k] or 0} for k in range(extra)]
            reply = {
                "type": "compiled",
                "id": request["id"],
                "cubin": base64.b64encode(compiled.asm["cubin"]).decode(),
                "seconds": time.perf_counter() - start,
                "front_end_reused": reused,
                "launch": {
                    "name": metadata.name,
                    "shared_bytes": metadata.shared,
                    "num_warps": metadata.num_warps,
                    "num_ctas": metadata.num_ctas,
                    "params": params,
                },
            }
        except OverDeviceLimit as error:
            reply = {"type": "failed", "id": request["id"], "kind": "invalid_config", "message": str(error),
                     "seconds": time.perf_counter() - start, "front_end_reused": error.front_end_reused}
        except Exception as error:  # any compiler error fails this configuration only
            arch = loaded.arch if loaded is not None else 90
            message = name_versions(f"{type(error).__name__}: {error}".strip(), request["options"], arch)
            reply = {"type": "failed", "id": request["id"], "kind": "compile_failed", "message": message[-4000:], "seconds": time.perf_counter() - start}
        out.write(json.dumps(reply) + "\n")
        out.flush()
