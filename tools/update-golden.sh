#!/usr/bin/env bash
# Regenerates tests/golden/: the JSON report of every embedded example, from the examples
# that sim/io/CMakeLists.txt embeds. Run it when a change of the reports is intended, then
# review `git diff tests/golden/`.
#   tools/update-golden.sh [STEPSIM]    (default build/ci/stepsim)
set -euo pipefail
cd "$(dirname "$0")/.."
stepsim=${1:-build/ci/stepsim}
dir=tests/golden

names=$(sed -n 's|^ *examples/\([A-Za-z0-9._-]*\)\.json *)\{0,1\}$|\1|p' sim/io/CMakeLists.txt)
if [ -z "$names" ]; then
  echo "update-golden: no examples found in sim/io/CMakeLists.txt" >&2
  exit 1
fi
rm -f "$dir"/*.json
for name in $names; do
  "$stepsim" -q simulate "$name" --json - >"$dir/$name.json"
  echo "update-golden: $dir/$name.json"
done
