#!/usr/bin/env bash
# Builds (here, not on the GPU machine) what gpu/check.sh runs there, into .device/: the
# kerntune binary, the Rust GPU test binary, the single-move writer of the schedule audit,
# the Python wheel, and packed Python packages (.device/sites) for the controls and Ray stages.
set -euo pipefail
cd "$(dirname "$0")/.."
# Whatever an earlier prepare left goes first: if a step below fails, the script stops
# (set -e) and check.sh finds nothing to run, never a stale binary or wheel.
rm -f .device/kerntune .device/gpu-tests .device/single_moves .device/*.whl
mkdir -p .device
cargo build --release -q -p kerntune-cli
# The test binary's path, as cargo reports it, not the newest file of target/release/deps.
test_binary=$(cargo test --release -q -p kerntune-cli --test gpu --no-run --message-format json-render-diagnostics \
    | python3 -c 'import json, sys; print(*[m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m["target"]["name"] == "gpu"])')
[ -x "$test_binary" ] || { echo "gpu/prepare.sh: no GPU test binary built (got '$test_binary')" >&2; exit 1; }
cargo build --release -q -p kerntune-sass --example single_moves
strip -o .device/kerntune target/release/kerntune
strip -o .device/gpu-tests "$test_binary"
strip -o .device/single_moves target/release/examples/single_moves
# Stripped of its line tables (kept in release builds for backtraces): 3.5 MB instead of
# 12.7 MB, so that a call carries the wheel, the CLI and the Ray site within its 64 MiB.
maturin build --release --strip -q -o .device
wheels=(.device/kerntune-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "gpu/prepare.sh: expected one wheel in .device, found: ${wheels[*]}" >&2; exit 1; }
# Packages that two stages need and the GPU machine lacks (it runs Python 3.12 and has no
# internet; a call carries at most 64 MiB, and their wheels are 140 MB): downloaded once into
# .device/wheels, then per stage unpacked into one folder, trimmed of what the stage never runs,
# and packed with xz as .device/sites/STAGE.tar.xz, which gpu/check.sh unpacks onto PYTHONPATH.
# - controls (bench/controls.py): the nvidia-cuda-nvcc wheel's ptxas 13.3 alone, and CompileIQ
#   with what its ask/tell search imports (pymoo and theirs; numpy and scipy come with torch
#   and jax; it imports Ray too, so the stage also needs the ray pack). NVIDIA's licence:
#   downloaded for the user's run, never committed.
# - ray (bench/scale_out.py's Ray stages): Ray's core and its dependencies, without the Java
#   jars, the dashboard's web client and the libraries (data, train, tune, serve, rllib, llm).
# - kt (bench/kt_cuda.sh, bench/kt_examples.py): Kernel Tuner 1.5 and what it imports there.
download() {
    python3 -m pip download -q --disable-pip-version-check --python-version 3.12 --only-binary=:all: \
        --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 -d .device/wheels "$@"
}
controls=('nvidia-cuda-nvcc==13.3.*' 'compileiq==1.1.*' loguru 'pandas>=2.2.3,<3' python-dateutil pytz tzdata six pydantic
    pydantic-core annotated-types typing-inspection typing-extensions requests certifi idna charset-normalizer urllib3 tqdm
    'pymoo>=0.6.1,<0.7' moocore autograd alive-progress about-time graphemeu cffi pycparser colorama platformdirs psutil)
rm -rf .device/wheels .device/sites
download --no-deps "${controls[@]}"
download ray
download --no-deps 'kernel_tuner==1.5.*' python-constraint2 xmltodict jsonschema jsonschema-specifications referencing rpds-py attrs
# pack NAME WHEEL-PREFIX...: the wheels whose file names start with these, unpacked, trimmed, packed.
pack() {
    local name=$1 dir
    shift
    dir=$(mktemp -d)
    for prefix in "$@"; do
        for wheel in .device/wheels/"$prefix"-*.whl; do unzip -q -o "$wheel" -d "$dir"; done
    done
    find "$dir/nvidia/cu13" -mindepth 1 -maxdepth 1 ! -name bin -exec rm -rf {} + 2>/dev/null || true
    find "$dir/nvidia/cu13/bin" -mindepth 1 ! -name ptxas -exec rm -rf {} + 2>/dev/null || true
    rm -rf "$dir"/ray/{jars,rllib,data,serve,train,tune,llm,dashboard/client/build}
    mkdir -p .device/sites
    tar -C "$dir" -cf - . | xz -T0 -6 >".device/sites/$name.tar.xz"
    rm -rf "$dir"
}
pack controls nvidia_cuda_nvcc compileiq loguru pandas python_dateutil pytz tzdata six pydantic pydantic_core annotated_types \
    typing_inspection typing_extensions requests certifi idna charset_normalizer urllib3 tqdm pymoo moocore autograd alive_progress \
    about_time graphemeu cffi pycparser colorama platformdirs psutil
pack ray ray click filelock jsonschema jsonschema_specifications referencing rpds_py attrs msgpack packaging protobuf pyyaml \
    requests certifi idna charset_normalizer urllib3
pack kt kernel_tuner python_constraint2 xmltodict jsonschema jsonschema_specifications referencing rpds_py attrs
du -sh .device/sites/*
ls -la .device
