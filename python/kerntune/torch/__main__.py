"""``python -m kerntune.torch``: the GEMM answers a results store keeps for Inductor, listed or
written as Inductor's lookup table, for a machine that compiles a model without tuning it.

    python -m kerntune.torch stored [--db DB] [--device NAME] [--json]
    python -m kerntune.torch export OUT.json [--db DB] [--device NAME]

``--device`` names the GPU as torch does (``"NVIDIA H100 80GB HBM3"``); without it, this
machine's GPU. Answers are those of this torch and Triton. Exit status: 0, 1 when the store
has no answer for that GPU, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from kerntune import KerntuneError
from kerntune.torch import stored


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kerntune.torch", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("stored", "list the stored answers"), ("export", "write them as Inductor's lookup table")):
        command = commands.add_parser(name, help=text)
        if name == "export":
            command.add_argument("out", help="the JSON file to write")
        else:
            command.add_argument("--json", action="store_true", help="the rows as JSON")
        command.add_argument("--db", help="the results store (default: kerntune's)")
        command.add_argument("--device", help="the GPU's name as torch gives it (default: this machine's GPU)")
    args = parser.parse_args(argv)
    if args.device is None and not torch.cuda.is_available():
        print("error: no GPU here to name the answers' GPU: give --device NAME (as torch.cuda.get_device_name() "
              "names it)", file=sys.stderr)
        return 2
    try:
        table = stored(args.db, args.device)
    except KerntuneError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not table.rows:
        print(f"error: the store keeps no GEMM answers for {args.device or 'this GPU'} with this torch and Triton",
              file=sys.stderr)
        return 1
    if args.command == "export":
        print(f"{len(table.rows)} GEMMs written to {table.save(args.out)}")
    elif args.json:
        print(json.dumps(table.rows))
    else:
        print(table.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
