"""Compile workers on a Ray cluster (``kerntune[ray]``), without a GPU: a local cluster of
two nodes on this machine compiles a Triton kernel's space while one of the actors is
killed, and nothing is lost; the relay (kerntune.ray_worker) carries a worker's lines both
ways, and a dead actor ends it as a dead worker ends; Ray missing, or a cluster that cannot
be reached, is one line that says what to do. Select them with ``pytest -k ray``."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

import kerntune  # noqa: E402
from kerntune import Tensor  # noqa: E402
from kerntune.ray_worker import RELAY  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def cluster():
    """A head node and a second node, one CPU each (CI has two cores); the second declares
    one GPU, which Ray hands out like a real one (there is none here)."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _compile_workers():
    """(worker, parent) of every Triton compile worker on this machine: the parent is the
    Ray actor's process."""
    found = []
    for entry in os.listdir("/proc"):
        command = _cmdline(entry) if entry.isdigit() else ""
        if "--triton" in command and "kerntune._worker" in command and "kerntune.ray_worker" not in command:
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if _cmdline(parent).startswith("ray::"):
                found.append((int(entry), parent))
    return found


def test_ray_compile_only_spreads_over_two_nodes_and_a_killed_actor_loses_nothing(cluster, tmp_path):
    import matmul

    params = {"BLOCK_SIZE_M": [32, 64, 128], "BLOCK_SIZE_N": [32, 64], "BLOCK_SIZE_K": [32, 64],
              "GROUP_SIZE_M": [8], "num_stages": [2, 3], "num_warps": [4]}
    size = 512
    args = dict(a_ptr=Tensor("float16", (size, size)), b_ptr=Tensor("float16", (size, size)),
                c_ptr=Tensor("float16", (size, size)), M=size, N=size, K=size, stride_am=size, stride_ak=1,
                stride_bk=size, stride_bn=1, stride_cm=size, stride_cn=1)
    killed = []

    def kill_one_actor():
        # As soon as an actor runs a compile worker, which then holds a configuration
        # (the pool hands every worker one as it starts), its process is killed: a lost node.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for worker, actor in _compile_workers():
                os.kill(actor, 9)
                killed.append(actor)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one_actor)
    killer.start()
    # A fixed, generous compile limit: on a loaded machine a compile can outlast the
    # adaptive limit's 10 s floor, and this test is about the lost actor, not the limit.
    outcomes = kerntune.compile(matmul.matmul_kernel, args, params, compile_workers=2, ray=cluster.address,
                                db=str(tmp_path / "results.db"), compile_timeout=600)
    killer.join()
    assert killed, "an actor was killed while the configurations were compiling"
    assert len(outcomes) == 3 * 2 * 2 * 2
    assert [o["status"] for o in outcomes] == ["compiled"] * len(outcomes), [o.get("reason") for o in outcomes]


# A fake benchmark worker: a simulated evaluation answers the time recorded for the
# configuration; a request for configuration 13 kills the actor that runs it.
FAKE_BENCH = r"""
import json, os, sys
print(json.dumps({"type": "ready", "device": {"ordinal": 0}}), flush=True)
recorded = {7: 1.5, 13: 2.0}
for line in sys.stdin:
    request = json.loads(line)
    if request["id"] == 13:
        os.kill(os.getppid(), 9)
    print(json.dumps({"type": "result", "id": request["id"], "samples": [recorded[request["id"]]],
                      "argv": sys.argv[1:], "env": os.environ.get("FAKE_SETTING"),
                      "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}), flush=True)
"""


def _relay(address, *extra, env=None):
    argv = [sys.executable, *RELAY, "--address", address, *extra]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def test_ray_relay_carries_a_workers_lines_and_a_dead_actor_ends_it(cluster, tmp_path):
    relay = _relay(cluster.address, "--env", "FAKE_SETTING", "--", sys.executable, "-c", FAKE_BENCH, "--device", "3",
                   env={"FAKE_SETTING": "passed on"})
    assert json.loads(relay.stdout.readline()) == {"type": "ready", "device": {"ordinal": 0}}
    relay.stdin.write(json.dumps({"id": 7}) + "\n")
    relay.stdin.flush()
    result = json.loads(relay.stdout.readline())
    assert result["samples"] == [1.5]
    assert result["argv"] == ["--device", "3"], "without --gpus the worker's own device stays"
    assert result["env"] == "passed on"
    relay.stdin.write(json.dumps({"id": 13}) + "\n")
    relay.stdin.flush()
    assert relay.stdout.readline() == "", "no reply: the actor died"
    assert relay.wait(timeout=60) != 0
    assert "the Ray actor running the worker died" in relay.stderr.read()


def _hosts(address, owner):
    """The pids of the relays' hosts serving the tuning process ``owner`` on ``address``."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()
            and "kerntune.ray_worker --serve" in (command := _cmdline(entry))
            and f"--owner {owner} " in command and command.rstrip().endswith(f"--address {address}")]


def _gone(pid, timeout):
    """Whether process ``pid`` ends (or is only a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(") ", 1)[1].startswith("Z"):
                    return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


# A worker that says its process id, then hangs: what a pool kills after its deadline.
HANGING = "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)"


def test_the_relays_of_one_tuning_process_share_one_host_that_joins_the_cluster_once(cluster):
    relays = [_relay(cluster.address, "--", sys.executable, "-c", FAKE_BENCH) for _ in range(2)]  # both CPUs
    try:
        for relay in relays:
            assert json.loads(relay.stdout.readline())["type"] == "ready"
        assert len(_hosts(cluster.address, os.getpid())) == 1, "one host for this process and cluster"
    finally:
        for relay in relays:
            relay.stdin.close()
            assert relay.wait(timeout=60) == 0


def test_a_killed_relay_ends_its_hanging_worker_and_actor(cluster):
    """A pool kills the relay of a worker past its deadline; the worker and its actor must
    not go on holding a CPU of the cluster."""
    relay = _relay(cluster.address, "--", sys.executable, "-c", HANGING)
    worker = int(relay.stdout.readline())
    relay.kill()
    relay.wait(timeout=10)
    assert _gone(worker, timeout=60), "the hanging worker still runs after its relay was killed"


def test_the_host_ends_with_its_tuning_process(cluster):
    """A tuning process killed (a crash, or Ctrl-C twice) leaves no host and no worker behind."""
    owner = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys
relay = subprocess.Popen([sys.executable, *{RELAY!r}, "--address", {cluster.address!r}, "--", sys.executable, "-c",
                          {HANGING!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
print(relay.stdout.readline().strip(), flush=True)
sys.stdin.readline()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker = int(owner.stdout.readline())
    hosts = _hosts(cluster.address, owner.pid)
    assert len(hosts) == 1
    owner.kill()
    owner.wait(timeout=10)
    assert _gone(hosts[0], timeout=30), "the host outlived its tuning process"
    assert _gone(worker, timeout=60), "the worker outlived its tuning process's host"


def test_ray_relay_on_a_gpu_runs_the_worker_on_the_gpu_ray_gives_it_as_device_0(cluster):
    """`kerntune tune --ray ADDR --ray-gpus N` runs each benchmark worker this way."""
    relay = _relay(cluster.address, "--gpus", "1", "--", sys.executable, "-c", FAKE_BENCH, "--device", "3")
    assert json.loads(relay.stdout.readline())["type"] == "ready"
    relay.stdin.write(json.dumps({"id": 7}) + "\n")
    relay.stdin.flush()
    result = json.loads(relay.stdout.readline())
    assert result["argv"] == ["--device", "0"], "the one GPU the actor sees"
    assert result["gpus"] == "0", "Ray placed it on the node with the GPU and made that GPU its only one"
    relay.stdin.close()
    assert relay.wait(timeout=60) == 0


def test_a_benchmark_worker_gets_its_gpu_while_compile_workers_hold_every_cpu(cluster):
    """--compile-workers should be the cluster's CPUs; a benchmark worker that also asked for
    a CPU would then wait for one of them to end, which none does before the run."""
    compilers = [_relay(cluster.address, "--", sys.executable, "-c", FAKE_BENCH) for _ in range(2)]  # both CPUs
    bench = None
    try:
        for relay in compilers:
            assert json.loads(relay.stdout.readline())["type"] == "ready"
        bench = _relay(cluster.address, "--gpus", "1", "--", sys.executable, "-c", FAKE_BENCH, "--device", "0")
        ready = []
        reader = threading.Thread(target=lambda: ready.append(bench.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert ready and json.loads(ready[0])["type"] == "ready", "the GPU worker was placed beside the compile workers"
        bench.stdin.close()
        assert bench.wait(timeout=60) == 0
    finally:
        if bench is not None and bench.poll() is None:
            bench.kill()
        for relay in compilers:
            relay.stdin.close()
            relay.wait(timeout=60)


def test_the_relays_check_counts_the_gpus_and_leaves_refusing_to_the_front(cluster):
    """Whether the cluster has enough GPUs each front says in its own words (`--ray-gpus`,
    `ray_gpus=`): the relay only counts them."""
    too_many = subprocess.run([sys.executable, *RELAY, "--check", "--address", cluster.address, "--gpus", "2"],
                              capture_output=True, text=True)
    assert too_many.returncode == 0, too_many.stderr
    assert json.loads(too_many.stdout.strip().splitlines()[-1]) == {"gpus": 1}, too_many.stdout


def test_the_check_counts_the_clusters_gpus_for_ray_gpus_all(cluster):
    """`--ray-gpus all` measures on as many GPUs as the relay's check counts."""
    checked = subprocess.run([sys.executable, *RELAY, "--check", "--address", cluster.address], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout.strip().splitlines()[-1]) == {"gpus": 1}, checked.stdout


def test_pythons_check_counts_the_gpus_and_refuses_more_than_the_cluster_has(cluster):
    from kerntune._job import RayCheck, check_ray

    assert RayCheck(cluster.address, "all").bench_gpus() == 1, "all: every GPU the cluster has"
    assert RayCheck(cluster.address).bench_gpus() is None, "none asked for: this machine's measure"
    assert check_ray(cluster.address, 1) == 1
    with pytest.raises(kerntune.BackendError) as raised:
        check_ray(cluster.address, 2)
    assert str(raised.value).endswith("has 1 GPU(s); 2 were asked for (ray_gpus=)"), str(raised.value)


def test_the_cli_takes_the_clusters_gpu_count_from_the_relays_check(cluster):
    """`kerntune tune --ray ADDR --ray-gpus all|N`: the check's count reaches the CLI. Here
    (no GPU) a run that passed the check stops at the local GPU probe instead."""
    import shutil

    binary = os.environ.get("KERNTUNE_BIN") or os.path.join(ROOT, "target", "debug", "kerntune")
    if not os.path.isfile(binary):
        pytest.skip("no kerntune command (cargo build, or set KERNTUNE_BIN)")
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU: the run would go on past the check")
    spec = os.path.join(ROOT, "examples", "cuda", "vector_add", "spec.toml")

    def tune(*extra):
        return subprocess.run([binary, "tune", spec, "--ray", cluster.address, "--compile-workers", "1", *extra],
                              capture_output=True, text=True, env={**os.environ, "KERNTUNE_PYTHON": sys.executable})

    too_many = tune("--ray-gpus", "2")
    assert too_many.returncode == 1 and too_many.stderr.strip().endswith("has 1 GPU(s); 2 were asked for (--ray-gpus)")
    every = tune("--ray-gpus", "all")
    assert every.returncode == 1 and every.stderr.startswith("error: no NVIDIA driver on this machine"), every.stderr


def test_ray_gpus_runs_benchmark_workers_through_the_relay_on_one_gpu_with_every_file_they_read(tmp_path):
    """`tune(..., ray=ADDR, ray_gpus=N)`: the job's bench worker becomes the relay, holding
    one GPU, shipping the tensors' files, the expected outputs and the extra sets' files."""
    from kerntune._job import _bench_through_ray

    paths = {name: str(tmp_path / f"{name}.bin") for name in ("a", "c", "expected", "set1", "set1.expected")}
    job = {"args": [{"name": "a", "file": paths["a"]}, {"name": "n", "kind": "value"}, {"name": "c", "file": paths["c"]}],
           "reference": [{"position": 2, "file": paths["expected"]}],
           "extra_sets": [{"inputs": [[0, paths["set1"]]], "expected": [paths["set1.expected"]]}],
           "bench_worker": [sys.executable, "-m", "kerntune._worker"], "worker_env": {"PYTHONPATH": "x"}}
    _bench_through_ray(job, "10.0.0.1:6379")
    argv = job["bench_worker"]
    relay, worker = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    assert worker == [sys.executable, "-m", "kerntune._worker"], "the pool appends the kind and --device after it"
    assert relay[relay.index("--gpus") + 1] == "1" and relay[relay.index("--address") + 1] == "10.0.0.1:6379"
    shipped = [relay[i + 1] for i, word in enumerate(relay) if word == "--ship"]
    assert sorted(shipped) == sorted(paths.values()), shipped
    assert relay[relay.index("--env") + 1] == "PYTHONPATH"


def test_ray_missing_is_one_line_that_says_what_to_install(tmp_path):
    stub = tmp_path / "ray"
    stub.mkdir()
    (stub / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    checked = subprocess.run([sys.executable, *RELAY, "--check", "--address", "auto"], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": path})
    assert checked.returncode != 0
    assert checked.stderr.strip() == "kerntune: Ray is not installed: pip install 'kerntune[ray]'"


def test_ray_unreachable_address_stops_compile_before_any_work_in_one_line(tmp_path):
    import matmul

    args = dict(a_ptr=Tensor("float16", (64, 64)), b_ptr=Tensor("float16", (64, 64)), c_ptr=Tensor("float16", (64, 64)),
                M=64, N=64, K=64, stride_am=64, stride_ak=1, stride_bk=64, stride_bn=1, stride_cm=64, stride_cn=1)
    params = {"BLOCK_SIZE_M": [32], "BLOCK_SIZE_N": [32], "BLOCK_SIZE_K": [32], "GROUP_SIZE_M": [8]}
    with pytest.raises(kerntune.BackendError) as raised:
        kerntune.compile(matmul.matmul_kernel, args, params, ray="127.0.0.1:9")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("ray='127.0.0.1:9': cannot reach the Ray cluster at '127.0.0.1:9'"), message
    assert "ray start --head" in message


def test_ray_unreachable_address_stops_tune_kernel_before_any_work_in_one_line():
    """Kernel Tuner's `tune_kernel` takes kerntune's `ray=` (and `devices=`) too; an
    unreachable cluster is refused before the GPU is even asked for."""
    import numpy as np

    source = "__global__ void add(float *c, float *a, int n) { int i = blockIdx.x * block_size_x + threadIdx.x; if (i < n) c[i] = a[i]; }"
    args = [np.zeros(64, np.float32), np.ones(64, np.float32), np.int32(64)]
    with pytest.raises(kerntune.BackendError) as raised:
        kerntune.tune_kernel("add", source, 64, args, {"block_size_x": [32, 64]}, ray="127.0.0.1:9", devices="0", quiet=True)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("ray='127.0.0.1:9': cannot reach the Ray cluster at '127.0.0.1:9'"), message


def _copy_kernel():
    import numpy as np

    source = "__global__ void copy(float *c, float *a, int n) { int i = blockIdx.x * block_size_x + threadIdx.x; if (i < n) c[i] = a[i]; }"
    a = np.arange(64, dtype=np.float32)
    return source, [np.zeros(64, np.float32), a, np.int32(64)], [a, None, None]


def test_tune_kernel_ray_gpus_beyond_the_clusters_are_refused_in_one_line(cluster):
    """Kernel Tuner's `tune_kernel` takes `ray_gpus=` too; the cluster's count is checked
    before the GPU is asked for."""
    source, args, answer = _copy_kernel()
    with pytest.raises(kerntune.BackendError) as raised:
        kerntune.tune_kernel("copy", source, 64, args, {"block_size_x": [32, 64]}, answer=answer, ray=cluster.address,
                             ray_gpus=2, quiet=True)
    message = str(raised.value)
    assert "\n" not in message and message.endswith("has 1 GPU(s); 2 were asked for (ray_gpus=)"), message


@pytest.mark.parametrize("extra, wanted", [
    ({"ray_gpus": 1}, "ray_gpus= measures on a Ray cluster's GPUs: give ray= (the cluster's address) too"),
    ({"ray_gpus": 0, "ray": "auto"}, "ray_gpus = 0: give a number of GPUs (1 or more) or \"all\""),
    ({"ray_gpus": 1, "ray": "auto", "devices": "0"}, "give devices= (this machine's GPUs) or ray_gpus= (the Ray cluster's), not both"),
])
def test_tune_kernel_ray_gpus_misused_is_one_line(extra, wanted):
    source, args, answer = _copy_kernel()
    with pytest.raises(kerntune.ArgumentError) as raised:
        kerntune.tune_kernel("copy", source, 64, args, {"block_size_x": [32, 64]}, answer=answer, quiet=True, **extra)
    assert str(raised.value) == wanted


def test_tune_kernel_ray_gpus_all_runs_a_benchmark_worker_per_gpu_through_the_relay_with_its_files(monkeypatch):
    """`tune_kernel(..., ray=ADDR, ray_gpus="all")`: the job asks for as many benchmark
    workers as the cluster has GPUs, each the relay holding one GPU and shipping every
    argument's and expected output's file. The GPU and the run are stood in for here."""
    import kerntune._kt_call as kt
    import kerntune._job as job_module

    seen = {}

    class Native:
        def __getattr__(self, name):
            return getattr(kerntune._kerntune, name)

        @staticmethod
        def device_info(device):
            return json.dumps({"name": "NVIDIA H200", "max_threads_per_block": 1024, "max_shared_per_block_optin": 232448})

        @staticmethod
        def tune_kernel_tuner(job, instance, check, constants):
            seen["job"] = json.loads(job)
            seen["files"] = {p: os.path.exists(p) for p in os.listdir(seen["job"]["base"])}
            raise kerntune.BackendError("stood in for")

    monkeypatch.setattr(kt, "_kerntune", Native())
    monkeypatch.setattr(kt, "check_device", lambda device: None)
    class ThreeGpus(job_module.RayCheck):
        def __init__(self, address, ray_gpus=None):
            self.address, self.ray_gpus = address, ray_gpus

        def result(self):
            return 3

    monkeypatch.setattr(job_module, "RayCheck", ThreeGpus)
    source, args, answer = _copy_kernel()
    with pytest.raises(kerntune.BackendError, match="stood in for"):
        kerntune.tune_kernel("copy", source, 64, args, {"block_size_x": [32, 64]}, answer=answer, ray="10.0.0.1:6379",
                             ray_gpus="all", quiet=True)
    job = seen["job"]
    assert job["bench_workers"] == 3
    relay = job["bench_worker"][:job["bench_worker"].index("--")]
    assert job["bench_worker"][job["bench_worker"].index("--") + 1:] == job["worker"]
    assert relay[relay.index("--gpus") + 1] == "1" and relay[relay.index("--address") + 1] == "10.0.0.1:6379"
    shipped = sorted(os.path.basename(relay[i + 1]) for i, word in enumerate(relay) if word == "--ship")
    assert shipped == ["arg0.expected.npy", "arg0.npy", "arg1.npy"], shipped
    assert "--gpus" not in job["compile_worker"][:job["compile_worker"].index("--")], "compile workers need no GPU"
