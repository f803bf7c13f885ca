#!/usr/bin/env python3
"""Every Catch2 test case is one ctest test of its own: for each test program, every name it
lists is a test ctest runs under its prefix. A name that ctest's discovery mangles fails here:
a lone ']' once merged 37 test cases into one entry that ran none of them, and a ';' splits a
name into two filters that match nothing.

    every_test_case_runs.py BUILD_DIR [TEST_SPEC]

TEST_SPEC is the Catch2 test spec the build discovers with (the sanitized build's "~[slow]~[.]"):
the names the programs list under it are the ones ctest must run.
"""
import pathlib
import re
import subprocess
import sys

build = pathlib.Path(sys.argv[1])
spec = sys.argv[2:3]
listed = subprocess.run(["ctest", "-N"], cwd=build, capture_output=True, text=True, check=True).stdout
by_program = {}
for line in listed.splitlines():
    m = re.match(r"\s*Test\s+#\d+: (test_\w+): ?(.*)$", line)
    if m:
        by_program.setdefault(m.group(1), set()).add(m.group(2))

failures = []
programs = sorted(p for p in build.glob("tests/*/test_*") if p.is_file() and p.stat().st_mode & 0o111)
for program in programs:
    names = subprocess.run([str(program), *spec, "--list-test-names-only"], capture_output=True, text=True).stdout
    own = {n for n in names.splitlines() if n.strip()}
    ran = by_program.get(program.name, set())
    # ctest may hold more under the prefix (scripts added with add_test), never fewer.
    if not own <= ran:
        failures.append(f"{program.name}: test cases that ctest does not run as themselves (a ';', '[' or ']' "
                        f"in the name?): {sorted(own - ran)[:5]}")
if not programs:
    failures.append(f"no test programs under {build}/tests")
for f in failures:
    print(f)
print(f"{len(programs) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
