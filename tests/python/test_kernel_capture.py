"""What a kernel takes from its scope follows Python's rules (issue 34): a name the kernel
assigns is its own, whatever the module holds under that name, so a script that keeps its
data in globals named like the kernel's locals (Triton's matmul tutorial keeps `a` and `b`)
compiles, run as a file, from standard input and with ``-c``; closure cells, helpers and
``tl.constexpr`` globals still travel; and a kernel that really reads an array from its
module is refused in one line that names it, before any worker starts."""

import json
import subprocess
import sys
import textwrap

import pytest
import triton
import triton.language as tl

import kerntune
from kerntune import Tensor
from kerntune._kernel_source import CaptureError, _decode, _free_names, capture

np = pytest.importorskip("numpy")

# Shaped like Triton's matmul tutorial: the data lives in module globals whose names the
# kernel reuses for its own locals, one of them a value that pickle refuses. Helpers come
# after the kernel, a default and the grouping are module-level constexprs.
MATMUL_MODULE = textwrap.dedent('''
    import threading

    import numpy as np
    import triton
    import triton.language as tl

    GROUP_M = tl.constexpr(4)
    DEFAULT_BLOCK_K = 32


    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr = DEFAULT_BLOCK_K):
        pid = tl.program_id(axis=0)
        blocks_n = tl.cdiv(N, BLOCK_N)
        in_group = GROUP_M * blocks_n
        first_m = (pid // in_group) * GROUP_M
        rows = min(tl.cdiv(M, BLOCK_M) - first_m, GROUP_M)
        pid_m, pid_n = first_m + (pid % in_group) % rows, (pid % in_group) // rows
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in tl.range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c = leaky_relu(acc).to(tl.float16)
        tl.store(c_ptr + stride_cm * offs_m[:, None] + stride_cn * offs_n[None, :], c)


    @triton.jit
    def leaky_relu(x):
        return tl.where(x >= 0, x, slope(0.01) * x)


    @triton.constexpr_function
    def slope(value):
        return value


    size = 256
    a = np.ones((size, size), dtype=np.float16)
    b = np.ones((size, size), dtype=np.float16)
    c = np.zeros((size, size), dtype=np.float16)
    acc = threading.Lock()
''')

SCRIPT_TAIL = textwrap.dedent('''
    import json

    args = dict(a_ptr=kerntune.Tensor("float16", a.shape), b_ptr=kerntune.Tensor("float16", b.shape),
                c_ptr=kerntune.Tensor("float16", c.shape), M=size, N=size, K=size,
                stride_am=size, stride_ak=1, stride_bk=size, stride_bn=1, stride_cm=size, stride_cn=1)
    outcomes = kerntune.compile(matmul_kernel, args, {"BLOCK_M": [32, 64], "BLOCK_N": [32]}, compile_workers=2)
    print(json.dumps([[o["status"], o.get("reason")] for o in outcomes]))
''')


def matmul_args(size=256):
    return dict(a_ptr=Tensor("float16", (size, size)), b_ptr=Tensor("float16", (size, size)),
                c_ptr=Tensor("float16", (size, size)), M=size, N=size, K=size,
                stride_am=size, stride_ak=1, stride_bk=size, stride_bn=1, stride_cm=size, stride_cn=1)


def import_module(tmp_path, monkeypatch, name, source):
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return __import__(name)


@pytest.mark.parametrize("how", ["file", "stdin", "-c"])
def test_globals_named_like_the_kernels_locals_stay_home_in_a_script(tmp_path, how):
    source = "import kerntune  # first, as for any kernel given with -c or on standard input\n" + MATMUL_MODULE + SCRIPT_TAIL
    path = tmp_path / "tutorial_matmul.py"
    path.write_text(source)
    command = {"file": [sys.executable, str(path)], "stdin": [sys.executable, "-"], "-c": [sys.executable, "-c", source]}[how]
    with open(path) as stdin:
        out = subprocess.run(command, stdin=stdin if how == "stdin" else subprocess.DEVNULL, capture_output=True,
                             text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [["compiled", None]] * 2, out.stdout


def test_the_capture_holds_what_the_kernel_reads_and_none_of_the_data(tmp_path, monkeypatch):
    module = import_module(tmp_path, monkeypatch, "kerntune_test_tutorial", MATMUL_MODULE)
    captured = capture(module.matmul_kernel)
    names = {entry["name"]: set(entry["scope"]) for entry in captured["functions"]}
    assert names == {"matmul_kernel": {"tl", "GROUP_M", "DEFAULT_BLOCK_K", "leaky_relu"},
                     "leaky_relu": {"tl", "slope"}, "slope": set()}
    outcomes = kerntune.compile(module.matmul_kernel, matmul_args(), {"BLOCK_M": [32], "BLOCK_N": [32, 64]},
                                compile_workers=2)
    assert [o["status"] for o in outcomes] == ["compiled", "compiled"], outcomes


READS_AN_ARRAY = textwrap.dedent('''
    import numpy as np
    import triton
    import triton.language as tl

    table = np.arange(64, dtype=np.float32)
    wrapped = tl.constexpr(np.arange(4))


    @triton.jit
    def reads_table(x_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, tl.load(table + offsets))


    @triton.jit
    def helper(x):
        return x * wrapped


    @triton.jit
    def calls_a_helper_that_reads_one(x_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, helper(tl.load(x_ptr + offsets)))
''')


def test_a_kernel_that_reads_an_array_global_is_refused_in_one_line_naming_it(tmp_path, monkeypatch):
    module = import_module(tmp_path, monkeypatch, "kerntune_test_reads_array", READS_AN_ARRAY)
    with pytest.raises(CaptureError) as refused:
        kerntune.compile(module.reads_table, {"x_ptr": Tensor("float32", (64,))}, {"BLOCK": [64]}, compile_workers=1)
    message = str(refused.value)
    assert "\n" not in message
    assert "reads_table reads 'table' (ndarray)" in message and "as an argument" in message, message
    # A helper's array is its own, and wrapping it in tl.constexpr does not make it travel.
    with pytest.raises(CaptureError, match=r"helper reads 'wrapped' \(constexpr\).*as an argument"):
        capture(module.calls_a_helper_that_reads_one)


def test_a_closure_cell_is_captured_over_a_module_global_of_the_same_name():
    def make(scale):
        GROUP_M = tl.constexpr(scale)

        @triton.jit
        def scaled(x_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            a = tl.load(x_ptr + offsets, mask=offsets < n)
            tl.store(x_ptr + offsets, a * GROUP_M, mask=offsets < n)

        return scaled

    kernel = make(3)
    captured = capture(kernel)
    scope = captured["functions"][0]["scope"]
    assert set(scope) == {"tl", "GROUP_M"}
    assert _decode(scope["GROUP_M"], []).value == 3
    outcomes = kerntune.compile(kernel, {"x_ptr": Tensor("float32", (1000,)), "n": 1000}, {"BLOCK": [64]},
                                compile_workers=1)
    assert [o["status"] for o in outcomes] == ["compiled"], outcomes


GROUP_M = tl.constexpr(99)  # the module's, which the closure in the test above shadows


def test_free_names_follow_pythons_scoping():
    source = textwrap.dedent('''
        def kernel(x_ptr, n, BLOCK: tl.constexpr = DEFAULT, *rest, FLAG: flags.Kind = FLAG_DEFAULT, **more):
            pid = tl.program_id(0)
            early = late + 1
            late = 2
            total = 0
            total += STEP
            annotated: tl.tensor = 0
            (first, (second, third)) = 1, (2, 3)
            if (walrus := pid) > LIMIT:
                pass
            for i in tl.static_range(UNROLL):
                pass
            for j in range(n):
                pass
            with guard() as held:
                pass
            squares = [item * item for item in ITEMS if item != pid]
            global COUNTER
            COUNTER = 1

            def nested(value):
                nonlocal total
                total = value + pid + OUTER
                return value

            return kernel(held, nested, math.pi)
    ''')
    assert _free_names("kernel", source) == {
        "tl", "DEFAULT", "flags", "FLAG_DEFAULT", "STEP", "LIMIT", "UNROLL", "range", "guard", "ITEMS", "OUTER",
        "kernel", "math",
    }


def test_a_kernel_source_python_cannot_analyse_is_one_line_naming_it():
    with pytest.raises(CaptureError, match=r"^broken cannot be read on its own: no binding for nonlocal 'x' found"):
        _free_names("broken", "def broken():\n    nonlocal x\n")


# The tutorial's own shape on a GPU: its inputs are CUDA tensors in module globals `a` and
# `b`, the kernel's locals reuse the names, and the decorator is kerntune's.
GPU_SCRIPT_TAIL = textwrap.dedent('''
    import torch
    import kerntune

    size = 512
    torch.manual_seed(0)
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    tuned = kerntune.autotune(configs=[triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=4)
                                       for m, n in ((32, 32), (64, 32), (64, 64))], key=["M", "N", "K"])(matmul_kernel)
    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)
    tuned[grid](a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.testing.assert_close(c, torch.nn.functional.leaky_relu(a.float() @ b.float(), 0.01).half(), atol=1e-2, rtol=1e-2)
    print("matches torch", tuned.best_config)
''')


@pytest.mark.gpu
def test_the_tutorials_cuda_tensors_in_globals_named_like_the_kernels_locals_stay_home(tmp_path):
    import os

    path = tmp_path / "tutorial_shape.py"
    path.write_text("import kerntune\n" + MATMUL_MODULE + GPU_SCRIPT_TAIL)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env=dict(os.environ, KERNTUNE_DB=str(tmp_path / "results.db")))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "matches torch" in out.stdout, out.stdout


@pytest.mark.gpu
def test_a_kernel_that_reads_a_cuda_tensor_global_is_refused_naming_it(tmp_path, monkeypatch):
    module = import_module(tmp_path, monkeypatch, "kerntune_test_reads_tensor", READS_AN_ARRAY.replace(
        "table = np.arange(64, dtype=np.float32)", "import torch\ntable = torch.arange(64, device='cuda', dtype=torch.float32)"))
    with pytest.raises(CaptureError, match=r"^reads_table reads 'table' \(Tensor\).*pass 'table' to reads_table as an argument$"):
        capture(module.reads_table)


def test_compile_workers_keep_torch_out_unless_the_kernel_reads_something_of_torch():
    """A worker that imports torch pays seconds for nothing: only a kernel that reads a
    torch module or value needs it, wherever its file lives (the GPU machine's Python is
    under /opt/torch/) and whatever its module is called (kerntune.torch's GEMMs)."""
    from kerntune._triton_worker import needs_torch

    def kernel_with(scope, module="kerntune.torch._gemm", file="/opt/torch/site-packages/kerntune/torch/_gemm.py"):
        return {"root": 0, "functions": [{"module": module, "file": file, "scope": scope}]}

    assert not needs_torch(kernel_with({"tl": {"module": "triton.language"}}))
    assert needs_torch(kernel_with({"torch": {"module": "torch"}}))
    assert needs_torch(kernel_with({"f": {"import": ["torch.nn.functional", "relu"]}}))
    pickled = pytest.importorskip("torch").float16
    import base64
    import pickle

    value = {"pickle": base64.b64encode(pickle.dumps(pickled)).decode()}
    assert needs_torch(kernel_with({"DTYPE": value}))
    assert not needs_torch(kernel_with({"SIZE": {"pickle": base64.b64encode(pickle.dumps(128)).decode()}}))
