#!/usr/bin/env bash
# Every GPU check and benchmark, in one call on the device machine; builds nothing.
# Expects in .device/: the kerntune binary and the GPU test binary (gpu/prepare.sh puts
# them there), and in .whl/ Kernel Tuner's wheels for the side-by-side benchmark.
# Usage: bash gpu/check.sh [tests] [kt] [timing]   (default: all); logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/kerntune-out}
mkdir -p "$OUT"
export KERNTUNE=$PWD/.device/kerntune KERNTUNE_BIN=$PWD/.device/kerntune KERNTUNE_REPO=$PWD
stages=${*:-tests kt timing}
summary=()
for stage in $stages; do
    case $stage in
    tests)
        echo "=== GPU tests"
        if .device/gpu-tests --ignored --test-threads 1 --nocapture 2>&1 | tee "$OUT/gpu-tests.log"; then
            summary+=("gpu tests: $(grep -E '^test result' "$OUT/gpu-tests.log" | tail -1)")
        else
            summary+=("gpu tests: FAILED ($(grep -E '^test result' "$OUT/gpu-tests.log" | tail -1))")
        fi
        ;;
    kt)
        echo "=== kerntune versus Kernel Tuner"
        bash bench/kt_cuda.sh 2>&1 | tee "$OUT/kt_cuda.log"
        summary+=("$(grep -E '^run [12]:' "$OUT/kt_cuda.log")")
        ;;
    timing)
        echo "=== timing agreement"
        python3 bench/timing_agreement.py bench/anchors/kt_cuda/matmul_sram.cu "$OUT/kt_cuda_1.db" 8 2>&1 | tee "$OUT/timing.log"
        summary+=("timing: $(tail -1 "$OUT/timing.log")")
        ;;
    esac
done
echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
