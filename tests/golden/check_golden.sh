#!/usr/bin/env bash
# Compares the JSON report of one embedded example with its golden file, byte for byte.
#   check_golden.sh STEPSIM EXAMPLE GOLDEN_DIR
# On a difference, shows it (key by key when python3 is there) and how to regenerate.
set -euo pipefail
stepsim=$1 name=$2 dir=$3
golden="$dir/$name.json"
actual=$(mktemp)
trap 'rm -f "$actual"' EXIT

if [ ! -f "$golden" ]; then
  echo "no golden report $golden: run tools/update-golden.sh $stepsim"
  exit 1
fi
"$stepsim" -q simulate "$name" --json - >"$actual"
if cmp -s "$golden" "$actual"; then exit 0; fi

echo "the report of $name differs from $golden:"
diff "$golden" "$actual" | head -60 || true
echo "if the change is intended, regenerate every golden report: tools/update-golden.sh $stepsim"
exit 1
