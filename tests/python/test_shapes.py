"""Many-shape runs: ``kerntune.tune(..., shapes=[...])`` tunes a kernel at every size, each
size learning from the size tuned nearest to it, and ``kernel.tune_shapes(...)`` does so for
a decorated kernel. Without a GPU: the refusals of bad size lists, the loop's hand-over
from size to size, and the report; on a GPU, the whole run."""

import json

import pytest

triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
import triton.language as tl  # noqa: E402
from kerntune import _shapes  # noqa: E402
from kerntune._results import TuneResult  # noqa: E402


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


PARAMS = {"BLOCK": [64, 256, 1024]}


def make(n):
    return {"x_ptr": kerntune.Tensor("float32", (n,)), "n": n}


@pytest.mark.parametrize("shapes, args, message", [
    ([], make, "shapes is empty: list the sizes to tune"),
    ([{"n": 64}, {"n": 128}, {"n": 64}], make, "shapes lists n=64 twice: list each size once"),
    ([{"n": 64}, {"m": 128}], make, "give every size the same variables"),
    ([{"m": 64}], make, "shapes name m, which args\\(n\\) does not take .*name the sizes' variables"),
    ([{"n": 64}], {"n": 64}, "args is a function of a size's variables"),
    ({"n": 64}, make, "shapes: give a list of dicts"),
    ([64, 128], make, "each size is a dict of its variables"),
])
def test_size_lists_that_cannot_make_a_run_are_refused_in_one_line_before_any_work(shapes, args, message):
    with pytest.raises((kerntune.ArgumentError, TypeError), match=message) as raised:
        kerntune.tune(scale, args, grid=(1,), params=PARAMS, shapes=shapes)
    assert "\n" not in str(raised.value)


def test_answer_with_shapes_is_a_function_of_the_size():
    with pytest.raises(TypeError, match="answer is a function of a size's variables"):
        kerntune.tune(scale, make, grid=(1,), params=PARAMS, shapes=[{"n": 64}], answer={"x_ptr": None})


def result(tuning, shape, best, started_from=None, found_at=1):
    row = {"shape": shape, "evaluations": 3, "measured": 3, "wall_s": 1.5, "best": best,
           "best_config": {"BLOCK": 256}, "found_at": found_at, "started_from": started_from, "tuning": tuning}
    return TuneResult(best_config={"BLOCK": 256}, best_objective=best, best_time_ms=best, objective="time",
                      higher_is_better=False, evaluations=3, failed=0, from_store=0, stop="budget", wall_s=1.5,
                      db="results.db", tuning=tuning, shape=row)


def test_each_size_is_told_the_sizes_tuned_before_it_with_their_tunings_and_the_sizes_args_are_made_for_it():
    seen = []

    def tune(size_args, one, answer, edge_args):
        seen.append((size_args, one.transfer, answer))
        shape = one.transfer["shape"]
        return result(10 + len(seen), shape, 0.1 * shape["n"])

    sizes = _shapes.check([{"n": 64}, {"n": 4096}, {"n": 256}], {"args": make})
    results = _shapes.run(tune, make, sizes, True, "scale", _shapes.size_options(lambda n: {"x_ptr": n}, None))
    assert [transfer["tuned"] for _, transfer, _ in seen] == [
        [],
        [{"shape": {"n": 64}, "tuning": 11}],
        [{"shape": {"n": 64}, "tuning": 11}, {"shape": {"n": 4096}, "tuning": 12}],
    ]
    assert [args["n"] for args, _, _ in seen] == [64, 4096, 256]
    assert [answer for _, _, answer in seen] == [{"x_ptr": 64}, {"x_ptr": 4096}, {"x_ptr": 256}]
    assert not any(transfer["independent"] for _, transfer, _ in seen)
    assert results[4096].tuning == 12 and list(results) == [(64,), (4096,), (256,)]
    alone = _shapes.run(tune, make, sizes, False, "scale", _shapes.size_options(None, None))
    assert alone[64].tuning == 14 and all(transfer["independent"] for _, transfer, _ in seen[3:])


def test_the_report_has_a_line_per_size_and_the_table_serves_a_decorated_kernel(tmp_path):
    results = _shapes.ShapeResults("scale", ["n"])
    for n, tuned in ((1000, result(1, {"n": 1000}, 0.004)),
                     (1 << 20, result(2, {"n": 1 << 20}, 0.02, started_from={"n": 1000}, found_at=1))):
        results._add({"n": n}, tuned, _shapes.found_by_tune(tuned))
    lines = results.summary().splitlines()
    assert len(lines) == 4 and "1 (n=1000)" in lines[2] and lines[3].startswith("2 sizes"), results.summary()
    path = results.save_table(tmp_path / "scale.json")
    assert json.loads(open(path).read())["key"] == ["n"]
    served = kerntune.autotune(configs=[triton.Config({"BLOCK": b}) for b in (64, 256)], key=["n"], table=path,
                               new_keys="nearest")(scale)
    assert served._config((3000,), {}, None) == {"BLOCK": 256}


def test_a_decorated_kernel_learns_a_new_key_from_the_nearest_key_it_tuned(monkeypatch):
    import kerntune._autotune as autotune_module

    asked = []

    def tune(*args, shapes, **kwargs):
        asked.append(shapes.transfer)
        return result(20 + len(asked), shapes.transfer["shape"], 0.01)

    monkeypatch.setattr(autotune_module, "tune", tune)
    tuner = kerntune.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])(scale)
    for n in (1000, 5000):
        tuner._config((n, "torch.float32"), {}, None)
    assert asked[0] == {"shape": {"n": 1000, "dtype0": "torch.float32"}, "tuned": [], "independent": False}
    assert asked[1]["tuned"] == [{"shape": {"n": 1000, "dtype0": "torch.float32"}, "tuning": 21}]


@pytest.mark.gpu
def test_a_many_shape_run_tunes_every_size_and_each_later_size_measures_the_nearest_earlier_best(tmp_path,
                                                                                                  script_runner):
    assert "shapes ok" in script_runner(f'''
import torch, triton, triton.language as tl, kerntune

@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)

def make(n):
    return {{"x_ptr": torch.ones(n, device="cuda"), "n": n}}

def run():
    return kerntune.tune(scale, make, lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
                         {{"BLOCK": [64, 128, 256, 512, 1024], "num_warps": [1, 2, 4, 8]}},
                         shapes=[{{"n": 1 << 16}}, {{"n": 1 << 20}}, {{"n": 1 << 18}}],
                         answer=lambda n: {{"x_ptr": torch.full((n,), 2.0, device="cuda")}}, max_fevals=6,
                         restore_value=["x_ptr"], progress=False, db={str(tmp_path / "results.db")!r})

results = run()
print(results.summary())
rows = results.rows
# The sizes after the first were tuned on the first one's workers.
assert [results[n].workers["reused"] for n in (1 << 16, 1 << 20, 1 << 18)] == [False, True, True]
assert [row["shape"] for row in rows] == [{{"n": 1 << 16}}, {{"n": 1 << 20}}, {{"n": 1 << 18}}]
# 2**18 is as near 2**16 as 2**20 on the log scale: the tie goes to the smaller.
assert [row["started_from"] for row in rows] == [None, {{"n": 1 << 16}}, {{"n": 1 << 16}}]
for later in (1 << 20, 1 << 18):
    measured = [row["config"] for row in results[later].results]
    assert any(all(config.get(k) == v for k, v in results[1 << 16].best_config.items()) for config in measured)
again = run()
assert all(row["measured"] == 0 for row in again.rows), again.summary()
print("shapes ok")
''')


VECTOR_ADD = """
extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def vector_arguments(n):
    import numpy as np

    a, b = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
    return [np.zeros_like(a), a, b, np.int32(n)]


def test_tune_kernel_with_shapes_needs_a_function_of_the_size_and_refuses_bad_lists_in_one_line():
    from kerntune import tune_kernel

    params = {"block_size_x": [64, 128]}
    with pytest.raises(TypeError, match="problem_size or arguments or answer is a function of a size's variables"):
        tune_kernel("vector_add", VECTOR_ADD, 1000, vector_arguments(1000), params, shapes=[{"n": 1000}])
    with pytest.raises(kerntune.ArgumentError, match="shapes name m, which arguments\\(n\\) does not take"):
        tune_kernel("vector_add", VECTOR_ADD, lambda m: m, vector_arguments, params, shapes=[{"m": 1000}])
    with pytest.raises(kerntune.ArgumentError, match="shapes is empty"):
        tune_kernel("vector_add", VECTOR_ADD, lambda n: n, vector_arguments, params, shapes=[])


@pytest.mark.gpu
def test_tune_kernel_tunes_every_size_each_learning_from_the_nearest_and_checks_its_answer(tmp_path):
    import numpy as np
    from kerntune import tune_kernel


    def arguments(n):
        np.random.seed(n)
        return vector_arguments(n)

    def expected(n):
        np.random.seed(n)
        values = vector_arguments(n)
        return [values[1] + values[2], None, None, None]

    results = tune_kernel("vector_add", VECTOR_ADD, lambda n: n, arguments, {"block_size_x": [32, 64, 128, 256, 512]},
                          answer=expected, shapes=[{"n": 1 << 20}, {"n": 1 << 24}], db=str(tmp_path / "kt.db"),
                          quiet=True)
    assert len(results) == 2
    rows, env = results[1 << 24]
    assert env["shape"]["started_from"] == {"n": 1 << 20} and len(rows) == 5
    assert "n=16777216" in results.summary()


def test_a_grid_is_of_the_size_when_it_takes_the_sizes_variables_by_name_else_of_the_launch():
    shape = {"M": 64, "N": 128}
    assert _shapes.of_size(lambda M, N: (M, N), shape)
    assert not _shapes.of_size(lambda META: (META["M"],), shape)
    assert not _shapes.of_size((4, 1, 1), shape)
    options = _shapes.size_options(None, None, lambda M, N: (M // 16,))
    assert options(shape) == {"answer": None, "edge_args": None, "grid": (4,)}


def test_a_many_shape_runs_results_export_as_vllms_table(tmp_path):
    results = _shapes.ShapeResults("fused_moe_kernel", ["M"])
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4,
              "num_stages": 3}
    for m in (1, 64):
        found = _shapes.Found(None, {**config, "BLOCK_SIZE_M": 16 if m == 1 else 64}, m)
        results._add({"M": m}, None, found)
    path = kerntune.export_table(results, tmp_path, experts=8, intermediate=7168, device_name="NVIDIA H100 80GB HBM3",
                                 triton_version="3.6.0")
    assert path.endswith("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json")
    table = json.loads(open(path).read())
    assert table["triton_version"] == "3.6.0" and table["64"]["BLOCK_SIZE_M"] == 64 and table["1"]["BLOCK_SIZE_M"] == 16
