"""One answer for every process of a job (kerntune._ranks), without a GPU: processes that
share a store take turns through its lock, so one measures and the others read its answer;
one that dies while tuning hands the tuning on instead of leaving the others hanging. Under
torch.distributed (gloo, on the CPU; skipped without torch), rank 0's answer, or its
failure, reaches every rank."""

import json
import multiprocessing
import os
import socket

import pytest

from kerntune._ranks import RankTuningError, agree, store_lock

# The tuning stands in for kerntune.tune on a store (a JSON file): the first call "measures"
# (logs it, takes a while) and records the answer, later calls read it back.
ANSWERS = {"first": {"BLOCK": 64}, "second": {"BLOCK": 128}}


def _tune_on_store(store, log, answer, die=False):
    def tune_once():
        if os.path.exists(store):
            with open(store) as f:
                return json.load(f)
        with open(log, "a") as f:
            f.write(f"{os.getpid()} measures\n")
        if die:
            os._exit(3)  # dies while tuning, holding the lock
        import time

        time.sleep(0.3)
        with open(store, "w") as f:
            json.dump(answer, f)
        return answer

    return tune_once


def _process(folder, name, die, out):
    store, log = os.path.join(folder, "store.json"), os.path.join(folder, "log")
    answer = agree("kernel for key (1024,)", os.path.join(folder, "locks"),
                   _tune_on_store(store, log, ANSWERS[name], die), timeout=30)
    out.put((name, answer))


def _run(folder, plan):
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    processes = [context.Process(target=_process, args=(folder, name, die, out)) for name, die in plan]
    for process in processes:
        process.start()
    results = []
    for process, (_, die) in zip(processes, plan):
        if not die:
            results.append(out.get(timeout=60))
    for process in processes:
        process.join(timeout=60)
    return results, processes


def _measurements(folder):
    with open(os.path.join(folder, "log")) as f:
        return f.read().splitlines()


def test_processes_sharing_a_store_tune_once_and_all_get_that_answer(tmp_path):
    results, processes = _run(str(tmp_path), [("first", False), ("second", False), ("second", False)])
    answers = [answer for _, answer in results]
    assert len(_measurements(tmp_path)) == 1, "one process measured"
    assert answers[0] in ANSWERS.values() and answers == [answers[0]] * 3, answers
    assert all(p.exitcode == 0 for p in processes)


def test_a_process_that_dies_while_tuning_hands_the_tuning_on(tmp_path):
    # The first process takes the lock and dies while measuring; the second then holds
    # it, measures, and answers: nobody hangs.
    folder = str(tmp_path)
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    dying = context.Process(target=_process, args=(folder, "first", True, out))
    dying.start()
    dying.join(timeout=60)
    assert dying.exitcode == 3
    survivor = context.Process(target=_process, args=(folder, "second", False, out))
    survivor.start()
    assert out.get(timeout=60) == ("second", ANSWERS["second"])
    survivor.join(timeout=60)
    assert len(_measurements(tmp_path)) == 2, "the survivor measured again"


def test_a_process_waits_no_longer_than_its_timeout(tmp_path):
    with store_lock(str(tmp_path), "kernel for key (1,)", 5):
        with pytest.raises(RankTuningError, match=r"another process has been tuning it .* KERNTUNE_RANK_TIMEOUT"):
            with store_lock(str(tmp_path), "kernel for key (1,)", 0.2):
                pass


def _rank(rank, port, folder, fail, out):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    log = os.path.join(folder, f"tuned.{rank}")

    def tune_once():
        open(log, "w").close()
        if fail:
            raise RuntimeError("no valid configuration")
        return {"BLOCK": 32 * (rank + 1)}

    try:
        out.put((rank, "answer", agree("kernel for key (8,)", os.path.join(folder, "locks"), tune_once, timeout=60)))
    except Exception as error:
        out.put((rank, type(error).__name__, str(error)))
    finally:
        dist.destroy_process_group()


def _two_ranks(folder, fail):
    pytest.importorskip("torch.distributed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    ranks = [context.Process(target=_rank, args=(rank, port, folder, fail, out)) for rank in (0, 1)]
    for process in ranks:
        process.start()
    results = dict((rank, (kind, value)) for rank, kind, value in (out.get(timeout=120) for _ in ranks))
    for process in ranks:
        process.join(timeout=60)
    return results


def test_under_torch_distributed_rank_0_tunes_and_every_rank_launches_its_answer(tmp_path):
    results = _two_ranks(str(tmp_path), fail=False)
    assert results == {0: ("answer", {"BLOCK": 32}), 1: ("answer", {"BLOCK": 32})}
    assert os.path.exists(tmp_path / "tuned.0") and not os.path.exists(tmp_path / "tuned.1"), "tuned once"


def test_under_torch_distributed_a_failure_of_rank_0_reaches_the_others(tmp_path):
    results = _two_ranks(str(tmp_path), fail=True)
    assert results[0] == ("RuntimeError", "no valid configuration")
    kind, message = results[1]
    assert kind == "RankTuningError"
    assert "rank 0, which tunes for every rank, failed: RuntimeError: no valid configuration" in message
