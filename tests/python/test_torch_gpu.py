"""kerntune.torch on the GPU: torch.compile's GEMMs chosen by kerntune, kept in the store, and
answered without tuning by a second compile or a shipped table."""

import pytest

from conftest import child_processes

pytestmark = pytest.mark.gpu


def _model_and_input(bias: bool = False):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024, bias=bias), torch.nn.GELU(),
                                torch.nn.Linear(1024, 512, bias=bias)).cuda().to(torch.bfloat16).eval()
    return model, torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)


def _fresh_inductor(monkeypatch, tmp_path):
    import torch

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()


def _autotunings():
    """The GEMMs Inductor itself benchmarks from now on (its feedback hook sees each)."""
    from torch._inductor import select_algorithm

    seen = []
    select_algorithm.add_feedback_saver(lambda timings, name, *rest: seen.append(name))
    return seen


def test_compiled_model_tunes_each_gemm_once_then_answers_from_the_store(tmp_path, monkeypatch):
    import torch
    import kerntune.torch

    db = str(tmp_path / "results.db")
    model, x = _model_and_input()
    _fresh_inductor(monkeypatch, tmp_path)
    seen = _autotunings()
    with torch.no_grad():
        compiled = kerntune.torch.compile(model, db=db, max_fevals=12, progress=False)
        y = compiled(x)
        expected = model(x)
    torch.testing.assert_close(y, expected, atol=3e-2, rtol=3e-2)
    rows = compiled.kerntune.rows
    assert len(rows) == 2 and not any(r["from_store"] for r in rows), rows
    assert all(r["tuning"] is not None and r["evaluations"] > 0 for r in rows)
    for row in rows:
        entry = row["entry"][0]
        assert entry["template_id"] in ("triton::mm", "aten::mm")
        assert row["key"].startswith(torch.cuda.get_device_name() + "+")
        assert row["versus"]["aten_ms"] > 0 and row["versus"]["template_ms"] > 0
    assert seen == [], "Inductor benchmarked GEMMs itself"
    # Both GEMMs were tuned on workers started by compile(), which stopped with the compile.
    assert [r["phases"]["workers"]["reused"] for r in rows] == [True, True], [r["phases"] for r in rows]
    assert child_processes("kerntune._worker") == []

    # A second compile (a fresh Inductor cache, as in a new process) tunes nothing.
    _fresh_inductor(monkeypatch, tmp_path / "second")
    with torch.no_grad():
        again = kerntune.torch.compile(model, db=db, progress=False)
        torch.testing.assert_close(again(x), expected, atol=3e-2, rtol=3e-2)
    assert [r["from_store"] for r in again.kerntune.rows] == [True, True]
    assert [r["entry"] for r in again.kerntune.rows] == [r["entry"] for r in rows]
    assert seen == []
    assert len(kerntune.torch.stored(db)) == 2


def test_a_training_step_s_backward_gemms_are_tuned_too_and_answered_from_the_store(tmp_path, monkeypatch):
    """The backward pass's GEMMs (the weights' gradients: a transposed operand, K the batch)
    are kerntune's as the forward's are: tuned at the first backward pass on the workers the
    forward's compile held for them, Inductor benchmarking none, the gradients right; a
    second compile answers all from the store."""
    import torch
    import kerntune.torch

    db = str(tmp_path / "results.db")
    model, x = _model_and_input()
    model.train()
    _fresh_inductor(monkeypatch, tmp_path)
    seen = _autotunings()

    def step(run):
        model.zero_grad()
        run(x).float().square().mean().backward()
        return [p.grad.clone() for p in model.parameters()]

    compiled = kerntune.torch.compile(model, db=db, max_fevals=8, progress=False)
    got = step(compiled)
    rows = compiled.kerntune.rows
    assert len(rows) >= 4, [r["problem"] for r in rows]
    assert any(r["problem"]["K"] == x.shape[0] for r in rows), "a weight's gradient sums over the batch"
    assert all(r["tuning"] is not None and not r["from_store"] for r in rows)
    assert seen == [], "Inductor benchmarked GEMMs itself"
    # The forward's compile held its workers for the backward's, which stopped them.
    assert [r["phases"]["workers"]["reused"] for r in rows] == [True] * len(rows), [r["phases"] for r in rows]
    assert child_processes("kerntune._worker") == []
    for mine, eager in zip(got, step(model)):
        torch.testing.assert_close(mine, eager, atol=3e-2, rtol=3e-2)

    _fresh_inductor(monkeypatch, tmp_path / "second")
    again = kerntune.torch.compile(model, db=db, progress=False)
    step(again)
    assert len(again.kerntune.rows) == len(rows) and all(r["from_store"] for r in again.kerntune.rows)
    assert seen == []


def test_a_table_tuned_ahead_is_shipped_and_used_without_tuning(tmp_path, monkeypatch):
    import json

    import torch
    import kerntune.torch

    model, x = _model_and_input(bias=True)
    _fresh_inductor(monkeypatch, tmp_path)
    with torch.no_grad():
        table = kerntune.torch.tune(model, x, db=str(tmp_path / "a.db"), max_fevals=10, progress=False)
    assert {r["op"] for r in table.rows} == {"addmm"}, table.summary()
    path = table.save(tmp_path / "table.json")
    saved = json.load(open(path))
    assert set(saved) == {r["key"] for r in table.rows}
    assert all("+alpha=1&beta=1+addmm" in key for key in saved)

    _fresh_inductor(monkeypatch, tmp_path / "elsewhere")
    seen = _autotunings()
    with torch.no_grad():
        compiled = kerntune.torch.compile(model, db=str(tmp_path / "empty.db"), table=path, tune=False)
        torch.testing.assert_close(compiled(x), model(x), atol=3e-2, rtol=3e-2)
    assert seen == []
    assert not (tmp_path / "empty.db").exists() or len(kerntune.torch.stored(str(tmp_path / "empty.db"))) == 0


def test_an_entry_is_what_inductor_builds(tmp_path, monkeypatch):
    """The table's Triton entry reaches Inductor's generated code: its tile sizes are the ones
    in the compiled kernel's source."""
    import torch
    import kerntune.torch
    from torch._inductor.utils import run_and_get_code

    model, x = _model_and_input()
    _fresh_inductor(monkeypatch, tmp_path)
    with torch.no_grad():
        table = kerntune.torch.tune(model, x, db=str(tmp_path / "r.db"), max_fevals=10, fallback=False,
                                    progress=False)
        _fresh_inductor(monkeypatch, tmp_path / "built")
        compiled = kerntune.torch.compile(model, table=table.lookup_table, tune=False, db=str(tmp_path / "r.db"))
        _, code = run_and_get_code(compiled, x)
    source = "\n".join(code)
    for row in table.rows:
        entry = row["entry"][0]
        assert entry["template_id"] == "triton::mm"
        assert f"BLOCK_M : tl.constexpr = {entry['BLOCK_M']}" in source, source[:2000]


def test_a_model_without_a_gemm_is_said_to_have_nothing_to_tune(tmp_path, monkeypatch):
    import torch
    import kerntune.torch

    _fresh_inductor(monkeypatch, tmp_path)
    model = torch.nn.GELU()
    x = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.warns(UserWarning, match="no GEMM"):
        table = kerntune.torch.tune(model, x, db=str(tmp_path / "r.db"), progress=False)
    assert len(table) == 0
    compiled = kerntune.torch.compile(model, db=str(tmp_path / "r.db"), progress=False)
    torch.testing.assert_close(compiled(x), model(x))


def test_a_batched_gemm_gets_inductor_s_bmm_template(tmp_path, monkeypatch):
    import torch
    import kerntune.torch
    from torch._inductor.utils import run_and_get_code

    def scores(q, k):
        return torch.bmm(q, k.transpose(1, 2)).softmax(-1)

    q = torch.randn(16, 256, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(16, 256, 64, device="cuda", dtype=torch.bfloat16)
    _fresh_inductor(monkeypatch, tmp_path)
    with torch.no_grad():
        compiled = kerntune.torch.compile(scores, db=str(tmp_path / "r.db"), max_fevals=10, fallback=False,
                                          progress=False)
        out, code = run_and_get_code(compiled, q, k)
    torch.testing.assert_close(out, scores(q, k), atol=2e-2, rtol=2e-2)
    rows = compiled.kerntune.rows
    assert [(r["op"], r["problem"]["Q"]) for r in rows] == [("bmm", 16)], rows
    entry = rows[0]["entry"][0]
    assert entry["template_id"] == "triton::bmm"
    assert f"BLOCK_M : tl.constexpr = {entry['BLOCK_M']}" in "\n".join(code)


def test_the_gemms_of_every_batch_size_are_tuned_in_one_run_and_compiled_without_tuning(tmp_path, monkeypatch):
    import torch
    import kerntune.torch

    model, _ = _model_and_input()
    batches = [torch.randn(tokens, 512, device="cuda", dtype=torch.bfloat16) for tokens in (64, 256)]
    db = str(tmp_path / "r.db")
    _fresh_inductor(monkeypatch, tmp_path)
    with torch.no_grad():
        table = kerntune.torch.tune(model, inputs=[(x,) for x in batches], db=db, max_fevals=8, progress=False)
    assert sorted(r["problem"]["M"] for r in table.rows) == [64, 64, 256, 256], table.summary()
    assert all(not r["from_store"] for r in table.rows)
    assert [r["phases"]["workers"]["reused"] for r in table.rows] == [True, True, True, True]
    assert child_processes("kerntune._worker") == []
    seen = _autotunings()
    for x in batches:
        _fresh_inductor(monkeypatch, tmp_path / f"serve{x.shape[0]}")
        with torch.no_grad():
            compiled = kerntune.torch.compile(model, db=db, tune=False, dynamic=False)
            torch.testing.assert_close(compiled(x), model(x), atol=3e-2, rtol=3e-2)
        assert [r["from_store"] for r in compiled.kerntune.rows] == [True, True]
    assert seen == []


def _pointwise():
    import torch

    # Large enough (512 MB a tensor) that the GPU's work outlasts a call's host cost, which a
    # compiled graph's wrapper makes larger than eager's two launches.
    model = torch.nn.Sequential(torch.nn.GELU(), torch.nn.Tanh())
    return model, torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)


def test_each_compiled_graph_is_timed_against_eager_and_kept_where_not_slower(tmp_path, monkeypatch):
    import torch
    import kerntune.torch

    _fresh_inductor(monkeypatch, tmp_path)
    model, x = _pointwise()
    compiled = kerntune.torch.compile(model, db=str(tmp_path / "r.db"), progress=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (graph,) = compiled.kerntune.graphs
    assert graph["timed"] and graph["compiled_ms"] > 0 and graph["eager_ms"] > 0, graph
    # Inductor fuses the two pointwise kernels into one pass over the tensor: not slower.
    assert graph["kept"] == "compiled", graph


def test_a_compiled_graph_slower_than_eager_runs_eagerly(tmp_path, monkeypatch):
    """A compiled graph made three times as slow (each call runs it thrice) is timed against
    eager, found slower beyond noise, and replaced by Dynamo's graph run eagerly."""
    import torch
    import torch._inductor.compile_fx as inductor
    import kerntune.torch

    _fresh_inductor(monkeypatch, tmp_path)
    real = inductor.compile_fx

    def slowed(*args, **kwargs):
        compiled = real(*args, **kwargs)

        def thrice(*inputs):
            for _ in range(2):
                compiled(*inputs)
            return compiled(*inputs)

        return thrice

    monkeypatch.setattr(inductor, "compile_fx", slowed)
    model, x = _pointwise()
    compiled = kerntune.torch.compile(model, db=str(tmp_path / "r.db"), progress=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (graph,) = compiled.kerntune.graphs
    assert graph["kept"] == "eager" and graph["compiled_ms"] > graph["eager_ms"], graph
    torch._dynamo.reset()
    plain = kerntune.torch.compile(model, db=str(tmp_path / "r.db"), progress=False, eager_check=False)
    with torch.no_grad():
        plain(x)
    assert plain.kerntune.graphs == [], "no check without eager_check"


def test_a_graph_that_writes_into_its_input_is_not_timed(tmp_path, monkeypatch):
    import torch
    import kerntune.torch

    class Accumulate(torch.nn.Module):
        def forward(self, total, x):
            total.add_(torch.nn.functional.gelu(x))
            return total

    _fresh_inductor(monkeypatch, tmp_path)
    _, x = _pointwise()
    total = torch.zeros_like(x)
    compiled = kerntune.torch.compile(Accumulate(), db=str(tmp_path / "r.db"), progress=False)
    with torch.no_grad():
        compiled(total, x)
    torch.testing.assert_close(total, torch.nn.functional.gelu(x), msg="added once, not once per timed call")
    (graph,) = compiled.kerntune.graphs
    assert not graph["timed"] and "writes into a tensor" in graph["reason"], graph


@pytest.mark.parametrize("batched", [False, True])
def test_a_kernel_s_first_launch_is_prepared_while_it_is_tuned_and_nothing_runs_on_the_gpu(batched):
    """``_prepare_launch`` loads a small build of the GEMM's kernel (which builds Triton's
    launcher for its argument types) in a thread, and launches nothing: the GPU the tuning
    times runs nothing of the compiling process's. A second call for the same kernel and
    element type does nothing."""
    import triton
    from kerntune.torch import _gemm, _inductor

    problem = _gemm.Problem("bmm" if batched else "mm", 256, 512, 128, (128 * 256, 128, 1)[-(2 + batched):],
                            (128 * 512, 1, 128)[-(2 + batched):], "float16", 3 if batched else 1)
    loaded, launched = [], []

    def on_load(module, function, name, *rest):
        loaded.append(name)

    def on_launch(metadata):
        launched.append(metadata)

    knobs = triton.knobs.runtime
    knobs.kernel_load_end_hook.add(on_load)
    knobs.launch_enter_hook.add(on_launch)
    try:
        _inductor._prepared.discard((problem.kernel, problem.dtype))
        thread = _inductor._prepare_launch(problem)
        thread.join(timeout=120)
        again = _inductor._prepare_launch(problem)
    finally:
        knobs.kernel_load_end_hook.remove(on_load)
        knobs.launch_enter_hook.remove(on_launch)
    assert loaded == [problem.kernel.__name__] and launched == [], (loaded, launched)
    assert again is None
