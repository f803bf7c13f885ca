#!/usr/bin/env python3
"""The Python module against the command line: each case runs `stepsim ... --json` and the
module on the same input and wants the same fields, value for value (and the same bytes where
the module hands back the writer's text).

    module_test.py CASE    (STEPSIM_BINARY: the stepsim program; PYTHONPATH: build/<preset>/python)
"""
import json
import os
import subprocess
import sys
import tempfile
import threading

import stepsim

STEPSIM = os.environ["STEPSIM_BINARY"]
SOURCE = os.environ["STEPSIM_SOURCE_DIR"]
TRACE = os.path.join(SOURCE, "tests/data/traces/resnet50-ddp-a100-rank0of2.json.gz")


def cli(*args):
    """stdout of `stepsim ARGS` (which must succeed)."""
    done = subprocess.run([STEPSIM, *args], capture_output=True, text=True)
    assert done.returncode == 0, f"stepsim {' '.join(args)}: exit {done.returncode}: {done.stderr}"
    return done.stdout


def same(got, want, where=""):
    """Every field of `want` in `got` with the same type and value, and no other field."""
    assert type(got) is type(want), f"{where or '/'}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{where or '/'}: keys {list(got)} != {list(want)}"
        for key in want:
            same(got[key], want[key], f"{where}/{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{where}: {len(got)} items != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}/{i}")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def fields(report):
    """How many leaf fields a report has (to say what was compared)."""
    if isinstance(report, dict):
        return sum(fields(v) for v in report.values())
    if isinstance(report, list):
        return sum(fields(v) for v in report)
    return 1


def default_scenario():
    want = cli("simulate", "--json", "-")
    assert stepsim._core.simulate_json("", None, [], [], False) == want, "the report's bytes differ"
    got = stepsim.simulate()
    same(got, json.loads(want))
    print(f"default scenario: {fields(got)} fields equal")


def embedded_example():
    want = json.loads(cli("simulate", "ddp-1.3b-64xa100", "--set", "data_parallel.bucket_cap_mb=100", "--json", "-"))
    same(stepsim.simulate("ddp-1.3b-64xa100", sets={"data_parallel.bucket_cap_mb": 100}), want)
    same(stepsim.simulate("ddp-1.3b-64xa100", sets=["data_parallel.bucket_cap_mb=100"]), want)
    print(f"ddp-1.3b-64xa100 with bucket_cap_mb 100: {fields(want)} fields equal")


def scenario_as_dict():
    resolved = json.loads(cli("presets", "fsdp-llama2-7b-8xh100", "--resolved"))
    want = json.loads(cli("simulate", "fsdp-llama2-7b-8xh100", "--json", "-"))
    same(stepsim.simulate(resolved), want)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "scenario.json")
        with open(path, "w") as f:
            json.dump(resolved, f)
        same(stepsim.simulate(path), json.loads(cli("simulate", path, "--json", "-")))
    print("fsdp-llama2-7b-8xh100 as a dict and as a file: equal")


def calibration():
    """A calibration file (imported from nccl-tests by the command line) applied both ways."""
    log = os.path.join(SOURCE, "tests/data/nccl-tests/a100-80g-8gpu-allreduce-a.txt")
    with tempfile.TemporaryDirectory() as folder:
        calib = os.path.join(folder, "a100.calib.json")
        cli("calibrate", "import-nccl-tests", log, "-o", calib)
        want = json.loads(cli("simulate", "ddp-1.3b-64xa100", "--calibration", calib, "--json", "-"))
        assert want["calibration"], "the calibration file measured nothing this scenario runs"
        same(stepsim.simulate("ddp-1.3b-64xa100", calibration=calib), want)
        want = json.loads(cli("collective", "allreduce", "--cluster", "dgx-a100-80g-hdr", "--sweep", "1MiB:64MiB",
                              "--calibration", calib, "--json", "-"))
        assert want[0]["source"] == "measured"
        same(stepsim.collective("allreduce", cluster="dgx-a100-80g-hdr", sweep="1MiB:64MiB", calibration=[calib]),
             want)
    print("calibration: simulate and collective equal")


def bad_scenario():
    scenario = json.loads(cli("presets", "default", "--resolved"))
    scenario["parallel"]["tpp"] = 8
    try:
        stepsim.simulate(scenario)
    except stepsim.ScenarioError as e:
        assert (e.file, e.pointer) == ("<dict>", "/parallel/tpp"), (e.file, e.pointer, e.message)
        assert "tp" in e.message and str(e) == f"<dict>: /parallel/tpp: {e.message}", str(e)
        assert isinstance(e, ValueError)
    else:
        raise AssertionError("an unknown key was accepted")
    for call, where in [
        (lambda: stepsim.simulate(sets={"parallel.tp": "eight"}), ("--set", "parallel.tp")),
        (lambda: stepsim.simulate("no-such-file.json"), ("no-such-file.json", "")),
        (lambda: stepsim.sweep(vary={"parallel.tpp": [1, 2]}), ("--vary", "parallel.tpp")),
        (lambda: stepsim.sweep(vary={"parallel.tp": []}), ("stepsim.sweep", "vary")),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, gpus=-8), ("stepsim.sweep", "gpus")),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, jobs=5000), ("stepsim.sweep", "jobs")),
        (lambda: stepsim.sweep(vary={"parallel.tp": "8:1:x2"}), ("--vary", "parallel.tp")),
        (lambda: stepsim.collective("allreduce", gpus=1), ("<command line>", "--gpus")),
        (lambda: stepsim.analyze("no-such-trace.json"), ("no-such-trace.json", "")),
    ]:
        try:
            call()
        except stepsim.ScenarioError as e:
            assert (e.file, e.pointer) == where, (e.file, e.pointer, e.message)
        else:
            raise AssertionError(f"no ScenarioError for {where}")
    print("bad input: ScenarioError with the file and the pointer")


def sweep_into_frame():
    import pandas

    with tempfile.TemporaryDirectory() as folder:
        rows = os.path.join(folder, "rows.jsonl")
        cli("sweep", "--vary", "data_parallel.bucket_cap_mb=1,5,25,100,400", "--vary", "parallel.tp=1,2,4,8",
            "--gpus", "64", "-o", rows)
        with open(rows) as f:
            want = [json.loads(line) for line in f]
    frame = stepsim.sweep(vary={"data_parallel.bucket_cap_mb": [1, 5, 25, 100, 400], "parallel.tp": "1,2,4,8"},
                          gpus=64)
    assert isinstance(frame, pandas.DataFrame) and frame.shape == (20, len(want[0])), frame.shape
    assert list(frame.columns) == list(want[0])
    got = [{k: (None if v is None or v != v else v) for k, v in row.items()}
           for row in frame.astype(object).to_dict("records")]
    for g, w in zip(got, want):
        for key in w:
            assert g[key] == w[key], f"point {w['point']} {key}: {g[key]!r} != {w[key]!r}"
    print(f"20-point sweep: DataFrame {frame.shape}, every row equal")


def plan():
    """Two clusters at two GPU counts, one of which has no layout: the rows of `plan -o rows.json`."""
    with tempfile.TemporaryDirectory() as folder:
        rows = os.path.join(folder, "rows.json")
        cli("plan", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "8,12", "--cluster", "dgx-h100-ndr@2.5",
            "--cluster", "dgx-a100-80g-hdr", "--max-layouts", "8", "-o", rows)
        with open(rows) as f:
            want = json.load(f)
    got = stepsim.plan(model="llama3-8b", tokens=1e12, gpus=[8, 12],
                       cluster={"dgx-h100-ndr": 2.5, "dgx-a100-80g-hdr": None}, max_layouts=8)
    records = [{k: (None if v is None or v != v else v) for k, v in row.items()}
               for row in got.astype(object).to_dict("records")]
    assert [r["status"] for r in records] == ["ok", "no layout", "ok", "no layout"], [r["status"] for r in records]
    assert list(got.columns) == list(want[0]) and len(records) == len(want) == 4
    for g, w in zip(records, want):
        for key in w:
            if key != "search_s":  # wall-clock time
                assert g[key] == w[key], f"{w['cluster']} x {w['gpus']} {key}: {g[key]!r} != {w[key]!r}"
    try:
        stepsim.plan(gpus=[8, 0], cluster="dgx-h100-ndr", tokens="1T")
        raise AssertionError("GPU count 0 accepted")
    except stepsim.ScenarioError as e:
        assert (e.file, e.pointer) == ("--gpus", "8,0"), (e.file, e.pointer, e.message)
    try:
        stepsim.plan(gpus=8, cluster=["dgx-h100-ndr"])
        raise AssertionError("a plan without a budget or a deadline accepted")
    except stepsim.ScenarioError as e:
        assert e.pointer == "--tokens" and "--deadline" in e.message, str(e)
    for function in (lambda: stepsim.plan(gpus=8, cluster="dgx-h100-ndr", tokens="1T", jobs=-1),
                     lambda: stepsim.sweep(vary={"parallel.tp": [1, 2]}, jobs=-1)):
        try:
            function()
            raise AssertionError("jobs=-1 accepted")
        except stepsim.ScenarioError as e:
            assert e.file in ("stepsim.plan", "stepsim.sweep") and e.pointer == "jobs", str(e)
    print(f"plan: {len(want)} rows equal")


def collective():
    want = json.loads(cli("collective", "allgather", "--gpus", "16", "--ranks-per-node", "8", "--sweep", "1MiB:1GiB",
                          "--factor", "4", "--json", "-"))
    same(stepsim.collective("allgather", gpus=16, ranks_per_node=8, sweep="1MiB:1GiB", factor=4), want)
    same(stepsim.collective("allreduce"), json.loads(cli("collective", "allreduce", "--json", "-")))
    print(f"collective: {len(want)} rows equal")


def analyze():
    same(stepsim.analyze(TRACE), json.loads(cli("analyze", TRACE, "--json", "-")))
    print("analyze: equal")


def presets():
    same(stepsim.presets(), json.loads(cli("presets", "--json", "-")))
    print("presets: equal")


def threads():
    """Four threads at once give each the report one thread alone gives."""
    names = ["ddp-1.3b-64xa100", "default", "fsdp-llama2-7b-8xh100", "zero1-llama3-8b-64xh100"]
    alone = [stepsim.simulate(n if n != "default" else None) for n in names]
    together = [None] * len(names)

    def run(i):
        together[i] = stepsim.simulate(names[i] if names[i] != "default" else None)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(len(names))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for a, t in zip(alone, together):
        same(t, a)
    print("four threads: the same reports")


CASES = {f.__name__: f for f in [default_scenario, embedded_example, scenario_as_dict, calibration, bad_scenario,
                                 sweep_into_frame, plan, collective, analyze, presets, threads]}

if __name__ == "__main__":
    CASES[sys.argv[1]]()
