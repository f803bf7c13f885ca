#!/usr/bin/env bash
# Representative mode's expected wait for the slowest member against every rank drawn: a
# 2-layer GPT on N data-parallel GPUs (default 4,096) with 5 % kernel jitter of distribution
# DIST (normal, uniform or lognormal). Prints both mean DP rendezvous waits (all ranks:
# averaged over SEEDS seeds) and their ratio.
# The unit tests run the same comparison at N = 4,096; this runs it at any size.
#   tools/straggler-check.sh [STEPSIM] [N] [SEEDS] [DIST]   (default build/ci/stepsim 4096 12 normal)
set -euo pipefail
cd "$(dirname "$0")/.."
stepsim=${1:-build/ci/stepsim}
n=${2:-4096}
seeds=${3:-12}
dist=${4:-normal}
scenario=$(mktemp --suffix=.json)
trap 'rm -f "$scenario"' EXIT
cat >"$scenario" <<JSON
{ "model": { "name": "gpt-2l", "layers": 2, "hidden": 2048, "heads": 16, "vocab": 32000, "seq_len": 2048 },
  "cluster": "dgx-h100-ndr", "parallel": { "dp": $n },
  "training": { "global_batch": $((n * 16)), "micro_batch": 16 },
  "simulation": { "variation": { "jitter": { "distribution": "$dist", "sigma": 0.05 } } } }
JSON
sets=(--set 'cluster.gpu.kernel_launch="0 us"' --set cluster.gpu.efficiency.comm_slowdown=0)
wait_of() { jq '.ranks.rendezvous_wait_s.dp'; }
expected=$("$stepsim" -q simulate "$scenario" "${sets[@]}" --json - | wait_of)
sum=0
for seed in $(seq 1 "$seeds"); do
  start=$(date +%s.%N)
  w=$("$stepsim" -q simulate "$scenario" "${sets[@]}" --set simulation.ranks=all \
    --set simulation.variation.jitter.seed="$seed" --json - | wait_of)
  echo "all ranks, seed $seed: mean DP wait $w s ($(echo "$(date +%s.%N) - $start" | bc) s to simulate)"
  sum=$(echo "$sum + $w" | bc -l)
done
drawn=$(echo "$sum / $seeds" | bc -l)
echo "representative: expected DP wait $expected s"
echo "all ranks, mean of $seeds seeds: $drawn s"
echo "ratio representative / all ranks: $(echo "$expected / $drawn" | bc -l)"
