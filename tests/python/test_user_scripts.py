"""Triton users' own code, compiled without a GPU: a script shaped like Triton's matmul
tutorial (top-level code, no main guard, ``@kerntune.autotune(configs=..., key=...)`` where
``@triton.autotune`` was) runs as a file, from standard input and with ``-c``, and the
compile workers never run it again; kernels defined in functions, helpers defined after the
kernel, constexpr globals and string constexprs passed at the call site all compile."""

import json
import subprocess
import sys
import tempfile
import textwrap

import pytest
import triton
import triton.language as tl

import kerntune
from kerntune import Tensor

# A tutorial-shaped script. Every run of its top-level code adds a line to RUNS_FILE, so a
# worker that imported the script would show up as a second line.
SCRIPT = textwrap.dedent('''
    import json
    import triton
    import triton.language as tl
    import kerntune

    with open(RUNS_FILE, "a") as runs:
        runs.write("ran\\n")

    GROUP = tl.constexpr(4)


    def configs():
        return [
            triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_stages=2, num_warps=4),
            triton.Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32}, num_stages=3, num_warps=4),
            triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32}, num_stages=2, num_warps=2),
        ]


    @kerntune.autotune(configs=configs(), key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ACTIVATION: tl.constexpr):
        pid = tl.program_id(0)
        blocks_n = tl.cdiv(N, BLOCK_N)
        pid_m = (pid // (blocks_n * GROUP)) * GROUP + pid % GROUP
        pid_n = (pid % (blocks_n * GROUP)) // GROUP
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        rk = tl.arange(0, BLOCK_K)
        a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            acc = tl.dot(tl.load(a, mask=rk[None, :] < K - k * BLOCK_K, other=0.0),
                         tl.load(b, mask=rk[:, None] < K - k * BLOCK_K, other=0.0), acc)
            a += BLOCK_K * stride_ak
            b += BLOCK_K * stride_bk
        if ACTIVATION == "leaky_relu":
            acc = leaky_relu(acc)
        c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        tl.store(c, acc.to(tl.float16))


    @triton.jit
    def leaky_relu(x):
        return tl.where(x >= 0, x, 0.01 * x)


    size = 256
    args = dict(a_ptr=kerntune.Tensor("float16", (size, size)), b_ptr=kerntune.Tensor("float16", (size, size)),
                c_ptr=kerntune.Tensor("float16", (size, size)), M=size, N=size, K=size,
                stride_am=size, stride_ak=1, stride_bk=size, stride_bn=1, stride_cm=size, stride_cn=1,
                ACTIVATION="leaky_relu")
    outcomes = kerntune.compile(matmul_kernel, args, configs=matmul_kernel.configs, compile_workers=2)
    print(json.dumps([[o["status"], o.get("reason")] for o in outcomes]))
''')


def run_script(tmp_path, how):
    runs = tmp_path / "runs.txt"
    source = f"RUNS_FILE = {str(runs)!r}\n" + SCRIPT
    path = tmp_path / "tutorial_matmul.py"
    path.write_text(source)
    command = {"file": [sys.executable, str(path)], "stdin": [sys.executable, "-"], "-c": [sys.executable, "-c", source]}[how]
    with open(path) as stdin:  # python - < tutorial_matmul.py
        out = subprocess.run(command, stdin=stdin if how == "stdin" else subprocess.DEVNULL, capture_output=True, text=True,
                             cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    statuses = json.loads(out.stdout.strip().splitlines()[-1])
    return statuses, runs.read_text().splitlines()


@pytest.mark.parametrize("how", ["file", "stdin", "-c"])
def test_a_tutorial_shaped_script_compiles_and_runs_its_top_level_code_once(tmp_path, how):
    statuses, runs = run_script(tmp_path, how)
    assert statuses == [["compiled", None]] * 3, statuses
    assert runs == ["ran"], "a compile worker ran the user's script again"


def test_kernels_defined_in_ipython_cells_compile(tmp_path):
    """As in a notebook: the kernel and the call in separate cells of one IPython shell."""
    pytest.importorskip("IPython", reason="IPython is not installed (scripts/requirements-test.txt installs it)")
    cells = [
        "import triton, triton.language as tl, kerntune",
        textwrap.dedent('''
            @triton.jit
            def double(x_ptr, n, BLOCK: tl.constexpr):
                offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)
        '''),
        "outcomes = kerntune.compile(double, {'x_ptr': kerntune.Tensor('float32', (1000,)), 'n': 1000}, {'BLOCK': [64, 128]}, compile_workers=2)",
        "print('STATUSES', [o['status'] for o in outcomes])",
    ]
    driver = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        f"for cell in {cells!r}:\n"
        "    assert shell.run_cell(cell).success, cell\n"
    )
    out = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "STATUSES ['compiled', 'compiled']" in out.stdout, out.stdout


def test_a_kernel_defined_inside_a_function_compiles_with_its_closure():
    def make(scale_value):
        SCALE = tl.constexpr(scale_value)

        @triton.jit
        def scale(x_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offsets, mask=offsets < n)
            if MODE == "double":
                x = x * 2
            tl.store(x_ptr + offsets, x * SCALE, mask=offsets < n)

        return scale

    kernel = make(3)
    outcomes = kerntune.compile(kernel, {"x_ptr": Tensor("float32", (1000,)), "n": 1000, "MODE": "double"},
                                {"BLOCK": [64, 128]}, compile_workers=2)
    assert [o["status"] for o in outcomes] == ["compiled", "compiled"], outcomes


def test_configs_and_params_are_both_search_spaces():
    import matmul

    configs = [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=w)
               for m, w in ((64, 4), (128, 8))]
    listed = kerntune.compile(matmul.matmul_kernel, matmul_args(), configs=configs, compile_workers=2)
    assert [(o["config"]["BLOCK_SIZE_M"], o["config"]["num_warps"]) for o in listed] == [(64, 4), (128, 8)]
    assert all(o["status"] == "compiled" for o in listed), listed
    with pytest.raises(TypeError, match="not both"):
        kerntune.compile(matmul.matmul_kernel, matmul_args(), {"BLOCK_SIZE_M": [64]}, configs=configs)
    with pytest.raises(TypeError, match="give the search space"):
        kerntune.compile(matmul.matmul_kernel, matmul_args())


def matmul_args(size=512):
    return dict(
        a_ptr=Tensor("float16", (size, size)), b_ptr=Tensor("float16", (size, size)), c_ptr=Tensor("float16", (size, size)),
        M=size, N=size, K=size, stride_am=size, stride_ak=1, stride_bk=size, stride_bn=1, stride_cm=size, stride_cn=1,
    )


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def test_autotune_takes_tritons_whole_signature():
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256) for w in (2, 4)]
    seen = {}

    def early_config_prune(configs, named_args, **kwargs):
        seen["named_args"] = sorted(named_args)
        return [c for c in configs if c.num_warps == 4]

    def perf_model(**kwargs):
        return -kwargs["BLOCK"]

    tuned = kerntune.autotune(
        configs, ["n"], prune_configs_by={"early_config_prune": early_config_prune, "perf_model": perf_model, "top_k": 2},
        reset_to_zero=["y_ptr"], restore_value=["x_ptr"], pre_hook=None, post_hook=None, warmup=25, rep=100,
        use_cuda_graph=False, do_bench=None, cache_results=True,
    )(_copy)
    assert [c.kwargs["BLOCK"] for c in tuned.configs] == [64, 64, 128, 128, 256, 256]
    assert tuned.fn is _copy and callable(tuned.run) and tuned.cache == {} and tuned.best_config is None
    kept = tuned.prune_configs({"x_ptr": None, "y_ptr": None, "n": 4096})
    assert seen["named_args"] == ["n", "x_ptr", "y_ptr"]
    assert [(c["BLOCK"], c["num_warps"]) for c in kept] == [(256, 4), (128, 4)]


def test_early_config_prune_gets_the_launchs_keyword_arguments_as_tritons_does():
    """Triton's tutorial 09 prunes on a flag given by keyword at the launch
    (``kwargs["FLATTEN"]``): Triton passes the positional arguments by name and the keyword
    ones (with ``grid`` and ``warmup``) as keywords."""
    seen = {}

    def early_config_prune(configs, named_args, **kwargs):
        seen.update(named=sorted(named_args), keywords=sorted(kwargs))
        return [c for c in configs if c.kwargs["BLOCK"] <= kwargs["LIMIT"]]

    tuned = kerntune.autotune([triton.Config({"BLOCK": b}) for b in (64, 128, 256)], ["n"],
                              prune_configs_by={"early_config_prune": early_config_prune})(_copy)
    kept = tuned.prune_configs({"x_ptr": None, "y_ptr": None, "n": 4096, "LIMIT": 128},
                               {"LIMIT": 128, "grid": (1,), "warmup": False})
    assert seen == {"named": ["n", "x_ptr", "y_ptr"], "keywords": ["LIMIT", "grid", "warmup"]}
    assert [c["BLOCK"] for c in kept] == [64, 128]


def test_a_key_that_names_no_argument_is_ignored_as_triton_ignores_it_with_a_warning():
    """Triton's tutorial 08 as published keys on a misspelt argument name."""
    with pytest.warns(kerntune.KeyNameWarning, match=r"key names \['gropup_n'\], which are not arguments of _copy"):
        tuned = kerntune.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n", "gropup_n"])(_copy)
    assert tuned._key({"x_ptr": None, "y_ptr": None, "n": 7}) == (7,)


def test_autotune_refuses_bad_arguments_when_it_decorates():
    with pytest.raises(TypeError, match="unexpected keyword arguments nonsense"):
        kerntune.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"], nonsense=1)
    with pytest.raises(TypeError, match="triton.Config"):
        kerntune.autotune(configs=["BLOCK=64"], key=["n"])(_copy)
    with pytest.raises(TypeError, match="needs key"):
        kerntune.autotune(configs=[triton.Config({"BLOCK": 64})])
    with pytest.raises(ValueError, match="has no values"):
        kerntune.autotune(params={"BLOCK": []}, key="n")(_copy)
    # A single string is one name or one value, never its characters.
    tuned = kerntune.autotune(params={"BLOCK": 64}, key="n")(_copy)
    assert tuned.keys == ["n"] and [c.kwargs for c in tuned.configs] == [{"BLOCK": 64}]


def test_helpers_from_other_modules_and_every_kind_of_call_site_constexpr_compile(tmp_path, monkeypatch):
    (tmp_path / "kerntune_test_helpers.py").write_text(textwrap.dedent('''
        import triton
        import triton.language as tl

        @triton.jit
        def twice(x):
            return x * 2

        @triton.jit
        def plus_one(x):
            return x + 1
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import kerntune_test_helpers
    from kerntune_test_helpers import plus_one

    @triton.jit
    def combine(x_ptr, n, BLOCK: tl.constexpr, FLAG: tl.constexpr, SCALE: tl.constexpr, NOTHING: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets, mask=offsets < n)
        if FLAG:
            x = kerntune_test_helpers.twice(x)
        if NOTHING is None:
            x = plus_one(x)
        tl.store(x_ptr + offsets, x * SCALE, mask=offsets < n)

    outcomes = kerntune.compile(combine, {"x_ptr": Tensor("float32", (1000,)), "n": 1000, "FLAG": True, "SCALE": 0.5, "NOTHING": None},
                                {"BLOCK": [64, 128]}, compile_workers=2)
    assert [o["status"] for o in outcomes] == ["compiled", "compiled"], outcomes


def test_a_kernel_using_a_plain_function_of_main_is_refused_with_its_name():
    from kerntune._kernel_source import CaptureError, capture

    def not_a_kernel(x):
        return x

    @triton.jit
    def uses_plain(x_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, not_a_kernel(tl.load(x_ptr + offsets)))

    with pytest.raises(CaptureError, match="not_a_kernel"):
        capture(uses_plain)


def test_configs_that_leave_options_out_get_tritons_defaults():
    from kerntune._space import listed

    space = listed([{"BLOCK": 64, "num_warps": 8}, triton.Config({"BLOCK": 128}, maxnreg=128)], defaults={})
    assert space.rows == [{"BLOCK": 64, "num_warps": 8, "num_stages": 3, "num_ctas": 1, "maxnreg": 0},
                          {"BLOCK": 128, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": 128}]
    assert space.params == {"BLOCK": [64, 128], "num_warps": [8, 4], "num_stages": [3], "num_ctas": [1], "maxnreg": [0, 128]}


def test_compiling_leaves_no_temporary_files(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kerntune.compile(_copy, {"x_ptr": Tensor("float32", (256,)), "y_ptr": Tensor("float32", (256,)), "n": 256},
                     {"BLOCK": [64]}, compile_workers=1)
    assert list(tmp_path.iterdir()) == []
