"""How long a Triton compile worker takes to its first cubin, cold and warm: N workers started
at once (as a tuning's pool starts them), each sent one configuration of kerntune.torch's
inductor_mm at the MLP's 2048 x 11008 x 4096, then a second one. Prints, per run, when each
worker's reply came (seconds from the start) and the compile seconds the worker reported.

  python3 bench/compile_worker_start.py [N ...]      (default: 1 16)

Each N runs twice: with the worker's warm-up (its command names the architecture, as a
tuning's does) and without it, each with a Triton cache of its own.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from kerntune import Tensor
from kerntune._arguments import _bind, jit_function, kernel_defaults
from kerntune._job import _job
from kerntune._space import space_of

CONFIGS = [(128, 128, 64, 8, 3, 4), (64, 128, 32, 8, 4, 4), (128, 64, 64, 8, 3, 4), (64, 64, 64, 8, 3, 4),
           (128, 128, 32, 8, 4, 8), (64, 128, 64, 8, 3, 4), (128, 64, 32, 8, 4, 4), (64, 64, 32, 8, 5, 4)]


def job_of(directory):
    from kerntune.torch import _gemm

    M, N, K = 2048, 11008, 4096
    fn = jit_function(_gemm.inductor_mm)
    params = {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "BLOCK_K": [32, 64], "GROUP_M": [8],
              "num_warps": [4, 8], "num_stages": [3, 4, 5]}
    args = dict(A=Tensor("bfloat16", (M, K)), B=Tensor("bfloat16", (K, N)), C=Tensor("bfloat16", (M, N)), M=M, N=N,
                K=K, stride_am=K, stride_ak=1, stride_bk=1, stride_bn=K, stride_cm=N, stride_cn=1, PLAIN_A=True,
                PLAIN_B=True)
    params, listed = space_of(params, None, kernel_defaults(fn))
    job, _, _ = _job(fn, _bind(fn, args, params), params, listed, [], 90, 232448, directory)
    return job


def request(job, index, config):
    block_m, block_n, block_k, group, stages, warps = config
    return json.dumps({"id": index, "kind": "triton", "options": {"num_warps": warps, "num_stages": stages},
                       "constexprs": {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": group},
                       "setup": job["compile_setup"]}) + "\n"


def run(count, warm_up):
    job = job_of(tempfile.mkdtemp())
    command = job["compile_worker"] if warm_up else [a for a in job["compile_worker"] if a not in ("--triton-arch", "90")]
    env = {**os.environ, **job["worker_env"], "TRITON_CACHE_DIR": tempfile.mkdtemp()}
    start = time.perf_counter()
    workers = [subprocess.Popen([*command, "__worker", "compile"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=env) for _ in range(count)]
    rounds = []
    for round_ in range(2):
        sent = time.perf_counter()
        for index, worker in enumerate(workers):
            worker.stdin.write(request(job, 100 * round_ + index, CONFIGS[(index + round_ * 3) % len(CONFIGS)]))
            worker.stdin.flush()
        replies = [json.loads(worker.stdout.readline()) for worker in workers]
        done = time.perf_counter()
        rounds.append({"after_start_s": round(done - start, 2), "wall_s": round(done - sent, 2),
                       "compile_s": round(statistics.median(r.get("seconds", 0) for r in replies), 2),
                       "types": sorted({r["type"] for r in replies})})
    for worker in workers:
        worker.stdin.close()
        worker.wait()
    return rounds


def main():
    counts = [int(n) for n in sys.argv[1:]] or [1, 16]
    for count in counts:
        for warm_up in (True, False):
            cold, warm = run(count, warm_up)
            print(f"{count:>3} workers, warm-up {'on ' if warm_up else 'off'}: first replies all in "
                  f"{cold['after_start_s']:.2f} s (median compile {cold['compile_s']:.2f} s); second round "
                  f"{warm['wall_s']:.2f} s (median compile {warm['compile_s']:.2f} s) {cold['types'] + warm['types']}",
                  flush=True)


if __name__ == "__main__":
    main()
