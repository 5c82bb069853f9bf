"""A chosen ptxas for Triton kernels (``ptxas=`` of ``tune``, ``compile`` and ``autotune``):
the assembler behind ``TRITON_PTXAS_PATH`` in the compile workers, so that compiler controls
(ACF files need a ptxas of their own version) reach a ptxas that accepts them.

``"pip"`` names the ptxas of the ``nvidia-cuda-nvcc`` wheel (``nvidia/cu13/bin/ptxas`` in
site-packages); anything else is a path. Its version enters the tuning's fingerprint: results
measured with one ptxas are not answers for another. The same rules as the CUDA spec's
``[compiler] ptxas`` (``kerntune_device::ptxas`` in Rust).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from typing import Optional

from kerntune._errors import ArgumentError

PIP = "pip"


def pip_ptxas() -> Optional[str]:
    """The ``nvidia-cuda-nvcc`` wheel's ptxas in this interpreter's import path, newest CUDA first."""
    for entry in sys.path:
        for found in sorted(glob.glob(os.path.join(entry, "nvidia", "cu*", "bin", "ptxas")), reverse=True):
            if os.path.isfile(found):
                return found
    return None


def version_of(path: str) -> str:
    """``13.3.73`` from ``ptxas --version``; ``ArgumentError`` (one line) when it does not answer as ptxas."""
    if not os.path.isfile(path):
        raise ArgumentError(f"ptxas {path}: no such file")
    try:
        run = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ArgumentError(f"ptxas {path}: cannot run it ({error})") from None
    match = re.search(r", V(\d+\.\d+[\d.]*)", run.stdout)
    if run.returncode != 0 or match is None:
        raise ArgumentError(f"ptxas {path}: `--version` did not answer as ptxas does")
    return match.group(1)


def resolve(choice: Optional[str]) -> Optional[dict]:
    """``{"path", "version"}`` of the ptxas ``choice`` names (``"pip"``, a path, or a name on
    the PATH); ``None`` for ``None`` (Triton's own)."""
    if choice is None:
        return None
    if not isinstance(choice, (str, os.PathLike)):
        raise ArgumentError(f"ptxas: give a path or \"pip\", not {choice!r}")
    choice = os.fspath(choice)
    if choice == PIP:
        path = pip_ptxas()
        if path is None:
            raise ArgumentError(f"ptxas=\"pip\": this Python has no nvidia-cuda-nvcc package ({sys.executable} -m pip "
                                "install 'nvidia-cuda-nvcc==13.3.*')")
    elif os.sep not in choice and not os.path.exists(choice):
        path = shutil.which(choice)
        if path is None:
            raise ArgumentError(f"ptxas=\"{choice}\": not found on the PATH")
    else:
        path = os.path.abspath(choice)
    return {"path": path, "version": version_of(path)}
