"""Records tuning landscapes of the GEMMs kerntune.torch tunes for Inductor: brute forces of
`kerntune.torch._gemm`'s template over Inductor's EXHAUSTIVE space (the restrictions of
`_gemm.RESTRICTIONS` applied), each through the very path `kerntune.torch.compile` takes
(`Session.tune_one`, strategy `brute_force`), each exported as a Kernel Tuner cache for
`kerntune simulate` and `compare-strategies`, with ATen's time for the same GEMM beside it.
They let the per-GEMM budget of `kerntune.torch` be chosen on a CPU (issue 38).

    python3 bench/record_inductor_landscapes.py [NAME ...]    # default: every GEMM below

The GEMMs are those of bench/inductor.py's two models at 2048 tokens, and two held-out
models' at other token counts (never used to choose anything before they were recorded),
bf16, as Inductor lowers them: activations row-major, the weight an `nn.Linear`'s transposed view. Each runs
with a fresh results store and Triton cache; its landscape goes to
$OUT/inductor_mm_<M>x<N>x<K>_<gpu>.json, then a table is printed.
"""

import json
import os
import tempfile
import time

from triton_matmul import chosen, export_for_this_gpu, fresh_triton_cache

from kerntune.torch import _gemm
from kerntune.torch._inductor import Session

# M, N, K of each GEMM, and the model it comes from.
GEMMS = {
    "mlp_up": ((2048, 11008, 4096), "mlp"),
    "mlp_down": ((2048, 4096, 11008), "mlp"),
    "llama_q": ((2048, 4096, 4096), "llama"),
    "llama_kv": ((2048, 1024, 4096), "llama"),
    "llama_up": ((2048, 14336, 4096), "llama"),
    "llama_down": ((2048, 4096, 14336), "llama"),
    # Held out from every choice made on the two models above: two other models' layers at
    # other token counts, their projections as Hugging Face's modules lay them out.
    # Qwen2.5-7B (hidden 3584, 4 KV heads of 128, SwiGLU 18944) at 1024 tokens.
    "qwen_q": ((1024, 3584, 3584), "qwen"),
    "qwen_kv": ((1024, 512, 3584), "qwen"),
    "qwen_up": ((1024, 18944, 3584), "qwen"),
    "qwen_down": ((1024, 3584, 18944), "qwen"),
    # Phi-3-mini (hidden 3072, fused QKV and gate-up projections, 8192) at 4096 tokens.
    "phi3_qkv": ((4096, 9216, 3072), "phi3"),
    "phi3_o": ((4096, 3072, 3072), "phi3"),
    "phi3_up": ((4096, 16384, 3072), "phi3"),
    "phi3_down": ((4096, 3072, 8192), "phi3"),
}


def record(name, mnk, workdir):
    M, N, K = mnk
    problem = _gemm.Problem("mm", M, N, K, (K, 1), (1, K), "bfloat16")
    fresh_triton_cache()
    db = os.path.join(workdir, f"{name}.db")
    session = Session(db=db, tune=True, table=None, max_fevals=None, time_limit=None, space="exhaustive",
                      fallback=True, progress=False, strategy="brute_force")
    start = time.perf_counter()
    choice = session.tune_one(name, problem, None)
    wall = time.perf_counter() - start
    path = export_for_this_gpu(db, f"inductor_mm_{M}x{N}x{K}", name)
    versus = choice["versus"]
    row = dict(gemm=name, mnk=mnk, wall_s=wall, evaluations=choice["evaluations"], best=choice["config"],
               template_ms=versus.get("template_ms"), aten_ms=versus.get("aten_ms"), versus=versus,
               landscape=os.path.basename(path))
    print(name, json.dumps(row, default=str), flush=True)
    return row


def main():
    names = chosen(GEMMS, "GEMM")
    workdir = tempfile.mkdtemp(prefix="kerntune-inductor-landscapes-")
    rows = [record(name, GEMMS[name][0], workdir) for name in names]
    print("\n=== recorded inductor landscapes")
    for r in rows:
        print(f"{r['gemm']:<10} M,N,K {r['mnk']}: {r['wall_s']:6.1f} s, {r['evaluations']} configurations; "
              f"template {r['template_ms']} ms, ATen {r['aten_ms']} ms, {r['best']} -> {r['landscape']}")


if __name__ == "__main__":
    main()
