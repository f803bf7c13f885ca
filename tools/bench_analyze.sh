#!/usr/bin/env bash
# Throughput and peak memory of `stepsim analyze`, on one large Kineto trace and on a job of
# 8 rank traces. The traces repeat the real ResNet-50 DDP trace's events shifted in time
# (with new ProfilerStep numbers and correlation ids) in a temporary folder that is deleted
# afterwards; times and peak memory come from /usr/bin/time -v (apt-get install -y time).
#
#   tools/bench_analyze.sh [STEPSIM_BINARY] [SIZE_GB] [RANK_MB]
#   STEPSIM_BINARY defaults to build/release/stepsim; SIZE_GB (default 1) is the large trace,
#   RANK_MB (default 128) each of the 8 rank traces. BENCH_GZIP=1 also measures the large
#   trace gzip-compressed.
#
# Prints MB/s and peak RSS of the large trace, then the 8 ranks analysed as one folder
# (`stepsim analyze DIR`, one worker per core) against 8 separate runs one after another.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
stepsim="${1:-$root/build/release/stepsim}"
size_gb="${2:-1}"
rank_mb="${3:-128}"
source_trace="$root/tests/data/traces/resnet50-ddp-a100-rank0of2.json.gz"
work="$(mktemp -d /tmp/stepsim-bench-XXXXXX)"
trap 'rm -rf "$work"' EXIT

# generate SIZE_BYTES RANK SKEW_US OUT: the trace of one rank, its timestamps shifted by
# SKEW_US (a rank that runs late).
generate() {
  python3 - "$source_trace" "$@" <<'PY'
import gzip, json, sys
src, target, rank, skew, dst = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
doc = json.load(gzip.open(src))
events = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
times = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
span = max(times) - min(times) + 1000.0
steps = sorted({int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#")})
max_corr = max(e.get("args", {}).get("correlation", 0) for e in events) + 1
with open(dst, "w") as out:
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    if "distributedInfo" in head:
        head["distributedInfo"] = dict(head["distributedInfo"], rank=rank, world_size=8)
    out.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
    out.write(",\n".join(json.dumps(e) for e in meta))
    written, rep = out.tell(), 0
    while written < target:
        parts = []
        for e in events:
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = round(e["ts"] + rep * span + skew, 3)
            if e2.get("name", "").startswith("ProfilerStep#"):
                e2["name"] = "ProfilerStep#%d" % (int(e["name"].split("#")[1]) + rep * len(steps))
            args = e.get("args")
            if isinstance(args, dict) and "correlation" in args:
                e2["args"] = dict(args, correlation=args["correlation"] + rep * max_corr)
            parts.append(json.dumps(e2))
        out.write(",\n" + ",\n".join(parts))
        written = out.tell()
        rep += 1
    out.write("\n]}\n")
print("generated %s: %.2f GB, %d repetitions of %d events" % (dst.split("/")[-1], written / 1e9, rep, len(events)),
      file=sys.stderr)
PY
}

# run NAME ARGS...: `stepsim analyze ARGS`, printing wall time, MB/s of the files and peak RSS.
run() {
  local name="$1"
  shift
  local bytes=0 a
  for a in "$@"; do
    if [[ -d "$a" ]]; then bytes=$((bytes + $(cat "$a"/* | wc -c))); elif [[ -f "$a" ]]; then bytes=$((bytes + $(stat -c %s "$a"))); fi
  done
  /usr/bin/time -v "$stepsim" analyze "$@" > "$work/out.txt" 2> "$work/time.txt"
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
  python3 - "$name" "$bytes" "$wall" "$rss" <<'PY'
import sys
name, size, wall, rss = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
seconds = sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall.split(":"))))
print("%-28s %7.2f GB in %6.2f s = %5.0f MB/s, peak RSS %4.0f MiB" % (name, size / 1e9, seconds,
      size / 1e6 / seconds, rss / 1024))
with open("/dev/fd/3", "w") as f:
    f.write("%f\n" % seconds)
PY
}

generate $((size_gb * 1024 * 1024 * 1024)) 0 0 "$work/big.json"
run "one trace" "$work/big.json" 3> "$work/t_big"
grep -E "^mean|comm-comp overlap" "$work/out.txt" || true
if [[ "${BENCH_GZIP:-0}" == "1" ]]; then
  gzip -1 -k "$work/big.json"
  echo "(throughput of the .gz counts compressed bytes)"
  run "one trace, gzip" "$work/big.json.gz" 3> /dev/null
fi
rm -f "$work/big.json" "$work/big.json.gz"

mkdir "$work/job"
for r in 0 1 2 3 4 5 6 7; do
  skew=0
  [[ $r == 5 ]] && skew=2000  # rank 5 starts 2 ms late: the straggler
  generate $((rank_mb * 1024 * 1024)) "$r" "$skew" "$work/job/rank$r.json"
done
run "8 ranks as one folder" "$work/job" 3> "$work/t_dir"
grep -A3 "^stragglers" "$work/out.txt" || true
total=0
for r in 0 1 2 3 4 5 6 7; do
  run "  rank $r alone" "$work/job/rank$r.json" 3> "$work/t_one"
  total=$(python3 -c "print($total + $(cat "$work/t_one"))")
done
python3 -c "d = $(cat "$work/t_dir"); print('8 separate runs: %.2f s; one folder: %.2f s (%.1fx faster)' % ($total, d, $total / d))"
