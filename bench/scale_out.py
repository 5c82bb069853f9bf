"""Scaling out (issue 14), on one host with two GPUs and 32 cores (the device tool's
`nvidia-h200-x2`). Each comparison runs inside one call, its anchor measured in the same run:

- `gpus`: benchmark-bound work scales with GPUs. The shared-memory CUDA matmul
  (examples/cuda/matmul_sram) at N = 8192, brute force, on GPU 0 and then on GPUs 0 and 1
  (`kerntune tune --devices`), each on a fresh store, end to end with the finalists'
  re-timing (`FINALISTS`, default 4, the default of a run; their pairs spread over the
  GPUs). Target >= 1.8x, same best.
- `nodes`: compile-bound work scales with nodes. The 576-configuration Triton matmul
  (examples/triton/matmul.py, fp16, SIZE^3, default 4096) brute force on GPU 0, its compile
  workers on a local Ray cluster of one node of 16 CPUs, then of two nodes of 16 CPUs (NODES,
  default "1 2"; "1 2 4" on a host of 64 cores; NODE_CPUS, default 16, the CPUs of each node;
  all on this host, started by ray.cluster_utils.Cluster as `ray start --num-cpus 16` would),
  a fresh store, Triton cache and cluster each time. Target >= 1.7x, same best. Nodes that
  together have fewer CPUs than the host (NODE_CPUS=4 with "1 2 4" on 32 cores) stand for
  nodes with cores of their own; nodes that fill it share its cores.
- `host`: the host's own compile throughput, no Ray: the same brute force with 16 and then
  32 local compile workers (NODE_CPUS per count of NODES). The ceiling of `nodes` on one host: if 32 concurrent compiles
  each take longer than 16 do, two nodes of 16 CPUs on it cannot reach 2x either.
- `ranks`: two processes (torch.distributed, gloo, one GPU each) call one
  @kerntune.autotune kernel with one key: both must launch the same configuration, tuned
  once (by rank 0), and a third process must find it in the store.

- `raygpus`: the `gpus` comparison with the benchmark workers on a local Ray cluster's
  GPUs (`--ray ADDR --ray-gpus 1`, then 2; two nodes of 16 CPUs and one GPU each).
- `raypy`: Python's `kerntune.tune(..., ray=ADDR, ray_gpus=1, then 2)` on that cluster,
  the Triton matmul brute force: it works end to end, with the same best, and each GPU
  measured its share (compile-bound, so no speedup is expected: target 1.0x).
- `raykt`: Kernel Tuner's `tune_kernel(..., ray=ADDR, ray_gpus=1, then 2)` on that cluster,
  the tiled CUDA matmul of examples/kernel_tuner/matmul.py at N = 4096, brute force: it
  works end to end, the same best, and each GPU measured its share (target 1.0x: the
  space is small, so the ratio is reported, not aimed at).

- `shapes`: a many-shape run scales with GPUs: the `gpus` comparison's spec with
  `shapes = [{ N = 4096 }, { N = 8192 }]`, brute force with the default finalists, on GPU
  0 and then on `GPUS` (default 2) GPUs. Target >= 1.8x on two, 3.5x on four, the same
  best at each size. `COMPILE_WORKERS` gives both runs that many compile workers (default:
  one per core); each run's report and its evaluations in the order they were stored go to
  $OUT/timeline_*.json.

Usage: python3 bench/scale_out.py [gpus] [shapes] [host] [nodes] [ranks] [raygpus] [raypy] [raykt] (default: the first three; on the device, run
one per call). Needs $KERNTUNE (the CLI) for `gpus`; Ray for `nodes` (on the GPU machine,
gpu/check.sh unpacks the Ray that gpu/prepare.sh packs into .device/sites/ray.tar.xz). Prints a table of
ratios last and writes the rows to $OUT/scale_out.json."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("OUT", tempfile.gettempdir())
rows = {}


def cuda_spec(folder: str, size: int) -> str:
    """The matmul_sram spec with N = `size`, beside a copy of its source."""
    source = os.path.join(ROOT, "examples", "cuda", "matmul_sram")
    with open(os.path.join(source, "spec.toml")) as f:
        text = re.sub(r"(?m)^N = \d+$", f"N = {size}", f.read())
    with open(os.path.join(source, "matmul.cu")) as f, open(os.path.join(folder, "matmul.cu"), "w") as g:
        g.write(f.read())
    path = os.path.join(folder, "spec.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def tuned(argv):
    """`kerntune tune ... --json` run to its end: its JSON and its wall seconds."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout), wall


def gpus():
    kerntune = os.environ.get("KERNTUNE", os.path.join(ROOT, ".device", "kerntune"))
    folder = tempfile.mkdtemp(prefix="scale-gpus-")
    spec = cuda_spec(folder, int(os.environ.get("SIZE", "8192")))
    for label, devices in (("1 GPU", "0"), ("2 GPUs", "0,1")):
        db = os.path.join(folder, f"{devices}.db")
        argv = [kerntune, "tune", spec, "--strategy", "brute_force", "--devices", devices, "--finalists",
                os.environ.get("FINALISTS", "4"), "--db", db, "--json"]
        summary, wall = tuned(argv)
        by_gpu = per_device(db)
        retimed = (summary.get("finalists") or {}).get("report") or {}
        rows[label] = dict(wall_s=wall, best=summary["best"]["config"], evaluations=summary["evaluations"],
                           per_gpu=by_gpu, search_s=summary["wall_s"], finalists_s=retimed.get("seconds"),
                           finalists_gpus=retimed.get("gpus"))
        print(label, json.dumps(rows[label]), flush=True)
    ratio("gpus", "1 GPU", "2 GPUs", target=1.8)


def shapes():
    """A many-shape run on one GPU, then on two: the shared-memory CUDA matmul's spec with
    `shapes` at N = 4096 and 8192 (`kerntune tune` tunes each size, learning from the one
    before), brute force with the default finalists, each on a fresh store."""
    kerntune = os.environ.get("KERNTUNE", os.path.join(ROOT, ".device", "kerntune"))
    folder = tempfile.mkdtemp(prefix="scale-shapes-")
    spec = cuda_spec(folder, 8192)
    with open(spec) as f:
        text = f.read()
    with open(spec, "w") as f:
        f.write("shapes = [{ N = 4096 }, { N = 8192 }]\n" + text)
    count = int(os.environ.get("GPUS", "2"))
    many = f"shapes {count} GPUs"
    for label, devices in (("shapes 1 GPU", "0"), (many, ",".join(str(g) for g in range(count)))):
        db = os.path.join(folder, f"{devices}.db")
        argv = [kerntune, "tune", spec, "--strategy", "brute_force", "--devices", devices, "--db", db, "--json"]
        if os.environ.get("COMPILE_WORKERS"):
            argv += ["--compile-workers", os.environ["COMPILE_WORKERS"]]
        report, wall = tuned(argv)
        keep_timeline(label, db, report)
        rows[label] = dict(wall_s=wall, best=[row["best_config"] for row in report["shapes"]],
                           evaluations=sum(row["evaluations"] for row in report["shapes"]),
                           per_size_s=[round(row["wall_s"], 1) for row in report["shapes"]],
                           # Each size's workers (ready_s, and where the last GPU's setup went)
                           # and finalists (seconds, GPUs).
                           workers=[run.get("workers") for run in report["runs"]],
                           # Each size's checks before its search (the GPUs' probe, the
                           # tools, the store).
                           prepare=[run.get("prepare") for run in report["runs"]],
                           finalists=[{k: ((run.get("finalists") or {}).get("report") or {}).get(k)
                                       for k in ("seconds", "gpus")} for run in report["runs"]])
        print(label, json.dumps(rows[label]), flush=True)
    ratio("shapes", "shapes 1 GPU", many, target={2: 1.8, 4: 3.5}.get(count, float(count)))


def raygpus():
    """The `gpus` comparison with the benchmark workers on a Ray cluster's GPUs
    (`--ray ADDR --ray-gpus N`): a local cluster of two nodes of 16 CPUs and one GPU each
    (node k started with CUDA_VISIBLE_DEVICES=k, so that Ray hands out that GPU), the
    compile workers as Ray actors too; 1 Ray GPU, then 2."""
    import_ray()
    from ray.cluster_utils import Cluster

    kerntune = os.environ.get("KERNTUNE", os.path.join(ROOT, ".device", "kerntune"))
    folder = tempfile.mkdtemp(prefix="scale-raygpus-")
    spec = cuda_spec(folder, int(os.environ.get("SIZE", "8192")))
    cluster = gpu_cluster(Cluster)
    try:
        for label, count in (("1 Ray GPU", 1), ("2 Ray GPUs", 2)):
            db = os.path.join(folder, f"ray{count}.db")
            argv = [kerntune, "tune", spec, "--strategy", "brute_force", "--ray", cluster.address, "--ray-gpus",
                    str(count), "--compile-workers", "16", "--finalists", "1", "--db", db, "--json"]
            start = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True)
            wall = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
            summary = json.loads(done.stdout)
            rows[label] = dict(wall_s=wall, best=summary["best"]["config"], evaluations=summary["evaluations"],
                               per_gpu=per_device(db))
            print(label, json.dumps(rows[label]), flush=True)
    finally:
        cluster.shutdown()
    ratio("raygpus", "1 Ray GPU", "2 Ray GPUs", target=1.8)


def gpu_cluster(Cluster):
    """A local Ray cluster of two nodes of 16 CPUs and one GPU each, node k started with
    CUDA_VISIBLE_DEVICES=k so that Ray hands out that GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 16, "num_gpus": 1})
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
        cluster.add_node(num_cpus=16, num_gpus=1)
        cluster.wait_for_nodes()
    finally:
        if visible is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
    return cluster


def raypy():
    """Python's `ray=` with `ray_gpus=`: the Triton matmul brute force with its compile
    workers and its benchmark workers on the cluster of `gpu_cluster` (the tensors' files
    shipped to each worker), on 1 Ray GPU and then 2; which GPU measured what is read off
    the store."""
    import_ray()
    from ray.cluster_utils import Cluster

    for label, count in (("py 1 Ray GPU", 1), ("py 2 Ray GPUs", 2)):
        # The cluster's workers inherit its environment: a fresh Triton cache, then the cluster.
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
        cluster = gpu_cluster(Cluster)
        try:
            triton_brute(label, 32, cluster.address, ray_gpus=count)
        finally:
            cluster.shutdown()
        rows[label]["per_gpu"] = per_device(rows[label].pop("db"))
        print(label, "per GPU", rows[label]["per_gpu"], flush=True)
    ratio("raypy", "py 1 Ray GPU", "py 2 Ray GPUs", target=1.0)


def raykt():
    """Kernel Tuner's `tune_kernel` with `ray=` and `ray_gpus=`: the benchmark workers on the
    cluster of `gpu_cluster`, shipped the arguments' files; 1 Ray GPU, then 2."""
    import_ray()
    from ray.cluster_utils import Cluster

    import importlib.util

    import kerntune

    # Loaded under its own name: the Triton stages import examples/triton's `matmul`.
    path = os.path.join(ROOT, "examples", "kernel_tuner", "matmul.py")
    loader = importlib.util.spec_from_file_location("kt_matmul", path)
    matmul = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(matmul)

    # Built once, outside the timed runs: its answer is a 4096^3 product on the CPU.
    problem = matmul.problem(int(os.environ.get("SIZE", "4096")))
    cluster = gpu_cluster(Cluster)
    try:
        for label, count in (("kt 1 Ray GPU", 1), ("kt 2 Ray GPUs", 2)):
            db = os.path.join(tempfile.mkdtemp(prefix="scale-raykt-"), "results.db")
            start = time.perf_counter()
            results, env = kerntune.tune_kernel(**problem, db=db, quiet=True, ray=cluster.address, ray_gpus=count)
            wall = time.perf_counter() - start
            best = {k: v for k, v in env["best_config"].items() if k in problem["tune_params"]}
            rows[label] = dict(wall_s=wall, best=best, evaluations=env["evaluations"], per_gpu=per_device(db),
                               valid=sum(isinstance(r["time"], float) for r in results), configurations=len(results))
            print(label, json.dumps(rows[label], default=str), flush=True)
    finally:
        cluster.shutdown()
    ratio("raykt", "kt 1 Ray GPU", "kt 2 Ray GPUs", target=1.0)


def keep_timeline(label: str, db: str, report: dict) -> None:
    """Writes to $OUT a run's report and its evaluations in the order the store received
    them (when, which GPU, compile and benchmark seconds): where a scaled run loses time."""
    import sqlite3

    with sqlite3.connect(db) as connection:
        evaluations = [dict(tuning=tuning, created=created, status=status, compile_s=compile_s,
                            benchmark_s=benchmark_s, device=(json.loads(metrics).get("device") or {}).get("ordinal"))
                       for tuning, created, status, compile_s, benchmark_s, metrics in connection.execute(
                           "SELECT tuning, created, status, compile_s, benchmark_s, metrics FROM evaluations "
                           "ORDER BY created")]
    name = re.sub(r"\W+", "_", label).strip("_")
    with open(os.path.join(OUT, f"timeline_{name}.json"), "w") as f:
        json.dump(dict(report=report, evaluations=evaluations), f, indent=1, default=str)


def per_device(db: str) -> dict:
    """How many results each GPU measured, read off the store."""
    import sqlite3

    counts = {}
    with sqlite3.connect(db) as connection:
        for (metrics,) in connection.execute("SELECT metrics FROM evaluations"):
            device = json.loads(metrics).get("device")
            key = "none" if device is None else f"#{device['ordinal']} {device.get('pci_bus_id')}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def import_ray():
    """Ray, or a clear stop: on the GPU machine gpu/check.sh puts the packed Ray of
    gpu/prepare.sh on PYTHONPATH."""
    try:
        import ray
    except ImportError as error:
        sys.exit(f"Ray is not installed ({error}): pip install 'kerntune[ray]', or on the GPU machine "
                 "carry .device/sites/ray.tar.xz (gpu/prepare.sh) and run this through gpu/check.sh")
    return ray


def triton_brute(label, compile_workers, ray_address=None, ray_gpus=None):
    """The 576-configuration Triton matmul brute force on GPU 0, a fresh store; its compile
    workers local, or on the Ray cluster at ``ray_address``. Records the row ``label``."""
    import torch

    sys.path.insert(0, os.path.join(ROOT, "examples", "triton"))
    import matmul

    import kerntune

    size = int(os.environ.get("SIZE", "4096"))
    torch.manual_seed(0)
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
    db = os.path.join(tempfile.mkdtemp(prefix="scale-nodes-"), "results.db")
    started_at = time.time()
    start = time.perf_counter()
    result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS,
                           answer={"c_ptr": torch.matmul(a, b)}, strategy="brute_force", db=db, progress=False,
                           finalists=1, compile_workers=compile_workers, ray=ray_address, ray_gpus=ray_gpus,
                           objective=("TFLOP/s", f"2 * {size}**3 / (time * 1e-3) / 1e12"))
    wall = time.perf_counter() - start
    statuses = {}
    for r in result.results:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    compiled = [r["costs"]["compile_s"] for r in result.results if r["costs"].get("compile_s")]
    rows[label] = dict(wall_s=wall, best=result.best_config, best_tflops=result.best_objective,
                       evaluations=result.evaluations, statuses=statuses, compile_s=result.costs.get("compile_s"),
                       compile_mean_s=sum(compiled) / max(len(compiled), 1), phases=result.phases, db=db,
                       **evaluations_span(db, started_at))
    print(label, json.dumps(rows[label], default=str), flush=True)


def evaluations_span(db: str, started_at: float) -> dict:
    """When, after the call started, the store received the run's first and last evaluation:
    the start's share of a run (the workers', the cluster's) and what follows the last one."""
    import stored

    received = [evaluation.at for evaluation in stored.evaluations(db)]
    if not received:
        return {}
    return dict(first_evaluation_s=received[0] - started_at, last_evaluation_s=received[-1] - started_at)


#: Node counts of the `host` and `nodes` comparisons, each doubling compared with the count
#: before it (NODES="1 2 4" on a host of 64 cores).
NODES = [int(n) for n in os.environ.get("NODES", "1 2").split()]
#: The CPUs of each node, and the local compile workers of `host` per count of NODES.
NODE_CPUS = int(os.environ.get("NODE_CPUS", "16"))


def node_label(count: int) -> str:
    return f"{count} node" + ("s" if count > 1 else "")


def host():
    """The host's own compile throughput, without Ray: the Triton brute force with 16 local
    compile workers (NODE_CPUS) per count of NODES. Where 32 concurrent compiles each take longer than 16
    (shared cores, hyper-threads, memory bandwidth), no scheduler gets 2x from 32."""
    for count in NODES:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
        triton_brute(f"host {NODE_CPUS * count}", NODE_CPUS * count)
    for before, after in zip(NODES, NODES[1:]):
        ratio(f"host {NODE_CPUS * after}", f"host {NODE_CPUS * before}", f"host {NODE_CPUS * after}", target=1.7)


def nodes():
    import_ray()
    from ray.cluster_utils import Cluster

    for count in NODES:
        # Workers inherit the cluster's environment: a fresh Triton cache before it starts.
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": NODE_CPUS})
        for _ in range(count - 1):
            cluster.add_node(num_cpus=NODE_CPUS)
        cluster.wait_for_nodes()
        try:
            triton_brute(node_label(count), NODE_CPUS * count, cluster.address)
        finally:
            cluster.shutdown()
    for before, after in zip(NODES, NODES[1:]):
        ratio(f"nodes {after}", node_label(before), node_label(after), target=1.7)


RANK = r"""
import json, os, sys
import torch, torch.distributed as dist
import triton, triton.language as tl
import kerntune

rank, port, db, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
torch.cuda.set_device(rank)

@kerntune.autotune(params={"BLOCK": [128, 256, 512, 1024, 2048], "num_warps": [2, 4, 8]}, key=["n"], db=db)
@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, 2.0 * tl.load(x_ptr + offsets, mask=mask), mask=mask)

n = 1 << 24
x = torch.randn(n, device="cuda")
y = torch.empty_like(x)
scale[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
torch.cuda.synchronize()
launched = {k: v for k, v in scale.best_config.all_kwargs().items()}
with open(out, "w") as f:
    json.dump({"rank": rank, "launched": launched, "tuned": scale.result is not None,
               "from_store": None if scale.result is None else scale.result.from_store,
               "evaluations": None if scale.result is None else scale.result.evaluations,
               "correct": bool(torch.equal(y, 2.0 * x))}, f, default=str)
dist.destroy_process_group()
"""


def ranks():
    import socket

    folder = tempfile.mkdtemp(prefix="scale-ranks-")
    db = os.path.join(folder, "results.db")
    script = os.path.join(folder, "rank.py")
    with open(script, "w") as f:
        f.write(RANK)

    def job(label):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        outs = [os.path.join(folder, f"{label}.{rank}.json") for rank in (0, 1)]
        start = time.perf_counter()
        processes = [subprocess.Popen([sys.executable, script, str(rank), port, db, outs[rank]]) for rank in (0, 1)]
        codes = [p.wait(timeout=540) for p in processes]
        wall = time.perf_counter() - start
        if any(codes):
            raise SystemExit(f"{label}: a rank failed: exit codes {codes}")
        return [json.load(open(path)) for path in outs], wall

    first, wall = job("first job")
    again, wall_again = job("second job")
    same = first[0]["launched"] == first[1]["launched"] == again[0]["launched"] == again[1]["launched"]
    tuned_once = first[0]["tuned"] and not first[1]["tuned"] and first[0]["from_store"] == 0
    stored = again[0]["from_store"] == again[0]["evaluations"] and not again[1]["tuned"]
    rows["ranks"] = dict(first=first, second=again, wall_s=wall, second_wall_s=wall_again, same=same,
                         tuned_once=tuned_once, answered_by_store=stored,
                         correct=all(r["correct"] for r in first + again))
    print("ranks", json.dumps(rows["ranks"], default=str), flush=True)


ratios = []


def ratio(name, anchor, other, target):
    speedup = rows[anchor]["wall_s"] / rows[other]["wall_s"]
    same = rows[anchor]["best"] == rows[other]["best"]
    ratios.append((name, rows[anchor]["wall_s"], rows[other]["wall_s"], speedup, target, same))


def main():
    stages = sys.argv[1:] or ["gpus", "nodes", "ranks"]
    for stage in stages:
        {"gpus": gpus, "shapes": shapes, "host": host, "nodes": nodes, "ranks": ranks, "raygpus": raygpus, "raypy": raypy,
         "raykt": raykt}[stage]()
    with open(os.path.join(OUT, "scale_out.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    print("\n=== scale_out summary")
    print(f"{'comparison':<10} {'anchor s':>9} {'scaled s':>9} {'speedup':>8} {'target':>7} {'same best':>10}")
    for name, anchor, scaled, speedup, target, same in ratios:
        print(f"{name:<10} {anchor:>9.1f} {scaled:>9.1f} {speedup:>7.2f}x {target:>6.1f}x {str(same):>10}")
    pairs = [(f"host {NODE_CPUS * a}", f"host {NODE_CPUS * b}") for a, b in zip(NODES, NODES[1:])]
    pairs += [(node_label(a), node_label(b)) for a, b in zip(NODES, NODES[1:])]
    for anchor, other in pairs:
        if anchor in rows and other in rows:
            a, b = rows[anchor]["compile_mean_s"], rows[other]["compile_mean_s"]
            print(f"mean compile per configuration: {anchor} {a:.2f} s, {other} {b:.2f} s ({b / a:.2f}x); "
                  f"summed {rows[anchor]['compile_s']:.0f} s and {rows[other]['compile_s']:.0f} s")
    for label, row in rows.items():
        if "first_evaluation_s" in row:
            print(f"{label}: first evaluation stored after {row['first_evaluation_s']:.1f} s, the last after "
                  f"{row['last_evaluation_s']:.1f} s, of {row['wall_s']:.1f} s")
    if "ranks" in rows:
        r = rows["ranks"]
        print(f"ranks: same configuration on both ranks and jobs: {r['same']}; tuned once (rank 0): {r['tuned_once']}; "
              f"second job answered by the store: {r['answered_by_store']}; outputs correct: {r['correct']}")


if __name__ == "__main__":
    main()
