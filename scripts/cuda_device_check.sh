#!/usr/bin/env bash
# Runs the CUDA backend's checks and kernel benchmark on a machine with a GPU, from a folder
# holding prebuilt binaries (bin/), the shared libraries they need (lib/) and the golden folders
# (golden/): how docs/benchmarks.md's CUDA figures were taken. Usage: cuda_device_check.sh DIR
set -uo pipefail
cd "$1"
# Carried libraries may come xz-compressed (ICU's data library is 30 MB).
for f in lib/*.xz; do [ -e "$f" ] && [ ! -e "${f%.xz}" ] && xz -dk "$f"; done
export LD_LIBRARY_PATH="$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
grep -m1 "model name" /proc/cpuinfo
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
echo "== missing libraries"; ldd bin/* | grep "not found"
echo "== di_cuda_tests (full log: ${LOG_DIR:-.}/di_cuda_tests.log)"
DI_GOLDEN_DIR=$PWD/golden bin/di_cuda_tests 2>&1 | tee "${LOG_DIR:-.}/di_cuda_tests.log" | grep -E "^tensor gemm|FAILED|PASSED|SKIPPED|tests ran" | tail -n 40
# The cuda backend with both FP8 GEMM paths (exact: bitwise = cpu; tensor: tensor cores).
# SKIP_CPU_GOLDEN=1 leaves out the cpu runs (their counts do not depend on the GPU).
for g in v41-mini v41-mini-topk; do
  for b in cpu cuda:exact cuda:tensor; do
    [ "$b" = cpu ] && [ -n "${SKIP_CPU_GOLDEN:-}" ] && continue
    echo "== check-golden $g --backend $b"
    args=(--backend "${b%%:*}")
    [ "$b" != cpu ] && args+=(--cuda-gemm "${b#*:}")
    /usr/bin/time -f "%e s" bin/deepinfer check-golden "golden/$g" "${args[@]}" 2>&1 | tail -n 4
  done
done
for b in cpu exact tensor; do
  echo "== generate --backend $b"
  args=(--backend cpu)
  [ "$b" != cpu ] && args=(--backend cuda --cuda-gemm "$b")
  bin/deepinfer generate --model golden/v41-mini/checkpoint --prompt-ids 1,2,3,4,5 --max-tokens 12 \
    "${args[@]}" 2>&1 | tail -n 2
done
# Determinism across processes at full width (the goldens' widths hide upload races): the same
# greedy generate as separate processes must print the same tokens every time.
echo "== determinism: ${DETERMINISM_RUNS:=8} processes, V4.1-shaped (2 layers, 16 experts)"
bin/deepinfer init-model --preset v41-shaped --layers 2 --experts 16 --out /tmp/di_v41s --seed 1 >/dev/null
for i in $(seq "$DETERMINISM_RUNS"); do
  bin/deepinfer generate --model /tmp/di_v41s --backend cuda --max-tokens 24 \
    --prompt-ids 11,2024,377,90001,5,64000,123,7,88,4096,31337,2 2>/dev/null | head -n 1
done | sort | uniq -c | awk '{print} END {print NR == 1 ? "determinism: PASSED (one output)" : "determinism: FAILED (" NR " different outputs)"}'
echo "== cuda_kernels_bench"; bin/cuda_kernels_bench "${BENCH_ARGS:-}"
