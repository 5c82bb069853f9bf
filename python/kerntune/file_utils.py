"""Result files in the T4 format (the autotuning community's exchange format), as Kernel
Tuner scripts write them with ``kernel_tuner.file_utils``: the results of
``kerntune.tune_kernel`` and the metadata of the machine they were measured on.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Sequence

from kerntune import _kerntune
from kerntune.util import NpEncoder

__all__ = ["get_t4_metadata", "get_t4_results", "store_metadata_file", "store_output_file"]

SCHEMA_VERSION = "1.0.0"


def _json_name(filename) -> str:
    name = os.fspath(filename)
    return name if name.endswith(".json") else name + ".json"


def _write(filename, text: str) -> None:
    path = _json_name(filename)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _t4_text(results: Sequence[dict], tune_params: dict, objective: str) -> str:
    if not isinstance(objective, str):
        raise TypeError("objective: the T4 format holds one objective; give its name")
    return _kerntune.t4_results(json.dumps(list(results), cls=NpEncoder), list(tune_params), objective)


def get_t4_results(results: Sequence[dict], tune_params: dict, objective: str = "time") -> dict:
    """The T4 document of ``results`` (the list ``tune_kernel`` returns), written by
    kerntune's T4 writer, the one ``kerntune export --format t4`` uses."""
    return json.loads(_t4_text(results, tune_params, objective))


def store_output_file(output_filename, results: Sequence[dict], tune_params: dict, objective: str = "time"):
    """Writes ``results`` as a T4 results file (``.json`` is appended if missing)."""
    _write(output_filename, _t4_text(results, tune_params, objective))


def _nvidia_smi() -> list:
    """The GPUs nvidia-smi reports, or nothing where there is none."""
    fields = "name,driver_version,memory.total,clocks.max.sm,power.limit"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    names = fields.split(",")
    return [dict(zip(names, (v.strip() for v in line.split(",")))) for line in out.stdout.splitlines() if line.strip()]


def _requirements() -> list:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("kerntune", "numpy", "nvidia-cuda-nvrtc"):
        try:
            found.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            pass
    return found


def get_t4_metadata() -> dict:
    """The T4 metadata document of this machine: its system, GPUs and packages."""
    metadata = {
        "operating_system": platform.system() or "unidentified OS",
        "hardware": {"hardware_description": [{"machine": platform.machine(), "processor": platform.processor()}]},
        "environment": {
            "device_query": {"nvidia-smi": _nvidia_smi()},
            "requirements": _requirements(),
            "python": sys.version.split()[0],
        },
    }
    return {"metadata": metadata, "schema_version": SCHEMA_VERSION}


def store_metadata_file(metadata_filename):
    """Writes the T4 metadata of this machine (``.json`` is appended if missing)."""
    _write(metadata_filename, json.dumps(get_t4_metadata(), cls=NpEncoder))
