#!/usr/bin/env bash
# Times `stepsim sweep` over 1,000 scenarios of GPT-3 175B on 1,024 A100s in 3D parallelism
# (TP 2-16 x PP 2-32 x 50 bucket sizes, DP derived, global batch 256) and prints scenarios per
# second.
#
#   tools/bench_sweep.sh [STEPSIM] [--jobs J]      (default: build/release/stepsim, every core)
set -euo pipefail
stepsim=${1:-build/release/stepsim}
shift || true
out=$(mktemp --suffix=.csv)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
"$stepsim" sweep --set model=gpt3-175b --set cluster=dgx-a100-80g-hdr --set training.global_batch=256 \
  --set training.micro_batch=1 --set parallel.sequence_parallel=true --set training.recompute=selective \
  --gpus 1024 --vary parallel.tp=2,4,8,16 --vary parallel.pp=2,4,8,16,32 \
  --vary data_parallel.bucket_cap_mb=1:50:+1 --keep-oom -o "$out" "$@"
end=$(date +%s.%N)
rows=$(($(wc -l <"$out") - 1))
ok=$(grep -c ',ok,' "$out" || true)
awk -v s="$start" -v e="$end" -v n="$rows" -v ok="$ok" \
  'BEGIN { printf "%d scenarios (%d simulated) in %.1f s: %.1f scenarios/s\n", n, ok, e - s, n / (e - s) }'
