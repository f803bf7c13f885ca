#!/usr/bin/env bash
# Times `stepsim plan` on the pre-purchase question of docs/plan.md: Llama 3 70B, 1T tokens,
# 256 GPUs, BF16 or FP8, on five clusters (A100, H100, H200, B200, GB200 NVL72), and prints the
# wall-clock seconds and each search's own.
#
#   tools/bench_plan.sh [STEPSIM] [--jobs J]      (default: build/release/stepsim, every core)
set -euo pipefail
stepsim=${1:-build/release/stepsim}
shift || true
out=$(mktemp --suffix=.csv)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
start=$(date +%s.%N)
"$stepsim" plan --model llama3-70b --tokens 1T --gpus 256 --precision bf16,fp8 \
  --cluster dgx-a100-80g-hdr@1.8,dgx-h100-ndr@2.5,dgx-h200-ndr@3.1,dgx-b200@5.5,gb200-nvl72@6.5 \
  -o "$out" "$@" >/dev/null 2>"$err"
end=$(date +%s.%N)
cat "$err"
awk -v s="$start" -v e="$end" -v cores="$(nproc)" 'BEGIN { printf "plan of 5 clusters in %.1f s on %d cores\n", e - s, cores }'
