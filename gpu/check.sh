#!/usr/bin/env bash
# Every GPU check and benchmark, in one call on the device machine; builds nothing.
# Expects in .device/: the kerntune binary and the GPU test binary (gpu/prepare.sh puts
# them there), and in .whl/ Kernel Tuner's wheels for the side-by-side benchmark.
# Usage: bash gpu/check.sh [tests] [kt] [timing] [pytest] [triton] [schedule] [audit]   (default: all);
# logs go to $OUT. TRITON_STAGES picks bench/triton_matmul.py's stages (default: all);
# SCHEDULE_TRITON=none leaves out the Triton kernels of the schedule stage.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/kerntune-out}
mkdir -p "$OUT"
export KERNTUNE=$PWD/.device/kerntune KERNTUNE_BIN=$PWD/.device/kerntune KERNTUNE_REPO=$PWD
# The Python package, from the wheel built here (the GPU machine has no Rust toolchain).
python3 -m pip install -q --upgrade --no-deps --no-index --target /tmp/kerntune-site .device/kerntune-*.whl 2>&1 | grep -v WARNING | tail -1
export PYTHONPATH=/tmp/kerntune-site${PYTHONPATH:+:$PYTHONPATH}
stages=${*:-tests kt timing pytest triton schedule audit}
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
    pytest)
        echo "=== Python GPU tests"
        python3 -m pytest -q -p no:cacheprovider tests/python 2>&1 | tee "$OUT/pytest.log"
        summary+=("python tests: $(tail -1 "$OUT/pytest.log")")
        ;;
    triton)
        echo "=== Triton matmul benchmark"
        python3 bench/triton_matmul.py ${TRITON_STAGES:-} 2>&1 | tee "$OUT/triton_matmul.log"
        summary+=("$(sed -n '/=== summary/,$p' "$OUT/triton_matmul.log")")
        ;;
    schedule)
        echo "=== schedule tuning"
        if [ "${SCHEDULE_TRITON:-}" != none ]; then
            python3 bench/schedule.py ${SCHEDULE_TRITON:-} 2>&1 | tee "$OUT/schedule.log"
        fi
        "$KERNTUNE" tune examples/cuda/matmul_sram/spec.toml --db "$OUT/schedule-cuda.db" --max-fevals 30 --schedule --schedule-budget 1000 2>&1 | tee "$OUT/schedule-cuda.log"
        summary+=("$(sed -n '/=== schedule summary/,$p' "$OUT/schedule.log" 2>/dev/null)" "cuda matmul_sram: $(grep -E '^(Interleaved|Kept|Not kept|No schedule)' "$OUT/schedule-cuda.log" | tr '\n' ' ')")
        ;;
    audit)
        echo "=== schedule legality audit"
        python3 bench/schedule_audit.py 2>&1 | tee "$OUT/schedule_audit.log"
        summary+=("$(sed -n '/=== schedule audit/,$p' "$OUT/schedule_audit.log")")
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
