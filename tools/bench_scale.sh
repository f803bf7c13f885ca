#!/usr/bin/env bash
# Times `stepsim simulate` in all-ranks mode, with variation switched on, on the largest jobs
# (GPT-3 175B in 3D on 512 GPUs and as 4,096 data-parallel replicas, Llama 3 405B in 4D on
# 16,384 GPUs) and prints a table
# of the fastest wall time and the largest peak resident memory over the repetitions
# (/usr/bin/time -v). The scenarios are tests/bench/scenarios/*.json, which the Google
# Benchmark programs (tests/bench/bench_scenarios.cpp) run too.
#
#   tools/bench_scale.sh [STEPSIM] [--reps N] [--only NAME]   (default: build/release/stepsim, 1)
set -euo pipefail
stepsim=build/release/stepsim
reps=1
only=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) stepsim=$1; shift ;;
  esac
done
# Variation switched on, as the speed targets state them: 5 % kernel jitter and a GPU at 0.9x.
variation=(--set simulation.variation.jitter.distribution=normal --set simulation.variation.jitter.sigma=0.05
  --set simulation.variation.jitter.seed=7 --set 'simulation.variation.gpu_speed=[{"rank": 1, "factor": 0.9}]')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
scenarios=$(dirname "$0")/../tests/bench/scenarios

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $reps repetition(s)"
echo "| job | GPUs | wall (s) | peak RSS (MiB) | step time |"
echo "|---|---|---|---|---|"
for job in gpt3-3d-512:512 gpt3-dp4096:4096 llama3-405b-4d-16k:16384; do
  name=${job%%:*}
  gpus=${job##*:}
  [[ -n $only && $only != "$name" ]] && continue
  best="" peak=0 step=""
  for ((i = 0; i < reps; i++)); do
    /usr/bin/time -v -o "$dir/time" "$stepsim" simulate "$scenarios/$name.json" --set simulation.ranks=all \
      "${variation[@]}" --json "$dir/report.json" >/dev/null
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$dir/time")
    rss=$(awk -F': ' '/Maximum resident set size/ { print int($2 / 1024) }' "$dir/time")
    if [[ -z $best ]] || awk -v a="$wall" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$wall; fi
    ((rss > peak)) && peak=$rss
    step=$(grep -o '"step_time_s": *[0-9.e+-]*' "$dir/report.json" | head -1 | sed 's/.*: *//')
  done
  echo "| $name | $gpus | $best | $peak | $step s |"
done
