#!/usr/bin/env bash
# Throughput and peak memory of `stepsim analyze` on a large Kineto trace. Builds a trace of
# at least SIZE_GB (default 1) by repeating the real ResNet-50 DDP trace's events shifted in
# time (with new ProfilerStep numbers and correlation ids), in a temporary folder that is
# deleted afterwards, and measures with /usr/bin/time -v (apt-get install -y time).
#
#   tools/bench_analyze.sh [STEPSIM_BINARY] [SIZE_GB]
#   STEPSIM_BINARY defaults to build/dev/stepsim; BENCH_GZIP=1 also measures the gzip-compressed file.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
stepsim="${1:-$root/build/dev/stepsim}"
size_gb="${2:-1}"
source_trace="$root/tests/data/traces/resnet50-ddp-a100-rank0of2.json.gz"
work="$(mktemp -d /tmp/stepsim-bench-XXXXXX)"
trap 'rm -rf "$work"' EXIT

python3 - "$source_trace" "$work/big.json" "$size_gb" <<'PY'
import gzip, json, sys
src, dst, size_gb = sys.argv[1], sys.argv[2], float(sys.argv[3])
doc = json.load(gzip.open(src))
events = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
times = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
span = max(times) - min(times) + 1000.0
steps = sorted({int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#")})
max_corr = max(e.get("args", {}).get("correlation", 0) for e in events) + 1
target = int(size_gb * (1 << 30))
with open(dst, "w") as out:
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    out.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
    out.write(",\n".join(json.dumps(e) for e in meta))
    written, rep = out.tell(), 0
    while written < target:
        parts = []
        for e in events:
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = round(e["ts"] + rep * span, 3)
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
print("generated %.2f GB, %d repetitions of %d events" % (written / 1e9, rep, len(events)), file=sys.stderr)
PY

measure() {
  local file="$1"
  local bytes
  bytes=$(stat -c %s "$file")
  /usr/bin/time -v "$stepsim" analyze "$file" > "$work/out.txt" 2> "$work/time.txt"
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
  python3 - "$bytes" "$wall" "$rss" "$file" <<'PY'
import sys
size, wall, rss, name = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
parts = [float(p) for p in wall.split(":")]
seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
print("%s: %.2f GB in %.1f s = %.0f MB/s, peak RSS %.0f MiB" % (name.split("/")[-1], size / 1e9, seconds,
      size / 1e6 / seconds, rss / 1024))
PY
  grep -E "^mean" "$work/out.txt" || true
}

measure "$work/big.json"
if [[ "${BENCH_GZIP:-0}" == "1" ]]; then
  gzip -1 -k "$work/big.json"
  echo "(throughput of the .gz counts compressed bytes)"
  measure "$work/big.json.gz"
fi
