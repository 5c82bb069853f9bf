"""Compiling Triton kernels on the CPU through kerntune's compile workers: every produced
cubin is checked against the cubin itself (cuobjdump, from Triton's wheel) for its kernel
name and parameter count, and its shared memory against what the configuration needs."""

import base64
import json
import math
import os
import re
import subprocess

import pytest

triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
from kerntune import Tensor  # noqa: E402

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def cubin_facts(cubin: bytes, tmp_path) -> tuple[list[str], int]:
    """Global function symbols and the kernel's parameter count, read off the ELF."""
    path = tmp_path / "kernel.cubin"
    path.write_bytes(cubin)
    dump = subprocess.run([CUOBJDUMP, "--dump-elf", str(path)], check=True, capture_output=True, text=True).stdout
    functions = re.findall(r"^\s*0x[0-9a-f]+\s+0\s+0x[0-9a-f]+\s+0x12\s+\S+\s+\S+\s+(\S+)\s*$", dump, re.M)
    params = dump.count("EIATTR_KPARAM_INFO")
    return functions, params


def check_compiled(outcomes, kernel_name, argument_count, tmp_path):
    compiled = [o for o in outcomes if o["status"] == "compiled"]
    assert compiled, outcomes[:3]
    for outcome in compiled:
        launch = outcome["launch"]
        assert launch["name"] == kernel_name
        functions, params = cubin_facts(base64.b64decode(outcome["cubin"]), tmp_path)
        assert functions == [kernel_name], functions
        # The launch passes exactly the parameters the cubin declares: the arguments Triton
        # kept, then its scratch pointers.
        assert params == len(launch["params"]), (params, launch["params"])
        kept = [p["index"] for p in launch["params"] if p["kind"] == "arg"]
        assert kept == sorted(kept) and len(kept) <= argument_count
    return compiled


def matmul_args(size=1024):
    return dict(
        a_ptr=Tensor("float16", (size, size)), b_ptr=Tensor("float16", (size, size)), c_ptr=Tensor("float16", (size, size)),
        M=size, N=size, K=size, stride_am=size, stride_ak=1, stride_bk=size, stride_bn=1, stride_cm=size, stride_cn=1,
    )


class CompileWorker:
    """One Triton compile worker for ``kernel`` called with ``args``, started as kerntune's
    compile pool starts it, with a Triton cache of its own (so every stage runs), and
    driven one request at a time: its replies carry what the pool's outcomes leave out."""

    def __init__(self, directory, kernel, args, params, cache=None):
        from kerntune._space import space_of
        from kerntune._arguments import _bind, jit_function, kernel_defaults
        from kerntune._job import _job

        directory.mkdir()
        fn = jit_function(kernel)
        params, listed = space_of(params, None, kernel_defaults(fn))
        job, _, _ = _job(fn, _bind(fn, args, params), params, listed, [], 90, 232448, str(directory))
        self.setup = job["compile_setup"]
        env = {**os.environ, **job["worker_env"], "TRITON_CACHE_DIR": str(cache or directory / "triton-cache")}
        self.stderr = open(directory / "stderr.txt", "w")
        self.process = subprocess.Popen([*job["compile_worker"], "__worker", "compile"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        self.requests = 0

    def compile(self, config, setup=None):
        """Compiles ``config`` of this worker's kernel, or of the kernel of the ``setup``
        file another job wrote."""
        options = {name: value for name, value in config.items() if name in ("num_warps", "num_stages")}
        constexprs = {name: value for name, value in config.items() if name not in options}
        self.requests += 1
        request = {"id": self.requests, "kind": "triton", "constexprs": constexprs, "options": options,
                   "setup": setup or self.setup}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        assert reply["id"] == self.requests, reply
        return reply

    def close(self):
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0
        self.stderr.close()


def matmul_config(tiles, num_warps, num_stages):
    block_m, block_n, block_k = tiles
    return {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k, "GROUP_SIZE_M": 8,
            "num_warps": num_warps, "num_stages": num_stages}


def matmul_worker(directory, cache=None):
    import matmul

    return CompileWorker(directory, matmul.matmul_kernel, matmul_args(), matmul.PARAMS, cache)


def test_configurations_differing_only_in_warps_and_stages_share_the_front_end(tmp_path):
    """A worker compiles a configuration's siblings (same tiles, other num_warps and
    num_stages) from the TTIR it kept, and gives exactly what compiling them from the
    source in a fresh worker gives: the same cubin, byte for byte, and launch."""
    sharing = matmul_worker(tmp_path / "sharing")
    first = sharing.compile(matmul_config((64, 128, 64), 4, 3))
    sibling = sharing.compile(matmul_config((64, 128, 64), 8, 4))
    other_tiles = sharing.compile(matmul_config((64, 64, 64), 8, 4))
    sharing.close()
    fresh = matmul_worker(tmp_path / "fresh")
    alone = fresh.compile(matmul_config((64, 128, 64), 8, 4))
    fresh.close()

    assert [r["type"] for r in (first, sibling, other_tiles, alone)] == ["compiled"] * 4
    assert [r["front_end_reused"] for r in (first, sibling, other_tiles, alone)] == [False, True, False, False]
    assert sibling["cubin"] == alone["cubin"]
    assert sibling["launch"] == alone["launch"]
    assert sibling["launch"]["num_warps"] == 8 and sibling["launch"]["name"] == "matmul_kernel"
    assert sibling["cubin"] != first["cubin"]


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: triton.language.constexpr):
    at = triton.language.program_id(0) * BLOCK + triton.language.arange(0, BLOCK)
    triton.language.store(y_ptr + at, 2 * triton.language.load(x_ptr + at, mask=at < n), mask=at < n)


def test_one_worker_compiles_the_kernel_each_request_names_as_a_kept_worker_does(tmp_path):
    """A compile worker kept from one tuning to the next (kerntune._crew) gets requests that
    name another setup file: it loads that kernel, and going back gives the same cubin."""
    worker = matmul_worker(tmp_path / "matmul")
    scale = CompileWorker(tmp_path / "scale", scale_kernel, dict(x_ptr=Tensor("float32", (4096,)),
                                                                  y_ptr=Tensor("float32", (4096,)), n=4096),
                          {"BLOCK": [256, 1024]})
    scale.close()
    first = worker.compile(matmul_config((64, 64, 32), 4, 3))
    other = worker.compile({"BLOCK": 256, "num_warps": 4, "num_stages": 3}, setup=scale.setup)
    again = worker.compile(matmul_config((64, 64, 32), 4, 3))
    assert [r["type"] for r in (first, other, again)] == ["compiled"] * 3, (first, other, again)
    assert [r["launch"]["name"] for r in (first, other, again)] == ["matmul_kernel", "scale_kernel", "matmul_kernel"]
    assert again["cubin"] == first["cubin"]
    # A request that names no setup, to a worker that holds none, fails alone and says why.
    worker.setup = None
    bare = CompileWorker.__new__(CompileWorker)
    bare.process = subprocess.Popen(worker.process.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, env={**os.environ, **_worker_env()})
    bare.requests, bare.setup, bare.stderr = 0, None, open(tmp_path / "bare.txt", "w")
    refused = bare.compile(matmul_config((64, 64, 32), 4, 3))
    assert refused["type"] == "failed" and "names no kernel setup" in refused["message"], refused
    bare.close()
    worker.close()


def _worker_env():
    from kerntune._job import worker_env

    return worker_env()


def test_workers_on_one_triton_cache_share_front_ends_and_find_what_was_compiled_in_it(tmp_path):
    """The kept TTIR lives beside Triton's cache: a later worker (another of the pool, the
    finalists' after the search, a later run) compiles new siblings from it, and finds every
    configuration compiled before in Triton's cache, the siblings too."""
    cache = tmp_path / "triton-cache"
    first = matmul_worker(tmp_path / "first", cache)
    earlier = [first.compile(matmul_config((64, 128, 64), warps, stages)) for warps, stages in ((4, 3), (8, 4))]
    first.close()
    entries = lambda: {p.name for p in cache.iterdir() if p.name != "kerntune-front-ends"}  # noqa: E731
    filled = entries()
    later = matmul_worker(tmp_path / "later", cache)
    again = [later.compile(matmul_config((64, 128, 64), warps, stages)) for warps, stages in ((4, 3), (8, 4))]
    answered = entries()
    again.append(later.compile(matmul_config((64, 128, 64), 2, 5)))
    later.close()

    assert [r["front_end_reused"] for r in earlier] == [False, True]
    assert [r["front_end_reused"] for r in again] == [False, False, True]
    assert [r["cubin"] for r in again[:2]] == [r["cubin"] for r in earlier]
    assert answered == filled, "Triton's cache answered both, under the keys the first worker's compiles left"
    assert len(entries()) > len(filled), "a new configuration is compiled and cached"


def test_refused_configurations_keep_their_front_end_and_refusals_apply_to_siblings_compiled_from_it(tmp_path):
    """The 128 x 256 accumulator over 2 warps is refused at the LLVM stage, after its TTIR
    was kept: its siblings compile from that TTIR, and are refused there as they would be
    from the source, for their registers or their shared memory; one that fits compiles."""
    worker = matmul_worker(tmp_path / "worker")
    refused = worker.compile(matmul_config((128, 256, 128), 2, 3))
    too_many_registers = worker.compile(matmul_config((128, 256, 128), 2, 2))
    too_much_shared = worker.compile(matmul_config((128, 256, 128), 8, 3))
    fits = worker.compile(matmul_config((128, 256, 128), 8, 2))
    worker.close()

    assert (refused["kind"], refused["front_end_reused"]) == ("invalid_config", False), refused
    assert refused["message"].startswith("its dot accumulator alone needs 512 registers per thread with 2 warps"), refused
    assert (too_many_registers["kind"], too_many_registers["front_end_reused"]) == ("invalid_config", True), too_many_registers
    assert too_many_registers["message"] == refused["message"]
    assert (too_much_shared["kind"], too_much_shared["front_end_reused"]) == ("invalid_config", True), too_much_shared
    assert too_much_shared["message"].startswith("needs 294912 bytes of shared memory per block"), too_much_shared
    assert (fits["type"], fits["front_end_reused"]) == ("compiled", True), fits
    assert fits["launch"]["shared_bytes"] == 2 * (128 + 256) * 128 * 2


def test_a_front_end_that_reads_num_warps_is_not_shared(tmp_path):
    """``tl.extra.cuda.num_warps()`` is a constant in the TTIR: the 2-warp TTIR would give
    the 4-warp configuration a 2."""
    source = '''
import triton
import triton.language as tl

@triton.jit
def warps(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.full((BLOCK,), tl.extra.cuda.num_warps(), tl.int32))
'''
    (tmp_path / "warps_kernels.py").write_text(source)
    import importlib
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("warps_kernels")
        worker = CompileWorker(tmp_path / "worker", module.warps, {"x_ptr": Tensor("int32", (128,))},
                               {"BLOCK": [128], "num_warps": [2, 4], "num_stages": [3]})
        replies = [worker.compile({"BLOCK": 128, "num_warps": warps, "num_stages": 3}) for warps in (2, 4)]
        worker.close()
    finally:
        sys.path.remove(str(tmp_path))
    assert [(r["type"], r["front_end_reused"]) for r in replies] == [("compiled", False), ("compiled", False)], replies


def test_matmul_cubins_have_the_right_name_parameters_and_shared_memory(tmp_path):
    import matmul

    params = {"BLOCK_SIZE_M": [64, 128], "BLOCK_SIZE_N": [64, 128], "BLOCK_SIZE_K": [32, 64], "GROUP_SIZE_M": [8], "num_stages": [3], "num_warps": [4]}
    outcomes = kerntune.compile(matmul.matmul_kernel, matmul_args(), params, compile_workers=2)
    compiled = check_compiled(outcomes, "matmul_kernel", 16, tmp_path)
    assert len(compiled) == len(outcomes) == 2 * 2 * 2, [o["status"] for o in outcomes]
    for outcome in compiled:
        config, launch = outcome["config"], outcome["launch"]
        # Specialized like Triton's JIT: the unit strides are constants, not parameters.
        kept = [p["index"] for p in launch["params"] if p["kind"] == "arg"]
        assert kept == [0, 1, 2, 3, 4, 5, 6, 8, 10], kept
        tiles = (config["BLOCK_SIZE_M"] + config["BLOCK_SIZE_N"]) * config["BLOCK_SIZE_K"] * 2
        assert launch["shared_bytes"] >= (config["num_stages"] - 1) * tiles, (config, launch["shared_bytes"])
        assert launch["num_warps"] == config["num_warps"]


def test_configurations_over_the_shared_memory_limit_are_refused_before_ptxas():
    import matmul

    params = {"BLOCK_SIZE_M": [256], "BLOCK_SIZE_N": [256], "BLOCK_SIZE_K": [128, 256], "GROUP_SIZE_M": [8], "num_stages": [5], "num_warps": [8]}
    outcomes = kerntune.compile(matmul.matmul_kernel, matmul_args(), params, compile_workers=2)
    assert sorted(o["config"]["BLOCK_SIZE_K"] for o in outcomes) == [128, 256], outcomes
    for outcome in outcomes:
        assert outcome["status"] == "invalid_config", outcome
        assert "shared memory" in outcome["reason"]


def test_the_shared_memory_limit_is_the_architectures_own_unless_given():
    import matmul

    # 128 x 256 x 64 fp16 tiles in 5 stages take 196,608 bytes on sm_80 (four buffers): more
    # than an sm_80 block may opt into (166,912), less than an sm_90 one (232,448).
    params = {"BLOCK_SIZE_M": [128], "BLOCK_SIZE_N": [256], "BLOCK_SIZE_K": [64], "GROUP_SIZE_M": [8], "num_stages": [5],
              "num_warps": [8]}
    (given,) = kerntune.compile(matmul.matmul_kernel, matmul_args(), params, arch="sm_80", shared_limit=232448,
                                compile_workers=1)
    assert given["status"] == "compiled", given
    # The same compile again is Triton's cache's answer, which skips the stage that checks:
    # the compiled kernel's own figure is checked too.
    (refused,) = kerntune.compile(matmul.matmul_kernel, matmul_args(), params, arch="sm_80", compile_workers=1)
    assert refused["status"] == "invalid_config" and "allows 166912" in refused["reason"], refused


def test_configurations_whose_accumulator_would_spill_are_refused_before_the_lowering(monkeypatch, tmp_path):
    """128 x 256 fp32 accumulators over 2 warps are 512 registers per thread, twice the 255
    a thread can have: refused in moments (such compiles ran into the 10 s limit on the
    GPU machine), while the same tiles over 8 warps (128 registers) compile."""
    import matmul

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    params = {"BLOCK_SIZE_M": [128], "BLOCK_SIZE_N": [256], "BLOCK_SIZE_K": [32], "GROUP_SIZE_M": [8], "num_stages": [3],
              "num_warps": [2, 8]}
    outcomes = {o["config"]["num_warps"]: o for o in kerntune.compile(matmul.matmul_kernel, matmul_args(), params, compile_workers=2)}
    refused, compiled = outcomes[2], outcomes[8]
    assert refused["status"] == "invalid_config", refused
    assert refused["reason"].startswith("its dot accumulator alone needs 512 registers per thread with 2 warps"), refused
    assert compiled["status"] == "compiled", compiled


def test_the_accumulator_estimate_reads_the_dot_results_of_a_module():
    from kerntune._triton_worker import accumulator_registers

    text = ("%1 = tt.dot %a, %b, %c : tensor<128x64xf16, #d0> * tensor<64x256xf16, #d1> -> tensor<128x256xf32, #mma>\n"
            "%2 = ttng.warp_group_dot %a, %b, %c {isAsync = true} : !ttg.memdesc<64x32xf16> * !ttg.memdesc<32x64xf16> "
            "-> tensor<64x64xf16, #mma1>\n")
    assert accumulator_registers(text, 8) == 128 * 256 // 256
    assert accumulator_registers(text, 2) == 512
    assert accumulator_registers("%1 = arith.addf %a, %b : tensor<1024xf32, #blocked>", 4) == 0, "no dot"


def test_shared_memory_is_known_before_the_lowering_to_llvm(monkeypatch, tmp_path):
    """The compile workers refuse a configuration over the shared-memory limit before the
    LLVM stage's lowering (which, with ptxas, is where the time goes): the figure they find
    first must be the one the stage itself then allocates, pipelined buffers included."""
    import matmul
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    from kerntune._triton_worker import shared_memory_before_lowering

    early = []
    original = CUDABackend.add_stages

    def add_stages(self, stages, options, *rest):
        original(self, stages, options, *rest)
        make_llir = stages["llir"]

        def spy(src, metadata):
            early.append(shared_memory_before_lowering(src, options, self.target.arch))
            return make_llir(src, metadata)

        stages["llir"] = spy

    monkeypatch.setattr(CUDABackend, "add_stages", add_stages)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # an earlier test's cached kernel runs no stage
    kernel = matmul.matmul_kernel.fn
    # As Triton's JIT specializes a contiguous 1024^3 call: unit strides are constants,
    # pointers and the other integers divisible by 16.
    unit = {"stride_ak", "stride_bn", "stride_cn"}
    tiles = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
    signature, attrs = {}, {}
    for index, name in enumerate(kernel.arg_names):
        signature[name] = "constexpr" if name in unit or name in tiles else ("*fp16" if name.endswith("_ptr") else "i32")
        if signature[name] != "constexpr":
            attrs[(index,)] = [["tt.divisibility", 16]]
    constexprs = {**tiles, **{name: 1 for name in unit}}
    compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4, "num_stages": 4})
    one_stage = (128 + 128) * 64 * 2
    assert compiled.metadata.shared >= 3 * one_stage, compiled.metadata.shared  # the pipeline's buffers
    assert early == [compiled.metadata.shared], early


def test_every_example_compiles_for_sm90(tmp_path):
    import attention
    import conv2d
    import grouped_gemm

    cases = [
        (attention.attention_fwd, dict(Q=Tensor("float16", (2, 4, 512, 64)), K=Tensor("float16", (2, 4, 512, 64)), V=Tensor("float16", (2, 4, 512, 64)),
                                       Out=Tensor("float16", (2, 4, 512, 64)), sm_scale=0.125, stride_z=131072, stride_h=32768, stride_m=64,
                                       stride_d=1, H=4, N_CTX=512, HEAD_DIM=64),
         {"BLOCK_M": [64, 128], "BLOCK_N": [64], "PRE_LOAD_V": [False, True], "num_warps": [4], "num_stages": [2]}, 15),
        (grouped_gemm.grouped_matmul_kernel, dict(a_ptr=Tensor("float16", (1 << 20,)), b_ptr=Tensor("float16", (1 << 20,)), c_ptr=Tensor("float16", (1 << 20,)),
                                                  offsets_ptr=Tensor("int64", (12,)), sizes_ptr=Tensor("int32", (12,)), group_count=4),
         {"NUM_SM": [132], "BLOCK_SIZE_M": [64, 128], "BLOCK_SIZE_N": [64], "BLOCK_SIZE_K": [32], "num_warps": [4], "num_stages": [3]}, 10),
        (conv2d.conv2d_kernel, dict(x_ptr=Tensor("float16", (8, 56, 56, 64)), w_ptr=Tensor("float16", (3, 3, 64, 64)), y_ptr=Tensor("float16", (8, 56, 56, 64)),
                                    N=8, H=56, W=56, C=64, K=64, P=56, Q=56, R=3, S=3, stride=1, pad=1),
         {"BLOCK_NI_HO_WO": [64, 128], "BLOCK_CI": [32], "BLOCK_CO": [64], "num_warps": [4], "num_stages": [2]}, 17),
    ]
    for kernel, args, params, count in cases:
        name = kerntune._arguments.jit_function(kernel).__name__
        outcomes = kerntune.compile(kernel, args, params, compile_workers=2)
        # One outcome per configuration of the space, and every one compiles.
        configurations = math.prod(len(values) for values in params.values())
        assert len(outcomes) == configurations, (name, outcomes)
        assert len(check_compiled(outcomes, name, count, tmp_path)) == configurations, (name, [o["status"] for o in outcomes])


def test_a_configuration_that_does_not_compile_fails_alone(tmp_path):
    source = '''
import triton
import triton.language as tl

@triton.jit
def fussy(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK != 64, "BLOCK 64 is not supported")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)
'''
    (tmp_path / "fussy_kernels.py").write_text(source)
    import importlib
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("fussy_kernels")
        outcomes = kerntune.compile(module.fussy, {"x_ptr": Tensor("float32", (1000,)), "n": 1000}, {"BLOCK": [32, 64, 128]}, compile_workers=1)
    finally:
        sys.path.remove(str(tmp_path))
    statuses = {o["config"]["BLOCK"]: o["status"] for o in outcomes}
    assert statuses == {32: "compiled", 64: "compile_failed", 128: "compiled"}
    failed = next(o for o in outcomes if o["status"] == "compile_failed")
    assert "BLOCK 64 is not supported" in failed["reason"]


def test_compiled_cubins_are_kept_in_the_store(db):
    import matmul
    import sqlite3

    params = {"BLOCK_SIZE_M": [64], "BLOCK_SIZE_N": [64, 128], "BLOCK_SIZE_K": [32], "GROUP_SIZE_M": [8], "num_stages": [3], "num_warps": [4]}
    kerntune.compile(matmul.matmul_kernel, matmul_args(), params, compile_workers=2, db=db)
    rows = sqlite3.connect(db).execute("select kind, length(data) from artifacts").fetchall()
    assert len(rows) == 2 and all(kind == "cubin" and size > 1000 for kind, size in rows)


def test_bad_calls_are_clear_errors():
    import matmul

    with pytest.raises(TypeError, match="missing argument 'K'"):
        args = matmul_args()
        del args["K"]
        kerntune.compile(matmul.matmul_kernel, args, {"BLOCK_SIZE_M": [64]})
    with pytest.raises(ValueError, match="neither an argument"):
        kerntune.compile(matmul.matmul_kernel, matmul_args(), {"BLOCK_M": [64]})
    with pytest.raises(ValueError, match="must be a tl.constexpr"):
        kerntune.compile(matmul.matmul_kernel, matmul_args(), {"M": [64]})
    params = {"BLOCK_SIZE_M": [64], "BLOCK_SIZE_N": [64], "BLOCK_SIZE_K": [32], "GROUP_SIZE_M": [8]}
    with pytest.raises(kerntune.SpaceError, match="at column"):
        kerntune.compile(matmul.matmul_kernel, matmul_args(), params, restrictions=["BLOCK_SIZE_M >"])
    with pytest.raises(kerntune.SpaceError, match="no configuration"):
        kerntune.compile(matmul.matmul_kernel, matmul_args(), params, restrictions=["BLOCK_SIZE_M > 64"])
    # Issue 17: these overflowed the parser's stack and took the interpreter down.
    for deep in ["(" * 5000 + "BLOCK_SIZE_M" + ")" * 5000, "not " * 5000 + "BLOCK_SIZE_M", "BLOCK_SIZE_M + " * 50000 + "1"]:
        with pytest.raises(kerntune.SpaceError, match="nests more than 200 levels deep"):
            kerntune.compile(matmul.matmul_kernel, matmul_args(), params, restrictions=[deep])
    with pytest.raises(TypeError, match="not a @triton.jit"):
        kerntune.compile(print, {}, {})


def test_ptxas_options_are_compiler_controls_in_the_same_space(tmp_path):
    import matmul

    params = {"BLOCK_SIZE_M": [64], "BLOCK_SIZE_N": [64], "BLOCK_SIZE_K": [32], "GROUP_SIZE_M": [8], "num_stages": [3], "num_warps": [4],
              "ptx_options": ["", "-O0"]}
    outcomes = kerntune.compile(matmul.matmul_kernel, matmul_args(), params, compile_workers=2)
    assert [o["status"] for o in outcomes] == ["compiled", "compiled"], outcomes
    optimised, unoptimised = (base64.b64decode(o["cubin"]) for o in outcomes)
    assert optimised != unoptimised, "the flag reached ptxas"


def test_acf_files_need_a_newer_ptxas_than_tritons():
    import matmul

    params = {"BLOCK_SIZE_M": [64], "BLOCK_SIZE_N": [64], "BLOCK_SIZE_K": [32], "GROUP_SIZE_M": [8], "ptx_options": ["--apply-controls tuned.acf"]}
    with pytest.raises(kerntune.SpecError, match="ptxas 13.3 or newer"):
        kerntune.compile(matmul.matmul_kernel, matmul_args(), params)


def test_the_package_imports_without_triton_or_torch_and_has_its_stubs():
    import subprocess
    import sys

    code = ("import sys; sys.modules['triton'] = None; sys.modules['torch'] = None; import kerntune; "
            "print(kerntune.__version__, kerntune.default_db() != '', issubclass(kerntune.NoGpuError, kerntune.KerntuneError))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1:] == ["True", "True"]
    package = os.path.dirname(kerntune.__file__)
    assert os.path.exists(os.path.join(package, "_kerntune.pyi")) and os.path.exists(os.path.join(package, "py.typed"))


def test_a_front_end_folder_that_cannot_be_written_keeps_nothing_and_fails_nothing(tmp_path):
    """Sharing is an optimisation: where its folder cannot be made or written (here its
    parent is a file), nothing is kept and nothing raises into the compile."""
    from kerntune import _triton_worker as worker

    (tmp_path / "a-file").write_text("")
    front_ends = worker.FrontEnds(str(tmp_path / "a-file" / "kerntune-front-ends"))
    front_ends.write(front_ends.path("key", ".ttir"), "module {}")
    assert front_ends.ttir("key") is None


def test_a_sibling_compiled_from_a_kept_ttir_is_cached_under_its_source(tmp_path, monkeypatch):
    """The calling process's JIT compiles the winner from its source when it launches it (to
    time it against ATen, say): a sibling a worker compiled from a kept TTIR is found in
    Triton's cache there, with the same cubin, and nothing is compiled again."""
    cache = tmp_path / "triton-cache"
    sharing = matmul_worker(tmp_path / "sharing", cache)
    sharing.compile(matmul_config((64, 128, 64), 4, 3))
    sibling = sharing.compile(matmul_config((64, 128, 64), 8, 4))
    sharing.close()
    entries = lambda: {p.name for p in cache.iterdir()}  # noqa: E731
    filled = entries()
    monkeypatch.setenv("KERNTUNE_SHARE_FRONT_END", "0")  # Triton's own compile from the source
    plain = matmul_worker(tmp_path / "plain", cache)
    again = plain.compile(matmul_config((64, 128, 64), 8, 4))
    plain.close()
    assert sibling["front_end_reused"]
    assert again["cubin"] == sibling["cubin"]
    assert entries() == filled, "Triton's cache answered the source with the sibling's compile"


def test_share_front_end_0_compiles_from_the_source_whatever_was_kept(tmp_path, monkeypatch):
    """The escape hatch holds on a cache where an earlier run kept TTIRs."""
    cache = tmp_path / "triton-cache"
    sharing = matmul_worker(tmp_path / "sharing", cache)
    sharing.compile(matmul_config((64, 128, 64), 4, 3))
    sharing.close()
    monkeypatch.setenv("KERNTUNE_SHARE_FRONT_END", "0")
    alone = matmul_worker(tmp_path / "alone", cache)
    sibling = alone.compile(matmul_config((64, 128, 64), 8, 4))
    alone.close()
    assert (sibling["type"], sibling["front_end_reused"]) == ("compiled", False), sibling


tl = triton.language


@triton.jit
def converted(x_ptr, n, BLOCK: tl.constexpr, OUT: tl.constexpr = tl.float16, NOTE: tl.constexpr = None):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask).to(OUT).to(tl.float32), mask=mask)


def test_a_constexpr_whose_default_is_a_triton_dtype_compiles_with_that_dtype():
    args = {"x_ptr": Tensor("float32", (1024,)), "n": 1024}
    outcomes = kerntune.compile(converted, args, params={"BLOCK": [128, 256]})
    assert [o["status"] for o in outcomes] == ["compiled", "compiled"], outcomes
    as_bf16 = kerntune.compile(converted, {**args, "OUT": triton.language.bfloat16}, params={"BLOCK": [128]})
    assert as_bf16[0]["status"] == "compiled" and as_bf16[0]["cubin"] != outcomes[0]["cubin"]


def test_a_constexpr_value_the_compile_workers_cannot_take_is_refused_in_one_line():
    with pytest.raises(kerntune.ArgumentTypeError, match="constexpr argument NOTE = <object"):
        kerntune.compile(converted, {"x_ptr": Tensor("float32", (1024,)), "n": 1024, "NOTE": object()},
                         params={"BLOCK": [128]})
