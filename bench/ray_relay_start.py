"""What one compile worker on a Ray cluster costs before its first answer, part by part, on
this machine: `import ray`, joining the cluster as a driver (`ray.init`), the first actor,
and three more actors of the same driver; then N relays (`python -m kerntune.ray_worker`,
one per worker, as the pools start them) started at once, each running a worker that echoes
a line, until every one has answered. The relays of one tuning process share one host, which
imports Ray and joins the cluster once (issue 35's lead): each count's relays are started by
a fresh process, so each count pays for starting its host. Last, the round trip of a line
of 100 bytes and of 200 kB (a cubin's size) through one relay.

    python3 bench/ray_relay_start.py [N ...]    # default: 1 4

Needs Ray (`pip install 'kerntune[ray]'`); starts a local cluster of max(N) CPUs.
"""

import json
import subprocess
import sys
import time

from ray.cluster_utils import Cluster

ECHO = [sys.executable, "-c", "import sys\nfor line in sys.stdin:\n    print(line.strip(), flush=True)"]
PARTS = """
import json, time
clock = time.perf_counter()
import ray
imported = time.perf_counter()
ray.init(address={address!r}, log_to_driver=False, logging_level="ERROR", configure_logging=False)
joined = time.perf_counter()
@ray.remote(num_cpus=1)
class Actor:
    def ping(self):
        return 1
ray.get(Actor.remote().ping.remote())
first = time.perf_counter()
ray.get([actor.ping.remote() for actor in [Actor.remote() for _ in range(3)]])
more = time.perf_counter()
print(json.dumps({{"import_s": imported - clock, "join_s": joined - imported, "first_actor_s": first - joined,
                  "three_more_actors_s": more - first}}))
"""


def relays(address: str, count: int) -> dict:
    """``count`` relays started at once by a fresh process (their tuning process, whose host
    they share), timed until every one has answered."""
    answer = subprocess.run([sys.executable, __file__, "--relays", address, str(count)], capture_output=True, text=True,
                            check=True)
    return json.loads(answer.stdout.strip().splitlines()[-1])


def start_relays(address: str, count: int) -> dict:
    clock = time.perf_counter()
    started = [subprocess.Popen([sys.executable, "-m", "kerntune.ray_worker", "--address", address, "--", *ECHO],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    for relay in started:
        relay.stdin.write("ping\n")
        relay.stdin.flush()
    answered = []
    for relay in started:
        relay.stdout.readline()
        answered.append(time.perf_counter() - clock)
    for relay in started:
        relay.stdin.close()
        relay.wait()
    return {"relays": count, "first_answer_s": min(answered), "all_answered_s": max(answered)}


def round_trips(address: str, sizes=(100, 200_000), lines: int = 100) -> dict:
    """Milliseconds a line of each size takes through one relay to an echoing worker and
    back, over ``lines`` lines one after the other."""
    relay = subprocess.Popen([sys.executable, "-m", "kerntune.ray_worker", "--address", address, "--", *ECHO],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    taken = {}
    for size in sizes:
        line = b"x" * size + b"\n"
        relay.stdin.write(line)
        relay.stdin.flush()
        relay.stdout.readline()
        clock = time.perf_counter()
        for _ in range(lines):
            relay.stdin.write(line)
            relay.stdin.flush()
            relay.stdout.readline()
        taken[f"round_trip_ms_{size}_bytes"] = 1000 * (time.perf_counter() - clock) / lines
    relay.stdin.close()
    relay.wait()
    return taken


def main() -> None:
    counts = [int(n) for n in sys.argv[1:]] or [1, 4]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": max(counts + [4])})
    cluster.wait_for_nodes()
    try:
        parts = subprocess.run([sys.executable, "-c", PARTS.format(address=cluster.address)], capture_output=True,
                               text=True, check=True).stdout.strip().splitlines()[-1]
        print("one driver:", json.dumps({k: round(v, 2) for k, v in json.loads(parts).items()}), flush=True)
        for count in counts:
            print(json.dumps({k: round(v, 2) for k, v in relays(cluster.address, count).items()}), flush=True)
        print("one relay:", json.dumps({k: round(v, 2) for k, v in round_trips(cluster.address).items()}), flush=True)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--relays"]:
        print(json.dumps(start_relays(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
