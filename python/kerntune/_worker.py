"""Entry point of kerntune's worker processes: ``python -m kerntune._worker __worker KIND``.

``bench`` runs the benchmark worker (Rust, in the extension module) on ``--device N``;
``compile`` runs the NVRTC compile worker, or, with ``--triton``, the Triton compile worker
(which loads the kernel setup each request names; ``--triton-arch N`` warms Triton's compiler
up for sm_N before the first request); ``controls`` runs CompileIQ's worker (``kerntune._compileiq.serve``), which
proposes ACF files to the run's compiler-controls stage. Workers ignore Ctrl-C: the tuner
decides when they stop.
"""

import signal
import sys


def main(argv):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    args = list(argv)
    triton, arch = "--triton" in args, None
    if triton:
        args.remove("--triton")
    if "--triton-arch" in args:
        at = args.index("--triton-arch")
        arch = int(args[at + 1])
        del args[at : at + 2]
    if args[:1] == ["__worker"]:
        args = args[1:]
    kind = args[0] if args else ""
    if kind == "compile" and triton:
        from kerntune._triton_worker import main as triton_main

        triton_main(arch)
        return 0
    if kind == "controls":
        from kerntune._compileiq import serve

        return serve(args[1:])
    from kerntune import _kerntune

    if kind == "bench":
        device = int(args[args.index("--device") + 1]) if "--device" in args else 0
        return _kerntune.run_bench_worker(device)
    if kind == "compile":
        return _kerntune.run_compile_worker()
    print(f"kerntune worker: unknown kind {kind!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
