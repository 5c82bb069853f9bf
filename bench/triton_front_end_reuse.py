"""What the Triton compile worker saves by sharing the front end among sibling
configurations, without a GPU. Siblings share their tiles and differ in num_warps and
num_stages: the 9 combinations of examples/triton/matmul.py's PARAMS. Each group of
siblings is compiled for sm_90 as the worker compiles (its compile-only driver, its
shared-memory and register refusals), twice, each time in a fresh Triton cache: every
configuration from the kernel's source, then through the worker's FrontEnds (the first from
the source, the 8 others from its TTIR). Specialized as Triton's JIT specializes a
contiguous 1024^3 fp16 call. One compile before the timings pays the one-off set-up.
Times are CPU seconds (this process and its ptxas runs), which other work on the machine
disturbs less than wall time; each is the least of REPEATS runs, the two ways alternating.

Usage: python3 bench/triton_front_end_reuse.py [BM,BN,BK ...]
       (needs triton and kerntune; prints a table, one row per group of tiles)"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton"))

import matmul  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402

from kerntune import _triton_worker as worker  # noqa: E402

TILES = [(32, 32, 32), (64, 64, 32), (64, 128, 64), (128, 128, 64), (128, 256, 64)]
SHARED_LIMIT = 232448  # an H100's, as kerntune.compile's default
TARGET = GPUTarget("cuda", 90, 32)
REPEATS = 3


def source(tiles):
    kernel = matmul.matmul_kernel.fn
    unit = {"stride_ak", "stride_bn", "stride_cn"}
    constexprs = {"BLOCK_SIZE_M": tiles[0], "BLOCK_SIZE_N": tiles[1], "BLOCK_SIZE_K": tiles[2], "GROUP_SIZE_M": 8}
    signature, attrs = {}, {}
    for index, name in enumerate(kernel.arg_names):
        signature[name] = "constexpr" if name in unit or name in constexprs else ("*fp16" if name.endswith("_ptr") else "i32")
        if signature[name] != "constexpr":
            attrs[(index,)] = [["tt.divisibility", 16]]
    return ASTSource(kernel, signature, {**constexprs, **{name: 1 for name in unit}}, attrs)


def cpu_seconds():
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def siblings(tiles, front_ends):
    """CPU seconds to compile the group, from the source alone (``front_ends`` None) or
    through ``front_ends``, in a fresh Triton cache; and how many configurations compiled."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-front-end-")
    backend = make_backend(TARGET)
    compiled = 0
    start = cpu_seconds()
    for num_stages in matmul.PARAMS["num_stages"]:
        for num_warps in matmul.PARAMS["num_warps"]:
            options = backend.parse_options({"num_warps": num_warps, "num_stages": num_stages}).__dict__
            try:
                if front_ends is None:
                    triton.compile(source(tiles), target=TARGET, options=options)
                else:
                    worker.compile_sharing_front_ends(source(tiles), TARGET, options, front_ends)
                compiled += 1
            except worker.OverDeviceLimit:
                pass
    return cpu_seconds() - start, compiled


def compare(tiles, front_ends):
    """The least CPU seconds of REPEATS runs from the source and through ``front_ends``,
    the two ways alternating, and how many configurations compiled."""
    runs = {False: [], True: []}
    for repeat in range(REPEATS):
        for sharing in (repeat % 2 == 1, repeat % 2 == 0):
            # A fresh folder, as on a fresh cache: the group's first compiles from the source.
            front_ends.directory = tempfile.mkdtemp(prefix="ttir-")
            seconds, compiled = siblings(tiles, front_ends if sharing else None)
            runs[sharing].append(seconds)
    return min(runs[False]), min(runs[True]), compiled


def main(tiles):
    worker.compile_only_driver(TARGET)
    worker.refuse_large_shared_memory(SHARED_LIMIT)
    front_ends = worker.FrontEnds(tempfile.mkdtemp(prefix="ttir-"))
    worker.keep_front_ends(front_ends)
    siblings((16, 16, 16), None)  # the one-off set-up
    print(f"{'BM BN BK':<14}{'compiled':>9}{'source s':>10}{'shared s':>10}{'saving':>8}")
    totals = [0.0, 0.0]
    for group in tiles:
        alone, shared, compiled = compare(group, front_ends)
        totals[0] += alone
        totals[1] += shared
        print(f"{' '.join(map(str, group)):<14}{f'{compiled}/9':>9}{alone:>10.3f}{shared:>10.3f}{100 * (1 - shared / alone):>7.1f}%")
    print(f"{'all':<14}{'':>9}{totals[0]:>10.3f}{totals[1]:>10.3f}{100 * (1 - totals[1] / totals[0]):>7.1f}%")


if __name__ == "__main__":
    main([tuple(int(n) for n in arg.split(",")) for arg in sys.argv[1:]] or TILES)
