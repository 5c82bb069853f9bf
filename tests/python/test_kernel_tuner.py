"""``kerntune.tune_kernel`` with Kernel Tuner's conventions, checked without a GPU: every
call compiles the whole space for sm_90 with NVRTC (``compile_only=True``) and the tests
read what each configuration became. The GPU runs of the same conventions are in
test_kernel_tuner_gpu.py."""

import json
import os

import numpy as np
import pytest

import kerntune
from kerntune import file_utils, util
from kerntune._kt_conventions import Conventions

VECTOR_ADD = """
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

TEMPLATED = """
template <typename T, int items>
__global__ void scale(T *x, int n) {
    int i = (blockIdx.x * block_size_x + threadIdx.x) * items;
    #pragma unroll
    for (int k = 0; k < items; k++) if (i + k < n) x[i + k] *= T(2);
}
"""


def vector_args(n=4096):
    a = np.arange(n, dtype=np.float32)
    return [np.zeros_like(a), a, a.copy(), np.int32(n)]


def compile_only(db, *args, **kwargs):
    return kerntune.tune_kernel(*args, compile_only=True, arch="sm_90", db=db, **kwargs)


def test_a_cpp_kernel_without_extern_c_compiles_and_reports_its_mangled_symbol(db):
    rows, env = compile_only(db, "vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [64, 128, 256]})
    assert [r["block_size_x"] for r in rows] == [64, 128, 256]
    assert all(r["status"] == "compiled" for r in rows), rows
    assert all(r["symbol"].startswith("_Z10vector_add") for r in rows), rows
    assert env["compiled"] == 3


def test_an_extern_c_kernel_keeps_its_plain_symbol(db):
    source = 'extern "C"' + VECTOR_ADD
    rows, _ = compile_only(db, "vector_add", source, 4096, vector_args(), {"block_size_x": [128]})
    assert rows[0]["symbol"] == "vector_add"


def test_a_templated_kernel_name_may_use_the_parameters(db):
    x = np.ones(4096, np.float32)
    rows, _ = compile_only(db, "scale<float, unroll>", TEMPLATED, 4096, [x, np.int32(4096)],
                           {"block_size_x": [128], "unroll": [1, 4]}, grid_div_x=["block_size_x", "unroll"])
    symbols = {r["unroll"]: r["symbol"] for r in rows}
    assert all(r["status"] == "compiled" for r in rows), rows
    assert symbols[1].startswith("_Z5scaleIfLi1E") and symbols[4].startswith("_Z5scaleIfLi4E"), symbols


def test_blocks_the_device_cannot_hold_are_left_out_before_the_search(db):
    rows, env = compile_only(db, "vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [512, 1024, 2048]})
    assert [r["block_size_x"] for r in rows] == [512, 1024]
    assert env["configurations"] == 2


def test_a_name_missing_from_the_source_fails_loudly_with_a_hint(db):
    with pytest.raises(kerntune.KerntuneError) as caught:
        compile_only(db, "vector_sum", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [64, 128]})
    message = str(caught.value)
    assert "no configuration is compiled" in message and "2 of 2" in message and "vector_sum" in message
    assert "Hint" in message


def test_a_compile_error_in_the_kernel_is_reported_without_the_name_hint(db):
    source = VECTOR_ADD.replace("c[i] = a[i] + b[i];", "c[i] = a[i] + b[i] + undefined_name;")
    with pytest.raises(kerntune.KerntuneError, match="undefined_name") as caught:
        compile_only(db, "vector_add", source, 4096, vector_args(), {"block_size_x": [64]})
    assert "kernel's name" not in str(caught.value)


def test_compiling_again_answers_from_the_store(db):
    space = {"block_size_x": [64, 128]}
    first, _ = compile_only(db, "vector_add", VECTOR_ADD, 4096, vector_args(), space)
    again, _ = compile_only(db, "vector_add", VECTOR_ADD, 4096, vector_args(), space)
    assert [r["block_size_x"] for r in first] == [r["block_size_x"] for r in again] == [64, 128]
    assert not any(r["from_store"] for r in first)
    assert all(r["from_store"] for r in again)
    assert [r["symbol"] for r in again] == [r["symbol"] for r in first]


def test_a_new_answer_is_a_new_tuning_not_an_answer_from_the_store(db):
    args = vector_args()
    space = {"block_size_x": [64]}
    first, _ = compile_only(db, "vector_add", VECTOR_ADD, 4096, args, space, answer=[args[1] + args[2], None, None, None])
    again, _ = compile_only(db, "vector_add", VECTOR_ADD, 4096, args, space, answer=[args[1] + args[2], None, None, None])
    other, _ = compile_only(db, "vector_add", VECTOR_ADD, 4096, args, space, answer=[args[1] - args[2], None, None, None])
    assert [r["from_store"] for r in (first[0], again[0], other[0])] == [False, True, False]


def test_compiler_options_and_defines_reach_the_compiler(db):
    source = """
    #if !defined(SCALE) || !defined(FAST)
    #error definitions missing
    #endif
    extern "C" __global__ void k(float *x) { x[threadIdx.x] *= SCALE; }
    """
    x = np.ones(256, np.float32)
    rows, _ = compile_only(db, "k", source, 256, [x], {"block_size_x": [256]},
                           defines={"SCALE": "block_size_x / 128", "block_size_x": "block_size_x"},
                           compiler_options=["-DFAST=1", "-use_fast_math"])
    assert rows[0]["status"] == "compiled", rows
    with pytest.raises(kerntune.KerntuneError, match="definitions missing"):
        compile_only(db, "k", source, 256, [x], {"block_size_x": [256]}, defines={"SCALE": 2})


def test_default_definitions_include_the_grid_and_block_and_kernel_tuner(db):
    source = """
    #if grid_size_x != 16 || block_size_y != 1 || kernel_tuner != 1
    #error wrong definitions
    #endif
    extern "C" __global__ void k(float *x) { x[blockIdx.x * block_size_x + threadIdx.x] = 1.0f; }
    """
    x = np.zeros(4096, np.float32)
    rows, _ = compile_only(db, "k", source, 4096, [x], {"block_size_x": [256]})
    assert rows[0]["status"] == "compiled", rows


def test_problem_size_may_name_a_parameter_and_an_empty_grid_div_divides_nothing():
    conventions = Conventions("k", "", "num_blocks", [[], None, None], None, None, None, ["block_size_x", "num_blocks"])
    _, _, grid, block, _ = conventions.instance([128, 40])
    assert grid == [40, 1, 1] and block == [128, 1, 1]


def test_problem_size_and_grid_div_may_be_callables_and_expressions():
    conventions = Conventions(
        "k", "", lambda p: (p["n"] * 2, 100), [lambda p: p["bx"] * 4, "by * 2", None], None, None,
        {"size": lambda p: p["bx"] * 8}, ["bx", "by", "n"])
    _, _, grid, _, shared = conventions.instance([32, 5, 1000])
    assert grid == [16, 10, 1]  # ceil(2000 / 128), ceil(100 / 10)
    assert shared == 256


def test_a_missing_block_dimension_launches_256_threads_and_divides_by_one():
    conventions = Conventions("k", "", 1000, [None, None, None], None, None, None, ["tile"])
    _, _, grid, block, _ = conventions.instance([4])
    assert block == [256, 1, 1] and grid == [1000, 1, 1]


def test_an_empty_problem_or_a_zero_divisor_is_the_reason_a_configuration_cannot_launch():
    conventions = Conventions("k", "", "n", [None, "d", None], None, None, None, ["block_size_x", "n", "d"])
    with pytest.raises(ValueError, match="problem size of axis x is 0; a problem size is at least 1"):
        conventions.instance([64, 0, 1])
    conventions = Conventions("k", "", (64, 64), [None, "d", None], None, None, None, ["block_size_x", "n", "d"])
    with pytest.raises(ValueError, match="grid divisor of axis y is 0"):
        conventions.instance([64, 64, 0])


def test_loop_unroll_factor_zero_removes_the_pragma_and_others_become_constants():
    source = "void f() {\n    #pragma unroll loop_unroll_factor_0\n    for (;;) {}\n}"
    conventions = Conventions("k", source, 10, [None] * 3, None, None, None, ["loop_unroll_factor_0"])
    text, *_ = conventions.instance([0])
    assert "#pragma unroll" not in text
    text, *_ = conventions.instance([8])
    assert "constexpr int loop_unroll_factor_0 = 8;" in text and "#pragma unroll loop_unroll_factor_0" in text


def test_a_kernel_source_file_is_read_and_its_folder_is_on_the_include_path(db, tmp_path):
    (tmp_path / "helper.cuh").write_text("#define HELPER 1\n")
    kernel = tmp_path / "kernel.cu"
    kernel.write_text('#include "helper.cuh"\n' + VECTOR_ADD)
    rows, _ = compile_only(db, "vector_add", str(kernel), 4096, vector_args(), {"block_size_x": [128]})
    assert rows[0]["status"] == "compiled", rows


@pytest.mark.parametrize("call, match", [
    (dict(lang="OpenCL"), "lang="),
    (dict(observers=[object()]), "observers"),
    (dict(texmem_args={"t": np.zeros(4)}), "texmem_args"),
    (dict(restrictions=lambda p: True), "restrictions"),
    (dict(grid_div_x=3.5), "grid_div_x"),
    (dict(problem_size=[1, 2, 3, 4]), "problem_size"),
    (dict(arguments=[np.zeros(4, np.float32), 7]), r"arguments\[1\]"),
    (dict(arguments=[np.zeros(4, np.complex64)]), r"arguments\[0\]"),
    (dict(tune_params={"block_size_x": 128}), "tune_params"),
    (dict(answer=[None, None]), "answer"),
    (dict(cmem_args={"d_filter": [1, 2]}), "cmem_args"),
    (dict(defines=["A"]), "defines"),
    (dict(iterations=0), "iterations"),
    (dict(kernel_source="missing.cu"), "kernel_source"),
    (dict(objective="GFLOP"), "objective"),
])
def test_bad_input_is_a_one_line_error_naming_the_argument(db, call, match):
    kwargs = dict(kernel_name="vector_add", kernel_source=VECTOR_ADD, problem_size=4096,
                  arguments=vector_args(), tune_params={"block_size_x": [128]})
    kwargs.update(call)
    with pytest.raises((ValueError, TypeError), match=match) as caught:
        compile_only(db, **kwargs)
    assert isinstance(caught.value, kerntune.KerntuneError)
    assert "\n" not in str(caught.value)


def test_file_utils_write_t4_results_and_metadata(tmp_path):
    results = [
        {"block_size_x": 64, "time": 1.5, "times": [1.4, 1.5, 1.6], "compile_time": 100.0, "verification_time": 1.0,
         "benchmark_time": 5.0, "framework_time": 0.5, "strategy_time": 0.0, "timestamp": "t", "status": "ok",
         "GFLOP/s": 12.0},
        {"block_size_x": 2048, "time": util.InvalidConfig(), "times": [], "compile_time": 0.0,
         "verification_time": 0.0, "benchmark_time": 0.0, "framework_time": 0.0, "strategy_time": 0.0,
         "status": "invalid_config", "reason": "too many threads"},
    ]
    file_utils.store_output_file(str(tmp_path / "out"), results, {"block_size_x": [64, 2048]})
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["schema_version"] == "1.0.0"
    first, second = document["results"]
    assert first["configuration"] == {"block_size_x": 64}
    assert first["times"]["runtimes"] == [1.4, 1.5, 1.6] and first["times"]["compilation"] == 100.0
    assert first["invalidity"] == "correct" and second["invalidity"] == "constraints"
    assert {m["name"] for m in first["measurements"]} == {"time", "GFLOP/s"}
    file_utils.store_metadata_file(str(tmp_path / "meta.json"))
    metadata = json.loads((tmp_path / "meta.json").read_text())
    assert metadata["schema_version"] == "1.0.0" and "operating_system" in metadata["metadata"]


def test_util_prints_configurations_and_picks_the_best_valid_one():
    rows = [{"bx": 32, "time": 2.0}, {"bx": 64, "time": util.RuntimeFailedConfig()}, {"bx": 128, "time": 1.25}]
    assert util.get_config_string(rows[2]) == "bx=128, time=1.250"
    assert util.get_config_string(rows[2], keys=["bx"]) == "bx=128"
    assert util.get_best_config(rows)["bx"] == 128
    assert str(rows[1]["time"]) == "RuntimeFailedConfig" and isinstance(rows[1]["time"], str)


def test_a_kernel_tuner_cache_file_round_trips(tmp_path):
    from kerntune import _kt_cache

    path = str(tmp_path / "cache.json")
    header = {"device_name": "NVIDIA H100", "kernel_name": "k", "problem_size": [4096], "tune_params_keys": ["bx"],
              "tune_params": {"bx": [64, 128]}, "objective": "time", "cache": {"32": {"bx": 32, "time": 3.0}}}
    results = [{"bx": 64, "time": 1.0, "times": [1.0]}, {"bx": 128, "time": util.CompilationFailedConfig()}]
    _kt_cache.write(path, header, results)
    text = open(path).read()
    assert text.endswith("}\n}"), "Kernel Tuner reopens a cache for appending only when it ends like this"
    assert text.splitlines()[-3].startswith('"64": {"bx": 64, "time": 1.0, "times": [1.0], '), "an entry a line"
    document = _kt_cache.read(path)
    entries = document["cache"]
    assert list(entries) == ["32", "64", "128"] and document["kernel_name"] == "k"
    assert entries["32"] == {"bx": 32, "time": 3.0}, "entries already there are kept as they were"
    assert entries["128"]["time"] == "CompilationFailedConfig" and entries["64"]["compile_time"] == 0.0
    # Kernel Tuner leaves a file it is still appending to open: no closing braces.
    open(path, "w").write(text[:-3] + ",")
    assert _kt_cache.read(path)["cache"] == entries
    _kt_cache.check(document, path, "k", ["bx"], (4096,), "NVIDIA H100")
    with pytest.raises(ValueError, match="device"):
        _kt_cache.check(document, path, "k", ["bx"], (4096,), "NVIDIA H200")
    with pytest.raises(ValueError, match="parameters"):
        _kt_cache.check(document, path, "k", ["by"], (4096,), None)


def test_simulation_mode_replays_a_cache_without_a_gpu(tmp_path):
    from kerntune import _kt_cache

    path = str(tmp_path / "cache.json")
    header = {"device_name": "NVIDIA H100", "kernel_name": "vector_add", "problem_size": 4096,
              "tune_params_keys": ["block_size_x"], "tune_params": {"block_size_x": [64, 128, 256]}, "objective": "time",
              "cache": {}}
    results = [{"block_size_x": 64, "time": 2.0}, {"block_size_x": 128, "time": 1.0},
               {"block_size_x": 256, "time": "RuntimeFailedConfig"}]
    _kt_cache.write(path, header, results)
    results, env = kerntune.tune_kernel("vector_add", VECTOR_ADD, 4096, vector_args(),
                                        {"block_size_x": [64, 128, 256]}, simulation_mode=True, cache=path, quiet=True)
    assert [r["block_size_x"] for r in results] == [64, 128, 256]
    assert env["best_config"]["block_size_x"] == 128 and env["device_name"] == "NVIDIA H100"
    assert isinstance(results[2]["time"], util.ErrorConfig)


def test_a_configuration_stopped_early_is_marked_and_its_cache_entry_never_wins_a_replay(tmp_path):
    from kerntune import _kt_cache
    from kerntune._kt_call import Call

    call = Call("vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [64, 128]}, (None, None, None), None,
                 None, 1e-6, 1e-5, None, None, None, None, None, None, 32, None, "time", str(tmp_path))
    stopped = call._row({"config": {"block_size_x": 64}, "status": "early_stopped", "time_ms": 2.0,
                         "samples": [2.0, 2.1], "objective": 2.0}, {})
    timed = call._row({"config": {"block_size_x": 128}, "status": "ok", "time_ms": 1.0, "samples": [1.0] * 32,
                       "objective": 1.0}, {})
    assert stopped["early_stopped"] is True and stopped["times"] == [2.0, 2.1]
    assert "early_stopped" not in timed
    # A replay takes the mark: a stopped entry, however fast its two samples, is not the best.
    path = str(tmp_path / "cache.json")
    header = {"device_name": "NVIDIA H100", "kernel_name": "vector_add", "problem_size": 4096,
              "tune_params_keys": ["block_size_x"], "tune_params": {"block_size_x": [64, 128]}, "objective": "time",
              "cache": {}}
    _kt_cache.write(path, header, [{**stopped, "time": 0.5}, timed])
    _, env = kerntune.tune_kernel("vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [64, 128]},
                                  simulation_mode=True, cache=path, quiet=True)
    assert env["best_config"]["block_size_x"] == 128


def test_tuning_without_a_gpu_says_so(db):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU")
    with pytest.raises(kerntune.NoGpuError):
        kerntune.tune_kernel("vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [128]}, db=db,
                             quiet=True)


@pytest.mark.parametrize("example, size", [
    ("vector_add", dict(n=1 << 12)),
    ("stencil", dict(width=256, height=128)),
    ("matmul", dict(n=128)),
    ("convolution", dict(width=256, height=256)),
    ("reduction", dict(n=1 << 14)),
])
def test_every_kernel_tuner_style_example_compiles_in_full(db, example, size):
    module = kernel_tuner_example(example)
    rows, env = compile_only(db, **module.problem(**size))
    assert env["compiled"] == env["configurations"] == len(rows) > 0, [r for r in rows if r["status"] != "compiled"][:1]


def kernel_tuner_example(name):
    """The example module examples/kernel_tuner/NAME.py (loaded by path: the Triton
    examples have modules of the same names)."""
    import importlib.util
    import sys

    key = f"kernel_tuner_example_{name}"
    if key not in sys.modules:
        path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "kernel_tuner", f"{name}.py")
        spec = importlib.util.spec_from_file_location(key, path)
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


def test_a_custom_verify_gets_the_outputs_the_worker_wrote_back(tmp_path):
    from kerntune._kt_call import Call

    partial = np.zeros(8, np.float32)
    values = np.ones(64, np.float32)
    seen = {}

    def verify(answer, result, atol=None):
        seen.update(answer=answer, result=result, atol=atol)
        return np.isclose(result[0].sum(), answer[0])

    call = Call("k", VECTOR_ADD, "num_blocks", [partial, values, np.int32(64)], {"num_blocks": [8]},
                 ([], None, None), None, [64.0, None, None], 1e-3, 0.0, verify, None, None, None, None, None, 7, None,
                 "time", str(tmp_path))
    assert call.args[0]["output"] and call.args[0]["poison"] is False, "outputs start from their contents, unpoisoned"
    written = tmp_path / "0.0.bin"
    np.full(8, 8.0, np.float32).tofile(written)
    assert call._check([8], [(0, str(written))]) is None
    assert seen["atol"] == 1e-3 and seen["result"][1] is None and seen["result"][0].shape == (8,)
    np.zeros(8, np.float32).tofile(written)
    assert "returned False" in call._check([8], [(0, str(written))])


def test_a_custom_verify_without_answer_gets_none_and_every_array_as_an_output(tmp_path):
    # Kernel Tuner calls verify(None, result) then, with every array copied back.
    from kerntune._kt_call import Call

    c, a, b = np.zeros(16, np.float32), np.ones(16, np.float32), np.ones(16, np.float32)
    seen = {}

    def verify(answer, result, atol=None):
        seen.update(answer=answer, result=result)
        return np.allclose(result[0], result[1] + result[2])

    call = Call("vector_add", VECTOR_ADD, 16, [c, a, b, np.int32(16)], {"block_size_x": [16]}, (None, None, None),
                 None, None, 1e-6, 0.0, verify, None, None, None, None, None, 7, None, "time", str(tmp_path))
    assert [arg.get("output", False) for arg in call.args] == [True, True, True, False]
    assert all(arg["poison"] is False for arg in call.args[:3]), "each array starts from its own contents"
    files = []
    for position, values in enumerate([np.full(16, 2.0, np.float32), a, b]):
        path = tmp_path / f"{position}.bin"
        values.tofile(path)
        files.append((position, str(path)))
    assert call._check([16], files) is None
    assert seen["answer"] is None and seen["result"][3] is None and seen["result"][1].shape == (16,)
    np.zeros(16, np.float32).tofile(files[0][1])
    assert "returned False" in call._check([16], files)


def energy_call(tmp_path, observers):
    from kerntune._kt_call import Call
    from kerntune.observers.nvml import observed_keys

    n = 1 << 20
    metrics = {"GFLOPS/W": lambda p: (n / 1e9) / p["nvml_energy"]}
    return Call("vector_add", VECTOR_ADD, n, vector_args(16), {"block_size_x": [128, 256]}, (None, None, None), None,
                 None, 1e-6, 0.0, None, None, None, None, None, None, 7, metrics, "time", str(tmp_path),
                 observed_keys(observers))


def measured_entry(status, observables):
    return {"config": {"block_size_x": 256}, "status": status, "time_ms": 0.5, "samples": [0.5, 0.6],
            "costs": {}, "observables": observables, "verified_sets": 0}


def test_an_early_stopped_row_carries_its_energy_to_the_users_metric(tmp_path):
    from kerntune.observers.nvml import NVMLObserver

    call = energy_call(tmp_path, [NVMLObserver(["nvml_energy", "temperature"])])
    row = call._row(measured_entry("early_stopped", {"energy_J": 0.002, "temperature_C": 50}), {})
    assert row["early_stopped"] and row["nvml_energy"] == 0.002 and row["temperature"] == 50
    assert row["GFLOPS/W"] == pytest.approx((1 << 20) / 1e9 / 0.002)


def test_a_metric_reading_an_absent_observable_says_which_and_why_in_one_line(tmp_path):
    from kerntune.observers.nvml import NVMLObserver

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    unobserved = energy_call(tmp_path / "a", None)
    with pytest.raises(kerntune.ArgumentError, match=r"metrics\['GFLOPS/W'\] reads 'nvml_energy'.*observers=\[NVMLObserver"):
        unobserved._row(measured_entry("ok", {}), {})
    unreported = energy_call(tmp_path / "b", [NVMLObserver(["nvml_energy"])])
    with pytest.raises(kerntune.ArgumentError, match="block_size_x=256 lacks; NVML does not report it") as error:
        unreported._row(measured_entry("ok", {}), {})
    assert "\n" not in str(error.value)


CUB_BLOCK_SUMS = """
#include <cub/cub.cuh>
extern "C" __global__ void block_sums(const double *x, double *out) {
    typedef cub::BlockReduce<double, block_size_x> Reduce;
    __shared__ typename Reduce::TempStorage storage;
    double total = Reduce(storage).Sum(x[blockIdx.x * block_size_x + threadIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""


def test_a_kernel_including_cubs_umbrella_header_compiles_with_the_cccl_wheel(db):
    # As Kernel Tuner's expdist example does; NVRTC ships no CUB, the nvidia-cuda-cccl wheel does.
    import importlib.metadata

    try:
        importlib.metadata.version("nvidia-cuda-cccl")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pip install nvidia-cuda-cccl")
    x, out = np.ones(1024, np.float64), np.zeros(8, np.float64)
    rows, _ = compile_only(db, "block_sums", CUB_BLOCK_SUMS, 1024, [x, out], {"block_size_x": [128, 256]})
    assert [r["status"] for r in rows] == ["compiled", "compiled"], rows[0].get("reason")
