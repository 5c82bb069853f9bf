"""kerntune.torch without a GPU: the space against Inductor's own, the GEMMs it takes and the
ones it leaves to Inductor, the entries, Inductor's key for them, the rule by which a template
replaces ATen's GEMM, and clean refusals. The store and the rule are tested without torch;
the rest needs torch (scripts/test.sh installs PyPI's build apart, which runs on a CPU)."""

import json
import random

import pytest

from kerntune import _kerntune


def test_a_template_replaces_aten_only_beyond_the_control_s_noise():
    aten = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98] * 5
    copy = [1.00, 0.99, 1.01, 1.01, 0.99, 1.00] * 5
    faster = [t * 0.9 for t in aten]
    verdict = json.loads(_kerntune.replaces_incumbent(aten, copy, faster, 6))
    assert verdict["replaces"] and verdict["verdict"] == "overtaken"
    assert verdict["contender"]["high"] < verdict["control"]["low"]
    level = json.loads(_kerntune.replaces_incumbent(aten, copy, list(copy), 6))
    assert not level["replaces"] and level["verdict"] == "tie"
    slower = json.loads(_kerntune.replaces_incumbent(aten, copy, [t * 1.2 for t in aten], 6))
    assert not slower["replaces"] and slower["verdict"] == "lead_holds"
    levels = [0.9, 1.1, 0.93, 1.07, 0.95, 1.05]  # the A/A control wanders by block
    noisy_copy = [t * levels[i // 5] for i, t in enumerate(aten)]
    noisy = json.loads(_kerntune.replaces_incumbent(aten, noisy_copy, [t * 0.97 for t in aten], 6))
    assert not noisy["replaces"], "3% inside a noisy control is not a win"


def test_a_check_ends_after_its_first_rounds_only_on_the_side_it_keeps(monkeypatch):
    torch = pytest.importorskip("torch")
    from kerntune.torch import _versus
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    def check(contender_factor: float, settled: str) -> dict:
        noise = random.Random(1)
        incumbent, contender = (lambda: 1.0), (lambda: contender_factor)
        verdict, _, _ = _versus._interleaved(lambda call: call() * noise.uniform(0.99, 1.01), incumbent, contender,
                                             0, 0, settled)
        return verdict

    # A template 20% slower than ATen is settled early; a level or a faster one is timed in full.
    slower = check(1.2, "lead_holds")
    assert slower["rounds"] == _versus.FIRST_ROUNDS and slower["verdict"] == "lead_holds"
    assert check(1.0, "lead_holds")["rounds"] == _versus.ROUNDS
    faster = check(0.8, "lead_holds")
    assert faster["rounds"] == _versus.ROUNDS and faster["replaces"]
    # A compiled graph well ahead of eager is settled early; one behind it is timed in full.
    assert check(0.8, "overtaken")["rounds"] == _versus.FIRST_ROUNDS
    behind = check(1.2, "overtaken")
    assert behind["rounds"] == _versus.ROUNDS and behind["verdict"] == "lead_holds"


def test_the_rule_refuses_rounds_that_do_not_pair():
    with pytest.raises(kerntune_errors().SpecError, match="same number of rounds"):
        _kerntune.replaces_incumbent([1.0] * 6, [1.0] * 5, [1.0] * 6, 6)
    with pytest.raises(kerntune_errors().SpecError, match="at least one per block"):
        _kerntune.replaces_incumbent([1.0] * 3, [1.0] * 3, [1.0] * 3, 6)


def kerntune_errors():
    import kerntune
    return kerntune


def test_a_store_without_choices_answers_none(tmp_path):
    assert json.loads(_kerntune.inductor_choices(str(tmp_path / "absent.db"))) == []
    with pytest.raises(kerntune_errors().StoreError, match="no tuning numbered 7"):
        _kerntune.save_inductor_choice(str(tmp_path / "new.db"), 7, "{}", "{}")


@pytest.fixture
def gemm():
    pytest.importorskip("torch")
    pytest.importorskip("torch._inductor.lookup_table")
    from kerntune.torch import _gemm
    return _gemm


def test_the_exhaustive_space_is_inductor_s_own(gemm):
    """Inductor's EXHAUSTIVE list, pruned and with its warps clamped by torch's own rules, is
    kerntune's space under its restrictions: the same 1,400 kernels."""
    from torch._inductor.template_heuristics.triton import CUDAConfigHeuristic

    heuristic = CUDAConfigHeuristic()
    theirs = {(c.block_m, c.block_n, c.block_k, c.group_m, c.num_stages, min(c.num_warps, c.block_m * c.block_n // 256))
              for c in heuristic._prune_reg_spill_configs(heuristic.exhaustive_configs)}
    ours = {(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["GROUP_M"], c["num_stages"], c["num_warps"])
            for c in json.loads(_kerntune.valid_configs(json.dumps(gemm.EXHAUSTIVE), gemm.RESTRICTIONS))}
    assert ours == theirs and len(ours) == 1400
    wide = json.loads(_kerntune.valid_configs(json.dumps(gemm.WIDE), gemm.RESTRICTIONS))
    assert len(wide) > len(ours)


def test_an_nn_linear_gemm_is_taken_with_its_transposed_weight(gemm):
    import torch

    problem = gemm.problem_of("mm", ((2048, 4096), (4096, 11008)), ((4096, 1), (1, 4096)),
                              (torch.bfloat16, torch.bfloat16))
    assert problem == gemm.Problem("mm", 2048, 11008, 4096, (4096, 1), (1, 4096), "bfloat16")
    constants = gemm.constants(problem)
    assert constants["PLAIN_A"] and constants["PLAIN_B"]
    assert (constants["stride_bk"], constants["stride_bn"]) == (1, 4096)
    addmm = gemm.problem_of("addmm", ((2048, 11008), (2048, 4096), (4096, 11008)),
                            ((0, 1), (4096, 1), (1, 4096)), (torch.float16,) * 3)
    assert (addmm.op, addmm.M, addmm.N, addmm.K, addmm.dtype) == ("addmm", 2048, 11008, 4096, "float16")


def test_gemms_kerntune_does_not_tune_are_left_to_inductor(gemm):
    import torch

    bf16 = (torch.bfloat16, torch.bfloat16)
    assert gemm.problem_of("scaled_mm", ((64, 64), (64, 64)), ((64, 1), (1, 64)), bf16) is None
    assert gemm.problem_of("mm", ((64, 64), (64, 64)), ((64, 1), (64, 1)), (torch.float32,) * 2) is None
    assert gemm.problem_of("mm", ((64, 32), (64, 64)), ((32, 1), (64, 1)), bf16) is None, "K disagrees"
    assert gemm.problem_of("mm", ((64, 64), (64, 64)), ((128, 2), (64, 1)), bf16) is None, "no unit stride"
    assert gemm.problem_of("mm", ((0, 64), (64, 64)), ((64, 1), (64, 1)), bf16) is None, "empty"


def test_an_entry_names_the_template_s_parameters_and_its_k_masks(gemm):
    problem = gemm.Problem("mm", 2048, 4096, 11008, (11008, 1), (1, 11008), "bfloat16")
    config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_stages": 3, "num_warps": 8}
    entry = gemm.entry(problem, config, "abc")
    assert entry == {"template_id": "triton::mm", **config, "EVEN_K": True, "USE_FAST_ACCUM": False,
                     "ACC_TYPE": "tl.float32", "hint_override": None, "template_hash": "abc"}
    assert "ALLOW_TF32" not in entry, "Inductor passes it itself: a second one fails its compile"
    odd = problem._replace(K=11000)
    assert gemm.entry(odd, {**config, "BLOCK_K": 64}, None)["EVEN_K"] is False
    assert "template_hash" not in gemm.entry(odd, config, None)
    assert gemm.aten_entry(problem) == {"template_id": "aten::mm"}
    assert gemm.aten_entry(problem._replace(op="addmm")) == {"template_id": "aten::addmm"}


def test_inductor_s_key_for_the_gemm_reads_as_the_problem(gemm):
    """The key Inductor's lookup builds from a GEMM's inputs (torch's own function) carries
    the shapes and strides kerntune tunes at."""
    import torch
    from torch._inductor.lookup_table import LookupTableChoices

    class Inputs:
        _scalars = {"alpha": 1, "beta": 1}

        def dtypes(self):
            return (torch.bfloat16,) * 3

        def shapes_hinted(self):
            return ((2048, 11008), (2048, 4096), (4096, 11008))

        def strides_hinted(self):
            return ((0, 1), (4096, 1), (1, 4096))

    key = LookupTableChoices._generate_kernel_inputs_key(Inputs())
    assert key == ("((torch.bfloat16, [2048, 11008], [0, 1]), (torch.bfloat16, [2048, 4096], [4096, 1]), "
                   "(torch.bfloat16, [4096, 11008], [1, 4096]))+alpha=1&beta=1")
    inputs = Inputs()
    problem = gemm.problem_of("addmm", inputs.shapes_hinted(), inputs.strides_hinted(), inputs.dtypes())
    assert (problem.M, problem.N, problem.K, problem.stride_b) == (2048, 11008, 4096, (1, 4096))


def test_without_a_gpu_compile_says_so_in_one_line(gemm):
    import torch

    import kerntune
    import kerntune.torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(kerntune.NoGpuError, match="needs a CUDA GPU"):
        kerntune.torch.compile(torch.nn.Linear(4, 4))
    with pytest.raises(kerntune.NoGpuError, match="needs a CUDA GPU"):
        kerntune.torch.tune(torch.nn.Linear(4, 4), torch.randn(2, 4))


def test_bad_options_are_refused_in_one_line(gemm, tmp_path):
    import torch

    import kerntune.torch
    from kerntune._errors import ArgumentError, ArgumentTypeError

    with pytest.raises(ArgumentTypeError, match="takes no mode="):
        kerntune.torch.compile(torch.nn.Linear(4, 4), mode="max-autotune")
    bad = tmp_path / "table.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ArgumentError, match="not a lookup table"):
        kerntune.torch._table_of(bad)
    with pytest.raises(ArgumentError, match="cannot be read"):
        kerntune.torch._table_of(tmp_path / "absent.json")


def test_a_table_saves_as_inductor_s_lookup_table(gemm, tmp_path):
    import kerntune.torch

    entry = {"template_id": "triton::mm", "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8,
             "num_stages": 4, "num_warps": 4, "EVEN_K": True, "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32",
             "hint_override": None}
    rows = [{"key": "NVIDIA H100+((...))+mm", "op": "mm", "entry": [entry], "evaluations": 60, "seconds": 12.5,
             "problem": {"M": 2048, "N": 11008, "K": 4096, "dtype": "bfloat16"}, "from_store": False,
             "versus": {"template_ms": 0.21, "aten_ms": 0.23, "contender": {"ratio": 0.91}}},
            {"key": "NVIDIA H100+((..))+mm", "op": "mm", "entry": [{"template_id": "aten::mm"}], "evaluations": 60,
             "seconds": 9.0, "problem": {"M": 16, "N": 4096, "K": 4096, "dtype": "bfloat16"}, "from_store": True,
             "versus": {"template_ms": 0.02, "aten_ms": 0.02, "contender": {"ratio": 1.01}}}]
    table = kerntune.torch.GemmTable(rows)
    path = table.save(tmp_path / "t.json")
    assert json.load(open(path)) == {"NVIDIA H100+((...))+mm": [entry], "NVIDIA H100+((..))+mm": [{"template_id": "aten::mm"}]}
    text = table.summary()
    assert "triton 64x128x32 g8 s4 w4" in text and "aten::mm" in text and "store" in text and "0.910" in text


def test_inductor_s_default_list_is_measured_first_and_lies_in_the_space(gemm):
    listed = gemm.inductor_default()
    space = json.loads(_kerntune.valid_configs(json.dumps(gemm.EXHAUSTIVE), gemm.RESTRICTIONS))
    assert len(listed) == 20
    assert all(config in space for config in listed)


class _Inputs:
    """What Inductor's lookup reads of a GEMM's inputs (an ``nn.Linear`` without bias)."""

    _scalars: dict = {}

    def device(self):
        import torch
        return torch.device("cuda", 0)

    def dtypes(self):
        import torch
        return (torch.bfloat16, torch.bfloat16)

    def shapes_hinted(self):
        return ((2048, 4096), (4096, 11008))

    def strides_hinted(self):
        return ((4096, 1), (1, 4096))


class _Template:
    def __init__(self, uid, src_hash=None):
        self.uid, self.src_hash = uid, src_hash


@pytest.fixture
def handler(gemm, monkeypatch):
    """kerntune's choices handler on a machine without a GPU: the device part of the key is
    a fixed name, and a session is current."""
    from kerntune.torch import _inductor

    monkeypatch.setattr(_inductor.LookupTableChoices, "_get_device_key", staticmethod(lambda device: "NVIDIA TEST"))
    monkeypatch.setattr(_inductor, "versions", lambda: {"device": "NVIDIA TEST", "torch": "t", "triton": "x"})

    def current(**settings):
        settings.setdefault("tune", False)
        session = _inductor.Session(db=None, table=None, max_fevals=None, time_limit=None,
                                    space="exhaustive", fallback=True, progress=False, **settings)
        monkeypatch.setattr(_inductor._local, "session", session, raising=False)
        return session

    return _inductor.KerntuneChoices(), current


def test_capturing_lists_each_gemm_once_and_keeps_only_aten_s_choice(handler):
    choices, current = handler
    session = current(capturing=True)
    templates = [_Template("aten::mm"), _Template("triton::mm", "hash-of-the-template")]
    for _ in range(2):
        offered = {"aten::mm": iter(["aten's"]), "triton::mm": iter(["t1", "t2"])}
        picked = choices._finalize_template_configs(offered, _Inputs(), templates, "mm")
        assert picked == ["aten's"], "one choice: Inductor benchmarks nothing"
    assert len(session.met) == 1
    key, problem, template_hash = session.met[0]
    assert key == ("NVIDIA TEST+((torch.bfloat16, [2048, 4096], [4096, 1]), "
                   "(torch.bfloat16, [4096, 11008], [1, 4096]))+mm")
    assert (problem.M, problem.N, problem.K, template_hash) == (2048, 11008, 4096, "hash-of-the-template")


def test_a_gemm_inductor_offers_no_triton_template_for_is_left_to_it(handler):
    choices, current = handler
    session = current(capturing=True)
    choices._finalize_template_configs({"aten::mm": iter(["aten's"])}, _Inputs(), [_Template("aten::mm")], "mm")
    assert session.met == []


def test_stored_answers_of_another_gpu_or_template_are_not_used(handler, tmp_path, monkeypatch):
    from kerntune.torch import _inductor

    choices, current = handler
    session = current()
    key = "NVIDIA TEST+((...))+mm"
    entry = [{"template_id": "triton::mm", "template_hash": "old"}]
    monkeypatch.setattr(session, "_stored", {key: {"key": key, "entry": entry}})
    problem = _inductor._gemm.Problem("mm", 64, 64, 64, (64, 1), (64, 1), "bfloat16")
    session.meet(key, problem, "new")
    assert key not in session.table, "a changed template ignores the stored entry"
    session.meet(key, problem, "old")
    assert session.table[key] == entry and session.rows[-1]["from_store"]
    other = current()
    stored_elsewhere = [{"key": key, "entry": entry, "device": "NVIDIA OTHER", "torch": "t", "triton": "x"}]
    monkeypatch.setattr(_inductor._kerntune, "inductor_choices", lambda db: json.dumps(stored_elsewhere))
    assert other.stored() == {}, "another GPU's answers are not this one's"


def test_a_batched_gemm_is_taken_for_inductor_s_bmm_template(gemm):
    import torch

    bf16 = (torch.bfloat16,) * 3
    problem = gemm.problem_of("baddbmm", ((8, 128, 64), (8, 128, 256), (8, 256, 64)),
                              ((0, 64, 1), (32768, 256, 1), (16384, 1, 256)), bf16)
    assert (problem.Q, problem.M, problem.N, problem.K, problem.batched) == (8, 128, 64, 256, True)
    assert problem.kernel is gemm.inductor_bmm and problem.template == "triton::bmm"
    assert gemm.entry(problem, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_stages": 3,
                                "num_warps": 4}, None)["template_id"] == "triton::bmm"
    assert gemm.aten_entry(problem) == {"template_id": "aten::baddbmm"}
    constants = gemm.constants(problem)
    assert (constants["stride_aq"], constants["stride_bq"], constants["stride_cq"]) == (32768, 16384, 128 * 64)
    assert gemm.grid(problem)({"BLOCK_M": 64, "BLOCK_N": 64}) == (2, 8)
    assert gemm.problem_of("bmm", ((8, 128, 256), (4, 256, 64)), ((32768, 256, 1), (16384, 64, 1)), bf16[:2]) is None, \
        "batches differ"
    assert gemm.problem_of("mm", ((8, 128, 256), (8, 256, 64)), ((32768, 256, 1), (16384, 64, 1)), bf16[:2]) is None


@pytest.mark.parametrize("batched", [False, True])
def test_the_kernels_compile_for_hopper_without_a_gpu(gemm, batched):
    import kerntune

    problem = gemm.Problem("bmm" if batched else "mm", 128, 256, 96, (128 * 96, 96, 1)[-3 if batched else -2:],
                           (96 * 256, 1, 96)[-3 if batched else -2:], "bfloat16", 4 if batched else 1)
    batch = (4,) if batched else ()
    args = {"A": kerntune.Tensor("bfloat16", (*batch, 128, 96)), "B": kerntune.Tensor("bfloat16", (*batch, 96, 256)),
            "C": kerntune.Tensor("bfloat16", (*batch, 128, 256)), **gemm.constants(problem)}
    configs = [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_stages": 3, "num_warps": 4},
               {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_stages": 2, "num_warps": 4}]
    compiled = kerntune.compile(problem.kernel, args, configs=configs, compile_workers=1)
    assert [c["status"] for c in compiled] == ["compiled", "compiled"], compiled


def test_a_gemm_kerntune_cannot_tune_is_left_to_inductor_with_a_warning(handler, monkeypatch):
    import kerntune
    from kerntune.torch import _inductor

    choices, current = handler
    session = current(tune=True)

    def cannot(*args, **kwargs):
        raise kerntune.BackendError("cannot start the benchmark worker: no such file")

    monkeypatch.setattr(session, "tune_one", cannot)
    problem = _inductor._gemm.Problem("mm", 64, 64, 64, (64, 1), (64, 1), "bfloat16")
    with pytest.warns(UserWarning, match="mm 64x64x64 bfloat16 is left to Inductor: cannot start"):
        session.meet("NVIDIA TEST+((...))+mm", problem, None)
    assert session.table == {}, "no entry: Inductor's own choice, never a broken compile"


def test_example_inputs_are_given_one_way(gemm):
    import torch

    import kerntune.torch
    from kerntune._errors import ArgumentTypeError

    model = torch.nn.Linear(4, 4)
    with pytest.raises(ArgumentTypeError, match="not both"):
        kerntune.torch.tune(model, torch.randn(2, 4), inputs=[(torch.randn(2, 4),)])
    with pytest.raises(ArgumentTypeError, match="a list of argument tuples"):
        kerntune.torch.tune(model, inputs=[torch.randn(2, 4)])


def test_the_stored_answers_of_a_named_gpu_are_listed_and_exported_without_one(gemm, tmp_path, kerntune_cli):
    import subprocess
    import sys

    import torch
    import triton

    db = tmp_path / "results.db"
    subprocess.run([kerntune_cli, "simulate", "--max-fevals", "3", "--db", str(db), "--json"], check=True,
                   capture_output=True)
    entry = [{"template_id": "aten::mm"}]
    choice = {"key": "NVIDIA TEST+((...))+mm", "device": "NVIDIA TEST", "torch": torch.__version__,
              "triton": triton.__version__, "op": "mm", "entry": entry, "evaluations": 60, "seconds": 7.5,
              "problem": {"M": 64, "N": 64, "K": 64, "dtype": "bfloat16"},
              "versus": {"template_ms": 0.011, "aten_ms": 0.010, "contender": {"ratio": 1.1}}}
    _kerntune.save_inductor_choice(str(db), 1, "{}", json.dumps(choice))
    _kerntune.save_inductor_choice(str(db), 1, json.dumps({"x": 1}), json.dumps({**choice, "torch": "1.0"}))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "kerntune.torch", *args], capture_output=True, text=True)

    listed = cli("stored", "--db", str(db), "--device", "NVIDIA TEST", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [row["key"] for row in json.loads(listed.stdout)] == [choice["key"]], "another torch's answer is not used"
    out = tmp_path / "table.json"
    written = cli("export", str(out), "--db", str(db), "--device", "NVIDIA TEST")
    assert written.returncode == 0 and "1 GEMMs written" in written.stdout
    assert json.loads(out.read_text()) == {choice["key"]: entry}
    other = cli("stored", "--db", str(db), "--device", "NVIDIA OTHER")
    assert other.returncode == 1 and "no GEMM answers for NVIDIA OTHER" in other.stderr
    if not torch.cuda.is_available():
        unnamed = cli("stored", "--db", str(db))
        assert unnamed.returncode == 2 and "give --device NAME" in unnamed.stderr and "Traceback" not in unnamed.stderr


def test_listing_a_model_s_gemms_compiles_through_kerntune_s_backend_and_benchmarks_nothing(gemm, tmp_path,
                                                                                            monkeypatch):
    """torch's CPU build runs the whole path but the tuning: Inductor takes kerntune's backend
    and settings and its choices handler, and the capture keeps ATen's GEMMs, so nothing is
    benchmarked; a CPU GEMM has no lookup key, so kerntune takes none."""
    import shutil

    import torch
    from torch._inductor import select_algorithm

    import kerntune.torch
    from kerntune.torch._inductor import Backend, Session

    if shutil.which("g++") is None:
        pytest.skip("Inductor's CPU kernels need g++")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    session = Session(db=str(tmp_path / "r.db"), tune=True, table=None, max_fevals=None, time_limit=None,
                      space="exhaustive", fallback=True, progress=False, capturing=True)
    benchmarked = []
    select_algorithm.add_feedback_saver(lambda timings, name, *rest: benchmarked.append(name))
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
    x = torch.randn(32, 64)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            compiled = torch.compile(model, backend=Backend(session, kerntune.torch.CAPTURE))
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    finally:
        torch._dynamo.reset()
    assert benchmarked == []
    assert session.met == [] and session.table == {}


def test_a_backward_pass_is_compiled_with_kerntune_s_session_too(gemm, tmp_path, monkeypatch):
    """Inductor compiles a graph's backward at the first backward pass, after compile_fx has
    returned: that compile, like the forward's, runs with the session current (so that its
    GEMMs are kerntune's), the forward's compile holds the workers for it, and the gradients
    are right."""
    import shutil

    import torch
    from torch._inductor import compile_fx as inductor_compile_fx

    import kerntune.torch
    from kerntune.torch import _inductor

    if shutil.which("g++") is None:
        pytest.skip("Inductor's CPU kernels need g++")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    session = _inductor.Session(db=str(tmp_path / "r.db"), tune=True, table=None, max_fevals=None, time_limit=None,
                                space="exhaustive", fallback=True, progress=False, capturing=True)
    inner = inductor_compile_fx.compile_fx_inner
    current = []

    def compile_inner(*args, **kwargs):
        current.append(_inductor._current())
        return inner(*args, **kwargs)

    monkeypatch.setattr(inductor_compile_fx, "compile_fx_inner", compile_inner)
    holds = []
    monkeypatch.setattr(_inductor._crew, "hold", holds.append)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, backend=_inductor.Backend(session, kerntune.torch.CAPTURE))
        y = compiled(x)
        assert len(current) == 1, "the forward is compiled; the backward waits for the first backward pass"
        y.square().sum().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).square().sum().backward()
    finally:
        torch._dynamo.reset()
    assert current == [session, session]
    assert holds == [_inductor.BACKWARD_WAIT_S], "the forward's compile holds the workers for the backward's"
    for mine, eager in zip(got, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(mine, eager, atol=1e-4, rtol=1e-4)


def test_workers_start_ahead_only_where_tuning_is_likely(monkeypatch, tmp_path):
    """compile() starts kerntune's workers ahead (kerntune._crew) unless nothing is to tune,
    a table is shipped, or the store answers for this GPU already (a second process), where
    they would only take CPU from Inductor's compile."""
    pytest.importorskip("torch")
    from kerntune.torch import _inductor

    started = []
    monkeypatch.setattr(_inductor._crew, "prestart", lambda *given: started.append(given))

    def session(tune=True, table=None):
        return _inductor.Session(db=str(tmp_path / "r.db"), tune=tune, table=table, max_fevals=60, time_limit=None,
                                 space="exhaustive", fallback=True, progress=False)

    session(tune=False).prestart()
    session(table={"key": [{"template_id": "aten::mm"}]}).prestart()
    answered = session()
    answered._stored = {"key": {"entry": [{"template_id": "aten::mm"}]}}
    answered.prestart()
    assert started == []
    empty = session()
    empty._stored = {}
    monkeypatch.setattr(_inductor.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(_inductor.torch.cuda, "get_device_capability", lambda device: (9, 0))
    empty.prestart()
    assert len(started) == 1
    commands, request = started[0]
    assert "--triton-arch" in commands["compile_worker"] and "90" in commands["compile_worker"]
    assert request["devices"] == "0" and request["search"]["max_fevals"] == 60


def test_a_gemm_that_learns_from_one_tuned_before_it_gets_fewer_evaluations(tmp_path):
    """The session's first GEMM gets max_fevals; one that learns from it (the same operation
    kind and element type) gets LEARNING_SHARE of them; a batched GEMM or another element type
    learns nothing from it and gets them all; max_fevals=None stays unlimited."""
    pytest.importorskip("torch")
    from kerntune.torch import _gemm, _inductor

    def session(max_fevals=60):
        return _inductor.Session(db=str(tmp_path / "r.db"), tune=True, table=None, max_fevals=max_fevals,
                                 time_limit=None, space="exhaustive", fallback=True, progress=False)

    def mm(m, n, k, dtype="bfloat16"):
        return _gemm.Problem("mm", m, n, k, (k, 1), (1, k), dtype)

    tuned = session()
    first = mm(2048, 4096, 4096)
    assert tuned.budget(tuned.transfer(first)) == 60
    tuned._tuned.append({"shape": first.shape, "tuning": 1})
    assert tuned.budget(tuned.transfer(mm(2048, 14336, 4096))) == round(60 * _inductor.LEARNING_SHARE) < 60
    assert tuned.budget(tuned.transfer(mm(2048, 14336, 4096, "float16"))) == 60
    batched = _gemm.Problem("bmm", 512, 512, 64, (262144, 512, 1), (32768, 64, 1), "bfloat16", 8)
    assert tuned.budget(tuned.transfer(batched)) == 60
    unlimited = session(max_fevals=None)
    unlimited._tuned.append({"shape": first.shape, "tuning": 1})
    assert unlimited.budget(unlimited.transfer(mm(2048, 14336, 4096))) is None


def test_a_graph_that_writes_into_a_tensor_is_not_run_again_to_time_it(gemm):
    """The check against eager runs a compiled graph and Dynamo's graph several times on the
    inputs of the first call: only where that changes nothing the caller holds (no in-place
    method or function, inplace=True, out= or item assignment), only on the GPU, and not
    while recording autograd."""
    import operator

    import torch
    import torch.nn.functional as F

    from kerntune.torch._inductor import _mutating_node, _not_timed_because

    def traced(function):
        return torch.fx.symbolic_trace(function)

    def pure(x, w):
        return F.gelu(F.linear(x, w)).requires_grad_(False)

    def adds_in_place(x, w):
        return F.linear(x, w).add_(1)

    def relu_in_place(x, w):
        return F.relu(F.linear(x, w), inplace=True)

    def writes_out(x, w):
        return torch.add(x, w, out=x)

    def recorded(target, *args):  # a graph of one call, as Dynamo records x[0] = 0 or x += w
        graph = torch.fx.Graph()
        x = graph.placeholder("x")
        graph.call_function(target, (x, *args))
        graph.output(x)
        return torch.fx.GraphModule(torch.nn.Module(), graph)

    def index_adds(x, w):  # an operator whose schema says it writes (a custom op's would too)
        return torch.ops.aten.index_add_(x, 0, torch.arange(2), w[:2])

    def reduces(x, w):  # a collective: extra calls on one rank would wait for the others
        return torch.ops._c10d_functional.all_reduce(x, "sum", "0")

    assert _mutating_node(traced(pure)) is None
    assert _mutating_node(traced(lambda x, w: torch.ops.aten.mm(x, w))) is None
    for function in (adds_in_place, relu_in_place, writes_out, index_adds, reduces):
        assert _mutating_node(traced(function)) is not None, function.__name__
    assert _mutating_node(recorded(operator.setitem, 0, 0)) is not None
    assert _mutating_node(recorded(operator.iadd, 1)) is not None
    assert _mutating_node(recorded(operator.add, 1)) is None
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    assert "not all on the GPU" in _not_timed_because(traced(pure), [x, w])


def test_a_check_against_eager_that_fails_leaves_the_graph_compiled_with_a_warning(handler, monkeypatch):
    """Whatever goes wrong while timing a graph against eager (here: no GPU), the compile
    goes on with the compiled graph and says why it was not timed."""
    from kerntune.torch import _inductor

    _, current = handler
    session = current(tune=False)
    monkeypatch.setattr(_inductor, "_not_timed_because", lambda graph, inputs: None)
    monkeypatch.setattr(_inductor._versus, "versus_eager", lambda compiled, eager: 1 / 0)

    def compiled(*inputs):
        return inputs

    class Graph:
        def forward(self, *inputs):
            return inputs

    with pytest.warns(UserWarning, match="stays compiled"):
        assert _inductor.faster_of(Graph(), [1], compiled, session) is compiled
    (graph,) = session.graphs
    assert graph["kept"] == "compiled" and not graph["timed"] and "the check failed" in graph["reason"]
