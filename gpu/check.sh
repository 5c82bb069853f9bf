#!/usr/bin/env bash
# Every GPU check and benchmark, in one call on the device machine; builds nothing.
# Expects in .device/: the kerntune binary and the GPU test binary (gpu/prepare.sh puts
# them there), the packed packages of the controls and scale stages in .device/sites (carry
# the one a call needs: each call takes 64 MiB), and in .whl/ Kernel Tuner's wheels for the
# side-by-side benchmark.
# PYTEST_FILES and PYTEST_K (a -k expression) narrow the pytest stage.
# Usage: bash gpu/check.sh [tests] [kt] [kt_examples] [kt_real] [nsight] [tutorials] [timing] [pytest] [autotune] [triton] [schedule] [audit] [finalists] [vendor] [controls] [energy] [shapes] [shapes_scale] [landscapes] [hub] [first_batch] [scale] [moe] [inductor] [inductor_landscapes]
# (default: all but shapes (bench/shapes.py: BUDGET, ROUNDS, SEED), shapes_scale (needs several GPUs), landscapes, which records held-out landscapes (LANDSCAPE_SHAPES picks the
# shapes), hub (the benchmark hub's convolution script over its space: needs the hub's
# kernels in .hub/kernels or $HUB_DIR, never committed; HUB_VARIANTS picks f15 f7 f3 f11 f5), first_batch (bench/first_batch_order.py: SHAPE, RUNS), and scale, which needs two GPUs: run it on nvidia-h200-x2, one comparison
# per call, SCALE_STAGES=gpus|nodes|ranks|raygpus); logs go to $OUT. Exits non-zero if any step failed (the summary says which). TRITON_STAGES picks bench/triton_matmul.py's stages (default: all);
# SCHEDULE_TRITON=none leaves out the Triton kernels of the schedule stage. kt_real (not in the
# default) needs Kernel Tuner's example scripts in .device/kt-real or $KT_REAL_DIR (never committed);
# KT_REAL_ARGS="--kernel-tuner" also runs them under Kernel Tuner (.device/sites/kt.tar.xz) and compares the picks;
# tutorials (not in the default) needs Triton 3.6.0's tutorials in .tutorials or $TUTORIALS_DIR
# (never committed; TUTORIAL_STAGES picks 03 08 06 09).
# moe (not in the default) runs bench/moe_real.py on vLLM's fused-MoE kernel: vLLM's files in
# .device/vllm/src or $MOE_DIR (never committed); MOE_MODES (default --calibrate; any of --calibrate
# --brute-force --kerntune --compare), MOE_SHAPE (mixtral, qwen3), MOE_DTYPE (bf16, fp16, fp8),
# MOE_BATCH_SIZES (1,64,...), MOE_CONFIGS (the brute force's slice START:END), MOE_GPUS (all), MOE_ARGS
# (more options); its files go to $OUT/moe.
# inductor (not in the default) runs bench/inductor.py (INDUCTOR_ARGS: --models mlp,llama --tokens 2048
# --rounds 20 --budget 60 --exhaustive-s S). inductor_landscapes (not in the default) brute-forces the GEMMs
# of bench/inductor.py's models over Inductor's EXHAUSTIVE space (INDUCTOR_GEMMS picks them).
# nsight (not in the default) times one configuration of Kernel Tuner's spmv and stencil three ways
# (kerntune, Kernel Tuner, Nsight Compute's gpu__time_duration): .device/kt-real and the kt site, like kt_real.
set -u -o pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/kerntune-out}
mkdir -p "$OUT"
export KERNTUNE=$PWD/.device/kerntune KERNTUNE_BIN=$PWD/.device/kerntune KERNTUNE_REPO=$PWD
# The Python package, from the one wheel gpu/prepare.sh built (the GPU machine has no Rust
# toolchain), into a fresh folder: nothing of an earlier install can be imported instead.
wheels=(.device/kerntune-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
    echo "expected exactly one kerntune wheel in .device (run gpu/prepare.sh), found: ${wheels[*]}" >&2
    exit 1
fi
rm -rf /tmp/kerntune-site
if ! python3 -m pip install -q --no-deps --no-index --target /tmp/kerntune-site "${wheels[0]}"; then
    echo "installing the kerntune wheel failed" >&2
    exit 1
fi
# A skipped GPU test on the GPU machine is a failure, not a pass (tests/python/conftest.py).
export KERNTUNE_REQUIRE_GPU=1
export PYTHONPATH=/tmp/kerntune-site${PYTHONPATH:+:$PYTHONPATH}
stages=${*:-tests kt kt_examples timing pytest autotune triton schedule audit finalists vendor controls energy}
summary=()
failed=()
# Runs a stage's command with its output shown and kept in $OUT/NAME.log; a failure is noted.
step() {
    local name=$1
    shift
    if ! "$@" 2>&1 | tee "$OUT/$name.log"; then
        failed+=("$name")
    fi
}
# site NAME: unpacks .device/sites/NAME.tar.xz (gpu/prepare.sh) into a fresh /tmp/site-NAME.
site() {
    rm -rf "/tmp/site-$1"
    [ -f ".device/sites/$1.tar.xz" ] && mkdir -p "/tmp/site-$1" && tar -C "/tmp/site-$1" -xJf ".device/sites/$1.tar.xz"
}
for stage in $stages; do
    case $stage in
    tests)
        echo "=== GPU tests"
        step gpu-tests .device/gpu-tests --ignored --test-threads 1 --nocapture
        summary+=("gpu tests: $(grep -E '^test result' "$OUT/gpu-tests.log" | tail -1)")
        ;;
    kt)
        echo "=== kerntune versus Kernel Tuner"
        site kt || echo "note: .device/sites/kt.tar.xz is missing (gpu/prepare.sh): Kernel Tuner must be installed"
        step kt_cuda env PYTHONPATH="/tmp/site-kt:$PYTHONPATH" bash bench/kt_cuda.sh
        summary+=("$(grep -E '^run [12]:' "$OUT/kt_cuda.log")")
        ;;
    kt_examples)
        echo "=== Kernel Tuner's example patterns: kerntune versus Kernel Tuner"
        site kt || echo "note: .device/sites/kt.tar.xz is missing (gpu/prepare.sh): Kernel Tuner must be installed"
        step kt_examples env PYTHONPATH="/tmp/site-kt:$PYTHONPATH" python3 bench/kt_examples.py ${KT_EXAMPLES_ARGS:-}
        summary+=("$(sed -n '/=== kt_examples summary/,$p' "$OUT/kt_examples.log")")
        ;;
    tutorials)
        echo "=== Triton's tutorials as published, the decorator renamed, against Triton's autotuner (bench/tutorials.py)"
        step tutorials python3 bench/tutorials.py "${TUTORIALS_DIR:-.tutorials}" ${TUTORIAL_STAGES:-}
        summary+=("$(sed -n '/=== tutorials summary/,$p' "$OUT/tutorials.log")")
        ;;
    nsight)
        echo "=== Kernel Tuner's spmv and stencil: kerntune's, Kernel Tuner's and Nsight Compute's time of one configuration (bench/kt_nsight.py)"
        site kt || echo "note: .device/sites/kt.tar.xz is missing (gpu/prepare.sh): Kernel Tuner must be installed"
        step nsight env PYTHONPATH="/tmp/site-kt:$PYTHONPATH" python3 bench/kt_nsight.py "${KT_REAL_DIR:-.device/kt-real}" ${NSIGHT_EXAMPLES:-}
        summary+=("$(sed -n '/=== nsight summary/,$p' "$OUT/nsight.log")")
        ;;
    kt_real)
        echo "=== Kernel Tuner's own example scripts with their imports switched (bench/kt_real.py)"
        site kt || true  # Kernel Tuner itself only for KT_REAL_ARGS=--kernel-tuner
        step kt_real env PYTHONPATH="/tmp/site-kt:$PYTHONPATH" python3 bench/kt_real.py "${KT_REAL_DIR:-.device/kt-real}" ${KT_REAL_ARGS:-}
        summary+=("$(grep -E '^\{' "$OUT/kt_real.log")")
        ;;
    moe)
        echo "=== vLLM's fused-MoE kernel: its own tuning script against kerntune (bench/moe_real.py)"
        step moe python3 bench/moe_real.py "${MOE_DIR:-.device/vllm/src}" --shape "${MOE_SHAPE:-mixtral}" \
            --dtype "${MOE_DTYPE:-bf16}" ${MOE_BATCH_SIZES:+--batch-sizes "$MOE_BATCH_SIZES"} \
            ${MOE_CONFIGS:+--configs "$MOE_CONFIGS"} --gpus "${MOE_GPUS:-all}" --out "$OUT/moe" \
            ${MOE_MODES:---calibrate} ${MOE_ARGS:-}
        summary+=("$(sed -n '/=== moe_real summary/,$p' "$OUT/moe.log")")
        ;;
    autotune)
        echo "=== 16-config first call: @kerntune.autotune versus @triton.autotune"
        step triton_autotune python3 bench/triton_autotune.py ${AUTOTUNE_ROUNDS:-3}
        summary+=("$(sed -n '/=== triton_autotune summary/,$p' "$OUT/triton_autotune.log")")
        ;;
    inductor)
        echo "=== torch.compile's GEMMs: kerntune.torch against Inductor's max-autotune and eager"
        step inductor python3 bench/inductor.py ${INDUCTOR_ARGS:-}
        summary+=("$(sed -n '/=== inductor summary/,$p' "$OUT/inductor.log")")
        ;;
    pytest)
        echo "=== Python GPU tests"
        step pytest python3 -m pytest -q -rs -p no:cacheprovider ${PYTEST_FILES:-tests/python} ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_ARGS:-}
        summary+=("python tests: $(tail -1 "$OUT/pytest.log")")
        ;;
    triton)
        echo "=== Triton matmul benchmark"
        step triton_matmul python3 bench/triton_matmul.py ${TRITON_STAGES:-}
        summary+=("$(sed -n '/=== summary/,$p' "$OUT/triton_matmul.log")")
        ;;
    schedule)
        echo "=== schedule tuning"
        if [ "${SCHEDULE_TRITON:-}" != none ]; then
            step schedule python3 bench/schedule.py ${SCHEDULE_TRITON:-}
        fi
        step schedule-cuda "$KERNTUNE" tune examples/cuda/matmul_sram/spec.toml --db "$OUT/schedule-cuda.db" --max-fevals 30 --schedule --schedule-budget 1000
        summary+=("$(sed -n '/=== schedule summary/,$p' "$OUT/schedule.log" 2>/dev/null)" "cuda matmul_sram: $(grep -E '^(Interleaved|Kept|Not kept|No schedule)' "$OUT/schedule-cuda.log" | tr '\n' ' ')")
        ;;
    audit)
        echo "=== schedule legality audit"
        step schedule_audit python3 bench/schedule_audit.py
        summary+=("$(sed -n '/=== schedule audit/,$p' "$OUT/schedule_audit.log")")
        ;;
    finalists)
        echo "=== finalists re-timed against an A/A control (CUDA matmul, CLI)"
        step finalists "$KERNTUNE" tune examples/cuda/matmul_sram/spec.toml --db "$OUT/finalists.db" --max-fevals 40 --finalists 4
        summary+=("finalists: $(grep -E '^(The best [0-9]+ timed|Clocks over|The search|A tie|.* becomes the best)' "$OUT/finalists.log" | tr '\n' ' ')")
        ;;
    shapes)
        echo "=== many-shape runs: one matmul at five batch sizes, learning from the nearest size against each size alone (bench/shapes.py)"
        step shapes python3 bench/shapes.py
        summary+=("$(sed -n '/=== shapes summary/,$p' "$OUT/shapes.log")")
        ;;
    shapes_scale)
        echo "=== a many-shape brute force on one GPU, then on every GPU of the host (bench/shapes.py scale)"
        step shapes_scale python3 bench/shapes.py scale
        summary+=("$(sed -n '/=== shapes scale summary/,$p' "$OUT/shapes_scale.log")")
        ;;
    landscapes)
        echo "=== landscapes: brute forces of the Triton matmul over 2400 configurations at several shapes"
        step record_landscapes python3 bench/record_landscapes.py ${LANDSCAPE_SHAPES:-}
        summary+=("$(sed -n '/=== recorded landscapes/,$p' "$OUT/record_landscapes.log")")
        ;;
    inductor_landscapes)
        echo "=== landscapes: kerntune.torch's GEMM template over Inductor's EXHAUSTIVE space (bench/record_inductor_landscapes.py)"
        step record_inductor python3 bench/record_inductor_landscapes.py ${INDUCTOR_GEMMS:-}
        summary+=("$(sed -n '/=== recorded inductor landscapes/,$p' "$OUT/record_inductor.log")")
        ;;
    hub)
        echo "=== landscapes: the benchmark hub's convolution script, run through kerntune (bench/record_hub_landscapes.py)"
        step record_hub python3 bench/record_hub_landscapes.py "${HUB_DIR:-.hub/kernels}" ${HUB_VARIANTS:-}
        summary+=("$(sed -n '/=== record_hub summary/,$p' "$OUT/record_hub.log")")
        ;;
    first_batch)
        echo "=== the order a first batch of 16 comes back in on the GPU, against the simulation's"
        step first_batch_order python3 bench/first_batch_order.py
        summary+=("$(sed -n '/=== first batch order/,$p' "$OUT/first_batch_order.log")")
        ;;
    vendor)
        echo "=== kerntune's pick, Triton's pick and cuBLAS through one timing path, interleaved"
        step vendor_compare python3 bench/vendor_compare.py
        summary+=("$(sed -n '/=== vendor_compare summary/,$p' "$OUT/vendor_compare.log")")
        ;;
    controls)
        echo "=== compiler controls: CompileIQ's ACF search and the ptxas knobs, against an A/A control"
        # CompileIQ imports Ray: both packs (gpu/prepare.sh), carried in two calls if need be.
        if site controls && site ray; then
            step controls env PYTHONPATH="/tmp/site-controls:/tmp/site-ray:$PYTHONPATH" python3 bench/controls.py
        else
            echo ".device/sites/{controls,ray}.tar.xz are missing or broken (run gpu/prepare.sh and carry them)" | tee "$OUT/controls.log"
            failed+=("controls")
        fi
        summary+=("$(sed -n '/=== controls summary/,$p' "$OUT/controls.log")")
        ;;
    scale)
        echo "=== scaling out: GPUs, Ray nodes, ranks (bench/scale_out.py ${SCALE_STAGES:-gpus nodes ranks})"
        # Ray, for the stages that start a cluster, from the packed site (gpu/prepare.sh).
        site ray || echo "note: .device/sites/ray.tar.xz is missing: the Ray stages will say Ray is not installed"
        step scale_out env PYTHONPATH="/tmp/site-ray:$PYTHONPATH" python3 bench/scale_out.py ${SCALE_STAGES:-}
        summary+=("$(sed -n '/=== scale_out summary/,$p' "$OUT/scale_out.log")")
        ;;
    energy)
        echo "=== NVML energy per launch against a long run's counter; graph timing of a tiny kernel"
        step energy_timing python3 bench/energy_timing.py ${ENERGY_LONG_S:-10}
        summary+=("$(sed -n '/=== energy_timing summary/,$p' "$OUT/energy_timing.log")")
        ;;
    timing)
        echo "=== timing agreement"
        step timing python3 bench/timing_agreement.py bench/anchors/kt_cuda/matmul_sram.cu "$OUT/kt_cuda_1.db" 8
        summary+=("timing: $(tail -1 "$OUT/timing.log")")
        ;;
    *)
        echo "unknown stage $stage" >&2
        failed+=("$stage")
        ;;
    esac
done
echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED steps: ${failed[*]}"
    exit 1
fi
