#!/usr/bin/env bash
# First contact with the GPU machine: tool versions, then one small tuning run per example.
set -u
K=${KERNTUNE:-.device/kerntune}
export KERNTUNE_DB=$OUT/smoke.db
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
ls /usr/local/cuda/lib64/libnvrtc* 2>&1 | head -3
for e in vector_add matmul_sram; do
  echo "=== $e"
  timeout 300 $K tune examples/cuda/$e/spec.toml --strategy brute_force --max-fevals 12 2>&1 | tail -12
done
echo "=== rerun from store"
/usr/bin/time -f "%e s" $K tune examples/cuda/vector_add/spec.toml --strategy brute_force --max-fevals 12 2>&1 | tail -4
