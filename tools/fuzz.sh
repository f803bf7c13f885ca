#!/usr/bin/env bash
# Builds the libFuzzer programs (preset fuzz: clang, AddressSanitizer, UndefinedBehaviorSanitizer)
# and runs each target for a bounded time, from a seed corpus derived from configs/, tests/data/
# and tests/golden/ plus the corpus earlier runs grew under build/fuzz/corpus/.
#   tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
# Environment: STEPSIM_FUZZ_BUILD=0 skips the build; STEPSIM_FUZZ_BUILD_DIR=build/asan runs the
# fuzz programs the asan preset built alongside its tests (CI does that, with
# STEPSIM_FUZZ_BUILD=0, to compile the sanitized code once); STEPSIM_FUZZ_KEEP_GOING=1 runs in fork
# mode and carries on after a finding, to collect several in one run;
# STEPSIM_FUZZ_ALLOW_FINDINGS=1 does that too and exits 0 despite findings (lists them);
# STEPSIM_FUZZ_ARGS adds libFuzzer flags (e.g. -only_ascii=1 to look past a known bug).
# Prints the executions per target; exits 1 when any target found something: its inputs are
# in build/fuzz/findings/TARGET/. Keep one under tests/fuzz/regressions/TARGET/ so that ctest
# replays it in every build.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(scenario_text scenario_set simulate_set kineto nccl_tests sweep_spec calibration_file); fi
build=${STEPSIM_FUZZ_BUILD_DIR:-build/fuzz}

if [ ! -d "$build" ] && [ "${STEPSIM_FUZZ_BUILD:-1}" = 0 ]; then
  echo "fuzz: $build does not exist; build it first or leave STEPSIM_FUZZ_BUILD unset" >&2
  exit 2
fi
if [ "${STEPSIM_FUZZ_BUILD:-1}" != 0 ]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz
fi
python3 tools/fuzz_corpus.py "$build/seeds"

extra=()
allow=${STEPSIM_FUZZ_ALLOW_FINDINGS:-0}
if [ "${STEPSIM_FUZZ_KEEP_GOING:-0}" = 1 ] || [ "$allow" = 1 ]; then
  extra=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi

# Executions from libFuzzer's log: "Done N runs" (one process) or the last "#N:" (fork mode).
executions() {
  local n
  n=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$1" | tail -1)
  if [ -z "$n" ]; then n=$(sed -n 's/^#\([0-9]*\):.*/\1/p' "$1" | tail -1); fi
  if [ -z "$n" ]; then n=$(sed -n 's/^#\([0-9]*\)[[:space:]].*/\1/p' "$1" | tail -1); fi
  echo "${n:-0}"
}

failed=0
summary=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" findings="$build/findings/$t" log="$build/fuzz-$t.log"
  rm -rf "$findings"
  mkdir -p "$corpus" "$findings"
  max_len=()
  if [ "$t" = kineto ]; then max_len=(-max_len=65536); fi
  echo "fuzz: $t for $seconds s"
  status=0
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/tests/fuzz/fuzz_$t" "$corpus" "$build/seeds/$t" -dict="$build/seeds/$t.dict" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 "${max_len[@]}" -print_final_stats=1 \
    -artifact_prefix="$findings/" "${extra[@]}" ${STEPSIM_FUZZ_ARGS:-} >"$log" 2>&1 || status=$?
  found=$(find "$findings" -type f | wc -l)
  runs=$(executions "$log")
  summary+=("$(printf '%-14s %12s executions  %3s findings  (exit %s)' "$t" "$runs" "$found" "$status")")
  if [ "$status" -ne 0 ] && [ "$found" -eq 0 ]; then
    echo "fuzz: fuzz_$t failed without a finding (exit $status), see $log" >&2
    tail -20 "$log" >&2
    exit 2
  fi
  if [ "$found" -ne 0 ]; then
    failed=1
    grep -E "ERROR|finding|runtime error|SUMMARY|Test unit written|deadly signal" "$log" | head -20 || true
  fi
done

echo "fuzz: ${seconds} s per target"
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: findings are in $build/findings/ (logs: $build/fuzz-TARGET.log)"
  if [ "$allow" != 1 ]; then exit 1; fi
  echo "fuzz: STEPSIM_FUZZ_ALLOW_FINDINGS=1: not failing"
fi
