#!/usr/bin/env bash
# kerntune versus Kernel Tuner 1.5 (cupy backend) brute-forcing the same shared-memory
# matmul space (107 configurations, N = 4096, fp32) on one GPU, in one call.
# Needs: the kerntune binary ($KERNTUNE, default .device/kerntune) and Kernel Tuner 1.5 (on
# the GPU machine, gpu/check.sh puts gpu/prepare.sh's packed .device/sites/kt.tar.xz on
# PYTHONPATH).
# Prints one JSON line per run and a table with the ratios last.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${KERNTUNE:-.device/kerntune}
OUTDIR=${OUT:-/tmp}
python3 -c "import kernel_tuner" || { echo "Kernel Tuner does not import: pip install kernel_tuner, or run this through gpu/check.sh" >&2; exit 1; }
run_kerntune() {
    rm -f "$OUTDIR/kt_cuda_$1.db"*
    local start end
    start=$(date +%s%N)
    "$K" tune bench/kt_cuda/spec.toml --db "$OUTDIR/kt_cuda_$1.db" --json > "$OUTDIR/kerntune_$1.json"
    end=$(date +%s%N)
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['process_wall_s']=int(sys.argv[2])/1e9; json.dump(d, open(sys.argv[1],'w'))" "$OUTDIR/kerntune_$1.json" "$((end - start))"
}
run_kerntune 1
N=4096 python3 bench/anchors/kt_cuda/kt_cuda_anchor.py > "$OUTDIR/kernel_tuner.json"
run_kerntune 2
python3 - "$OUTDIR" <<'PY'
import json, sys
out = sys.argv[1]
kt = json.load(open(f"{out}/kernel_tuner.json"))
runs = [json.load(open(f"{out}/kerntune_{i}.json")) for i in (1, 2)]
print(json.dumps({"kernel_tuner": kt}))
for r in runs:
    print(json.dumps({k: r[k] for k in ("process_wall_s", "wall_s", "evaluations", "statuses", "costs", "framework_median_ms", "gpu_busy_timed_runs", "gpu_busy_tuned_kernels", "best")}))
print(f"\n{'tool':<22}{'wall s':>8}{'compile':>9}{'verify':>8}{'bench':>8}{'frame':>8}{'best TFLOP/s':>14}  best config")
kt_best = kt["best"]
print(f"{'Kernel Tuner 1.5':<22}{kt['wall_s']:>8.1f}{kt['compile_s']:>9.1f}{kt['verification_s']:>8.1f}{kt['benchmark_s']:>8.1f}{kt['framework_s']:>8.1f}{kt['best_tflops']:>14.2f}  {kt_best}")
for i, r in enumerate(runs, 1):
    c = r["costs"]
    best = {k: r["best"]["config"][k] for k in kt_best}
    print(f"{'kerntune run ' + str(i):<22}{r['process_wall_s']:>8.1f}{c['compile_s']:>9.1f}{c['verify_s']:>8.1f}{c['benchmark_s']:>8.1f}{c['framework_s']:>8.1f}{r['best']['objective']:>14.2f}  {best}")
for i, r in enumerate(runs, 1):
    same = all(r["best"]["config"][k] == v for k, v in kt_best.items())
    print(f"run {i}: wall ratio Kernel Tuner / kerntune = {kt['wall_s'] / r['process_wall_s']:.1f}x; "
          f"best {r['best']['objective'] / kt['best_tflops']:.3f} x Kernel Tuner's best; same best config: {same}; "
          f"framework median {r['framework_median_ms']:.2f} ms/config; GPU in tuned kernels {100 * r['gpu_busy_tuned_kernels']:.0f}% (timed runs {100 * r['gpu_busy_timed_runs']:.0f}%)")
PY
