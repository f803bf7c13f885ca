#!/usr/bin/env bash
# Checks that GOLDEN_DIR holds exactly one EXAMPLE.json per example named, no other file,
# so that a renamed or removed example leaves no golden report behind.
#   check_golden_set.sh GOLDEN_DIR EXAMPLE...
set -euo pipefail
dir=$1
shift
expected=$(printf '%s.json\n' "$@" | sort)
actual=$(cd "$dir" && ls -- *.json | sort)
if [ "$expected" = "$actual" ]; then exit 0; fi
echo "the golden reports of $dir do not match the embedded examples:"
diff <(echo "$expected") <(echo "$actual") || true
echo "regenerate them: tools/update-golden.sh"
exit 1
