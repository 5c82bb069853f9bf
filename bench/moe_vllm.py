"""vLLM's fused-MoE Triton kernel and its tuning script, imported from vLLM's own files
without vLLM installed: the part of bench/moe_real.py that knows vLLM's layout.

vLLM's files (Apache-2.0, vLLM's code, never committed here; `.device/vllm/src` holds them,
see `.device/vllm/NOTES.md`) are checked against the sha256 they had at vLLM's commit
`VLLM_COMMIT`, then copied unchanged into a scratch folder laid out as vLLM's package:
`fused_moe.py` (the kernel, `fused_experts` and the tables' loader), `activation.py`,
`moe_align_block_size.py` and `benchmarks/kernels/benchmark_moe.py` (the script). Beside
them, a shim `vllm` package written here holds only the names those four files import:
pure-torch replacements of vLLM's CUDA ops (`moe_align_block_size`, `topk_softmax` as
`fused_topk`, `silu_and_mul`, `moe_sum`, static and dynamic per-tensor fp8 quantization),
the environment, the platform, the logger, a `ray` whose `remote` leaves a class as it is
(one process per GPU runs the script's worker directly), and stubs that fail when called
for what only other paths (deep-gemm, int4, model configs) reach. One rule is taken from
vLLM's own `config.py` by name (`_get_config_dtype_str`, which names the tables' files).

Every import of the four files is checked against what the shim provides before anything
is imported, so a changed vLLM fails in one line naming the import (`VllmFilesError`).
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import importlib
import os
import shutil
import sys
import tempfile

VLLM_COMMIT = "9aaf83ef502fc37bc647f6e474314d48ba36cd1c"
PACKAGE = "vllm/model_executor/layers/fused_moe"
FUSED_MOE = PACKAGE.replace("/", ".") + ".fused_moe"

# vLLM's files used unchanged: where each goes in the scratch folder, and its sha256 at VLLM_COMMIT.
PLACED = {
    "fused_moe.py": (f"{PACKAGE}/fused_moe.py", "b89928a20f9069396f0490232cb984ae7e46e4bf79319063ae901d7c8a5e35f6"),
    "activation.py": (f"{PACKAGE}/activation.py", "565f1c795b87ef4e05c6e3a483c5435ec9845418d5defb6ae4c6c1b721f8ceb2"),
    "moe_align_block_size.py": (f"{PACKAGE}/moe_align_block_size.py",
                                "c3f7fc2087836f0160a32ab99ceb1d8f6e87c793679da34dd672e225cb7fa31b"),
    "benchmark_moe.py": ("benchmark_moe.py", "2ba67c91cd1174f108c07d77767e8332b5c632d1a8b99fe7f161dc63d7cd420c"),
}
# Functions taken by name from vLLM's files into the shim's modules: (file, sha256, names, shim module).
EXTRACTED = [("config.py", "85ac46ab8a83a30a892cef74fc5a883803c644801c3f82a7e16dfb9deb8760c4",
              ["_get_config_dtype_str"], f"{PACKAGE}/config.py")]


class VllmFilesError(Exception):
    """vLLM's files are missing, not the expected ones, or import what the shim lacks."""


# ---------------------------------------------------------------------------------------
# Pure-torch replacements of vLLM's CUDA ops: same contracts, capturable in a CUDA graph
# (no host synchronization).

def moe_align_block_size(topk_ids, num_experts, block_size, sorted_token_ids, experts_ids, num_tokens_post_pad,
                         expert_map=None):
    """`torch.ops._moe_C.moe_align_block_size`, in place: the slots of `topk_ids` (flattened)
    grouped by expert, each expert's group padded to a multiple of `block_size` with the
    sentinel `topk_ids.numel()`; one expert id per block, -1 for blocks past the last; the
    padded total in `num_tokens_post_pad`. Inside a group the slots are in ascending order
    (the CUDA op's order there comes from atomics and is not defined)."""
    import torch

    if expert_map is not None:
        raise NotImplementedError("the shim's moe_align_block_size takes no expert_map (no expert parallelism)")
    flat = topk_ids.reshape(-1).long()
    numel = flat.numel()
    counts = torch.zeros(num_experts, dtype=torch.long, device=flat.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_size - 1) // block_size * block_size
    ends = padded.cumsum(0)
    order = torch.argsort(flat, stable=True)
    expert = flat[order]
    rank = torch.arange(numel, device=flat.device) - (counts.cumsum(0) - counts)[expert]
    sorted_token_ids.fill_(numel)
    sorted_token_ids.scatter_(0, (ends - padded)[expert] + rank, order.to(sorted_token_ids.dtype))
    block_start = torch.arange(experts_ids.numel(), device=flat.device) * block_size
    owner = torch.searchsorted(ends, block_start, right=True)
    experts_ids.copy_(torch.where(block_start < ends[-1], owner, torch.full_like(owner, -1)))
    num_tokens_post_pad.copy_(ends[-1:])


def fused_topk(hidden_states, gating_output, topk, renormalize, indices_type=None, scoring_func="softmax"):
    """vLLM's `fused_topk` (its CUDA `topk_softmax`): softmax in fp32, the top `topk`
    experts' weights (renormalized to sum 1 when asked) and ids (int32)."""
    import torch

    if scoring_func != "softmax":
        raise NotImplementedError(f"the shim's fused_topk scores by softmax only, not {scoring_func}")
    weights, ids = torch.topk(torch.softmax(gating_output.float(), dim=-1), topk, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    ids = ids.to(indices_type or torch.int32)
    return weights, ids, ids


def silu_and_mul(out, x):
    """`torch.ops._C.silu_and_mul`: `out = silu(x[:, :d]) * x[:, d:]`, d = half of x's columns."""
    import torch
    import torch.nn.functional as F

    d = x.shape[-1] // 2
    torch.mul(F.silu(x[..., :d]), x[..., d:], out=out)


def moe_sum(input, output):
    """`torch.ops._moe_C.moe_sum`: the sum over the top-k axis of `input` (M, topk, K)."""
    import torch

    torch.sum(input, dim=1, out=output)


FP8_MAX = 448.0


def scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None, use_per_token_if_dynamic=False,
                     output=None, group_shape=None):
    """vLLM's `ops.scaled_fp8_quant`, per tensor: with `scale`, static (`input / scale`
    clamped to e4m3's range); without, the scale is the tensor's absolute maximum over 448."""
    import torch

    if use_per_token_if_dynamic or num_token_padding or group_shape is not None:
        raise NotImplementedError("the shim's scaled_fp8_quant is per tensor only")
    if scale is None:
        scale = (input.abs().amax().float() / FP8_MAX).clamp(min=1e-12).reshape(1)
    quantized = (input.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    if output is not None:
        output.copy_(quantized)
        quantized = output
    return quantized, scale


# ---------------------------------------------------------------------------------------
# The shim package: module path in the scratch folder -> its source.

def _stubs(*names: str) -> str:
    """Module source defining each name as a function that says it is not in the shim."""
    return "".join(f"def {name}(*args, **kwargs):\n    raise NotImplementedError('{name} is not part of "
                   f"bench/moe_vllm.py\\'s shim: only the bf16/fp16 and fp8 per-tensor Triton path is')\n\n\n"
                   for name in names)


SHIM = {
    "vllm/envs.py": '''import os


def __getattr__(name):
    if name == "VLLM_BATCH_INVARIANT":
        return os.environ.get(name, "0") not in ("", "0")
    if name == "VLLM_TUNED_CONFIG_FOLDER":
        return os.environ.get(name)
    raise AttributeError(f"vllm.envs.{name} is not part of bench/moe_vllm.py's shim")
''',
    "vllm/_custom_ops.py": "from moe_vllm import moe_align_block_size, moe_sum, scaled_fp8_quant\n",
    "vllm/logger.py": '''import logging


class _Logger(logging.LoggerAdapter):
    def __init__(self, name):
        super().__init__(logging.getLogger(name), {})
        self._said = set()

    def _once(self, level, msg, *args, scope=None):
        if (level, msg, args) not in self._said:
            self._said.add((level, msg, args))
            self.log(level, msg, *args)

    def info_once(self, msg, *args, scope=None):
        self._once(logging.INFO, msg, *args)

    def warning_once(self, msg, *args, scope=None):
        self._once(logging.WARNING, msg, *args)


def init_logger(name):
    return _Logger(name)
''',
    "vllm/platforms/__init__.py": '''import random

import torch


class _Cuda:
    device_type = "cuda"
    dispatch_key = "CUDA"

    def get_device_name(self, device_id=0):
        return torch.cuda.get_device_name(device_id)

    def fp8_dtype(self):
        return torch.float8_e4m3fn

    def is_rocm(self):
        return False

    def is_cuda(self):
        return True

    def seed_everything(self, seed):
        random.seed(seed)
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)


current_platform = _Cuda()
''',
    "vllm/triton_utils/__init__.py": "import triton\nimport triton.language as tl\n\nHAS_TRITON = True\n",
    "vllm/utils/math_utils.py": '''def cdiv(a, b):
    return -(a // -b)


def round_up(x, y):
    return cdiv(x, y) * y
''',
    "vllm/utils/torch_utils.py": '''import re

import torch

from vllm.platforms import current_platform

# Registrations last as long as their library object.
_LIBRARY = torch.library.Library("vllm", "FRAGMENT")
_C_LIBRARY = torch.library.Library("_C", "FRAGMENT")


def is_torch_equal_or_newer(target):
    def numbers(version):
        return tuple(int(n) for n in re.findall(r"\\d+", version.split("+")[0])[:3])

    return numbers(torch.__version__) >= numbers(target)


def set_random_seed(seed):
    current_platform.seed_everything(seed)


def direct_register_custom_op(op_name, op_func, mutates_args=None, fake_impl=None, target_lib=None,
                              dispatch_key=None, tags=()):
    library = target_lib or _LIBRARY
    schema = torch.library.infer_schema(op_func, mutates_args=mutates_args or [])
    library.define(op_name + schema, tags=tags)
    library.impl(op_name, op_func, dispatch_key=dispatch_key or current_platform.dispatch_key)
    if fake_impl is not None:
        library._register_fake(op_name, fake_impl)


def _register_c_ops():
    from moe_vllm import silu_and_mul

    def silu_and_mul_op(out: torch.Tensor, x: torch.Tensor) -> None:
        silu_and_mul(out, x)

    direct_register_custom_op("silu_and_mul", silu_and_mul_op, mutates_args=["out"],
                              target_lib=_C_LIBRARY,
                              dispatch_key="CompositeExplicitAutograd")


_register_c_ops()
''',
    "vllm/utils/argparse_utils.py": "from argparse import ArgumentParser as FlexibleArgumentParser\n",
    "vllm/transformers_utils/config.py": _stubs("get_config"),
    "vllm/model_executor/layers/activation.py": _stubs("swiglustep_and_mul_triton"),
    f"{PACKAGE}/__init__.py": '''from contextlib import contextmanager

from moe_vllm import fused_topk

_config = None


@contextmanager
def override_config(config):
    global _config
    old = _config
    _config = config
    try:
        yield
    finally:
        _config = old


def get_config():
    return _config
''',
    f"{PACKAGE}/config.py": '''import torch


class FusedMoEQuantConfig:
    def __init__(self, quant_dtype, w1_scale, w2_scale, a1_scale, a2_scale):
        fp8 = quant_dtype == torch.float8_e4m3fn
        if quant_dtype is not None and not fp8:
            raise NotImplementedError(f"bench/moe_vllm.py's shim quantizes to fp8 only, not {quant_dtype}")
        self.use_fp8_w8a8, self.use_int8_w8a8, self.use_int8_w8a16, self.use_int4_w4a16 = fp8, False, False, False
        self.ocp_mx_scheme, self.per_act_token_quant, self.block_shape = None, False, None
        self.w1_scale, self.w2_scale, self.a1_scale, self.a2_scale = w1_scale, w2_scale, a1_scale, a2_scale
        self.w1_zp = self.w2_zp = self.w1_bias = self.w2_bias = None

    @staticmethod
    def make(quant_dtype=None, per_act_token_quant=False, per_out_ch_quant=False, block_shape=None, w1_scale=None,
             w2_scale=None, a1_scale=None, a2_scale=None, weight_dtype=None, **unused):
        if per_act_token_quant or per_out_ch_quant or block_shape is not None or weight_dtype is not None:
            raise NotImplementedError("bench/moe_vllm.py's shim has per-tensor quantization only")
        return FusedMoEQuantConfig(quant_dtype, w1_scale, w2_scale, a1_scale, a2_scale)


FUSED_MOE_UNQUANTIZED_CONFIG = FusedMoEQuantConfig(None, None, None, None, None)
''' + _stubs("FusedMoEConfig", "FusedMoEParallelConfig", "RoutingMethodType"),
    f"{PACKAGE}/utils.py": '''import torch

from vllm import _custom_ops as ops
from vllm.utils.torch_utils import is_torch_equal_or_newer


def disable_inplace():
    return is_torch_equal_or_newer("2.9")


def moe_kernel_quantize_input(A, A_scale, quant_dtype, per_act_token_quant, block_shape=None, **unused):
    if quant_dtype is None:
        return A, A_scale
    if quant_dtype != torch.float8_e4m3fn or per_act_token_quant or block_shape is not None:
        raise NotImplementedError("bench/moe_vllm.py's shim quantizes to fp8 per tensor only")
    return ops.scaled_fp8_quant(A, A_scale)
''',
    f"{PACKAGE}/modular_kernel.py": '''class FusedMoEExpertsModular:
    @staticmethod
    def adjust_N_for_activation(N, activation):
        return N // 2 if activation.is_gated else N


''' + _stubs("FusedMoEKernel"),
    f"{PACKAGE}/all2all_utils.py": _stubs("maybe_make_prepare_finalize"),
    f"{PACKAGE}/experts/triton_deep_gemm_moe.py": _stubs("TritonOrDeepGemmExperts"),
    "ray/__init__.py": '''def remote(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda cls: cls


def get_gpu_ids():
    return [0]
''',
    "ray/experimental/tqdm_ray.py": "def tqdm(iterable, **kwargs):\n    return iterable\n",
}


# ---------------------------------------------------------------------------------------
# Checking vLLM's files, and the scratch package.

def read_sources(folder: str, any_version: bool = False) -> dict:
    """vLLM's files this needs, by name: their text, each checked against its sha256 at
    VLLM_COMMIT unless `any_version`."""
    if not os.path.isdir(folder):
        raise VllmFilesError(f"{folder} is not a folder: give the folder of vLLM's files (.device/vllm/src, "
                             f"see .device/vllm/NOTES.md)")
    expected = {name: digest for name, (_, digest) in PLACED.items()}
    expected.update({name: digest for name, digest, _, _ in EXTRACTED})
    missing = [name for name in expected if not os.path.isfile(os.path.join(folder, name))]
    if missing:
        raise VllmFilesError(f"{os.path.join(folder, missing[0])} is missing: {folder} must hold vLLM's "
                             f"{', '.join(expected)} (see .device/vllm/NOTES.md)")
    sources = {}
    for name, digest in expected.items():
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            data = f.read()
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest and not any_version:
            raise VllmFilesError(f"{path} has sha256 {actual[:12]}..., not {digest[:12]}... (vLLM {VLLM_COMMIT[:8]}): "
                                 f"fetch that commit's file, or pass --any-vllm to try this one")
        sources[name] = data.decode()
    return sources


def extract(source: str, names, label: str) -> str:
    """The top-level functions `names` of `source`, their decorators included, as text."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    parts = []
    for name in names:
        node = found.get(name)
        if node is None:
            raise VllmFilesError(f"vLLM's {label} has no top-level {name}, which bench/moe_vllm.py takes from it")
        start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        parts.append("".join(lines[start:node.end_lineno]) + "\n\n")
    return "".join(parts)


def scratch_modules(sources: dict) -> dict:
    """Every module of the scratch folder, path -> source: vLLM's files, the shim, what is
    extracted, and an empty `__init__.py` for each package that lacks one."""
    modules = {path: sources[name] for name, (path, _) in PLACED.items()}
    modules.update(SHIM)
    for name, _, names, target in EXTRACTED:
        modules[target] += "\n\n" + extract(sources[name], names, name)
    for path in list(modules):
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            modules.setdefault("/".join(parts[:depth]) + "/__init__.py", "")
    return modules


def _dotted(path: str) -> str:
    return path[:-len(".py")].replace("/", ".").removesuffix(".__init__")


def _top_level_names(source: str) -> set:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def check_imports(modules: dict, checked=tuple(PLACED)) -> None:
    """Every `vllm` and `ray` import in vLLM's files (function-level ones included) names a
    module of the scratch folder and a name it defines; else one line naming the import."""
    provided = {_dotted(path): _top_level_names(text) for path, text in modules.items()}
    for path in list(provided):
        parent, _, child = path.rpartition(".")
        if parent in provided:
            provided[parent].add(child)
    by_name = {name: path for name, (path, _) in PLACED.items()}
    for name in checked:
        for node in ast.walk(ast.parse(modules[by_name[name]])):
            if isinstance(node, ast.Import):
                wanted = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                wanted = [(node.module, alias.name) for alias in node.names]
            else:
                continue
            for module, attribute in wanted:
                if module.split(".")[0] not in ("vllm", "ray"):
                    continue
                if module not in provided:
                    raise VllmFilesError(f"vLLM's {name}, line {node.lineno}, imports {module}, a module bench/moe_vllm.py's "
                                         f"shim does not provide: vLLM changed; add it to SHIM there")
                if attribute not in (None, "*") and attribute not in provided[module]:
                    raise VllmFilesError(f"vLLM's {name}, line {node.lineno}, imports {attribute} from {module}, which "
                                         f"bench/moe_vllm.py's shim does not provide: vLLM changed; add it to SHIM there")


def load(folder: str, any_version: bool = False):
    """vLLM's `fused_moe` module and `benchmark_moe` script, imported from a scratch folder
    (checked first: `VllmFilesError`). Once per process: vLLM registers its custom ops."""
    modules = scratch_modules(read_sources(folder, any_version))
    check_imports(modules)
    scratch = tempfile.mkdtemp(prefix="moe-vllm-")
    atexit.register(shutil.rmtree, scratch, True)
    for path, text in modules.items():
        os.makedirs(os.path.dirname(os.path.join(scratch, path)), exist_ok=True)
        with open(os.path.join(scratch, path), "w") as f:
            f.write(text)
    sys.path.insert(0, scratch)
    benchmark = importlib.import_module("benchmark_moe")
    return sys.modules[FUSED_MOE], benchmark
