#!/usr/bin/env bash
# Regenerates the Table 5 table of docs/validation.md: Korthikanti et al. 2022 iteration times
# (VALIDATION.md §1) against `stepsim simulate --json -` for both columns of the paper.
# Usage: tools/validate.sh [path/to/stepsim]   (prints the Markdown table on stdout)
set -euo pipefail
STEPSIM="${1:-build/stepsim}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

python3 - "$STEPSIM" <<'PY'
import json, subprocess, sys

stepsim = sys.argv[1]
# scenario, model, PP, schedule, full recompute (s), SP + selective (s)
rows = [
    ("korthikanti-22b", "22B", 1, "-", 1.42, 1.10),
    ("gpt3-175b-selene", "175B", 8, "interleaved, 3 chunks", 18.13, 13.75),
    ("gpt-530b-selene", "530B", 35, "interleaved, 3 chunks", 49.05, 37.83),
    ("gpt-1t-selene", "1T", 64, "1F1B", 94.42, 71.49),
]
columns = [("full recompute", ["parallel.sequence_parallel=false", "training.recompute=full"]),
           ("SP + selective", ["parallel.sequence_parallel=true", "training.recompute=selective"])]

def predict(scenario, sets):
    cmd = [stepsim, "simulate", scenario, "--json", "-"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["step_time_s"]

print("| model | PP | schedule | column | measured (s) | predicted (s) | error |")
print("|---|---|---|---|---|---|---|")
for scenario, model, pp, schedule, full, selective in rows:
    for (column, sets), measured in zip(columns, (full, selective)):
        predicted = predict(scenario, sets)
        error = (predicted - measured) / measured * 100
        print(f"| {model} | {pp} | {schedule} | {column} | {measured:.2f} | {predicted:.2f} | {error:+.1f} % |")
PY
