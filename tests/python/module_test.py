#!/usr/bin/env python3
"""The Python module against the command line: each case runs `stepsim ... --json` and the
module on the same input and wants the same fields, value for value (and the same bytes where
the module hands back the writer's text).

    module_test.py CASE    (STEPSIM_BINARY: the stepsim program; PYTHONPATH: build/<preset>/python)
"""
import json
import os
import shutil
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


def cli_error(*args):
    """The error `stepsim ARGS` prints (which must refuse its input, exit status 2), without the
    program's prefix: "FILE: POINTER: MESSAGE" as str() of a ScenarioError."""
    done = subprocess.run([STEPSIM, *args], capture_output=True, text=True)
    assert done.returncode == 2, f"stepsim {' '.join(args)}: exit {done.returncode}, not 2: {done.stderr}"
    return done.stderr.strip().removeprefix("stepsim: error: ")


def raised(call, kind):
    """The exception of type `kind` that `call()` raises (any other outcome fails)."""
    try:
        call()
    except kind as e:
        return e
    raise AssertionError(f"no {kind.__name__}")


def child(code, stdin=None, env=None, cwd=None):
    """stdout of a Python child running `code` with this module (which must succeed), stdin fed
    `stdin`; a child still running after two minutes is a hang, not a slow answer."""
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, timeout=120,
                          env=os.environ if env is None else env, cwd=cwd)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    return done.stdout


def sweep_rows(*args):
    """The rows of `stepsim sweep ARGS -o rows.jsonl`."""
    with tempfile.TemporaryDirectory() as folder:
        rows = os.path.join(folder, "rows.jsonl")
        cli("sweep", *args, "-o", rows)
        with open(rows) as f:
            return [json.loads(line) for line in f]


def records(frame):
    """A DataFrame's rows as dicts, NaN (pandas' missing value) as JSON's null."""
    return [{k: (None if v is None or v != v else v) for k, v in row.items()}
            for row in frame.astype(object).to_dict("records")]


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
    assert stepsim._core.simulate_json("", None, [], [], False, []) == want, "the report's bytes differ"
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
        # A value of sets that fails validation is the set's too, written as its key.
        (lambda: stepsim.simulate(sets={"model.layers": 1000000}), ("--set", "model.layers")),
        (lambda: stepsim.simulate({"model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": {"tp": 8, "dp": 8},
                                   "training": {"global_batch": 64, "micro_batch": 1}},
                                  sets={"simulation.ranks": "all",
                                        "simulation.variation.gpu_speed": [{"rank": 64, "factor": 0.8}]}),
         ("--set", "simulation.variation.gpu_speed[0].rank")),
        (lambda: stepsim.simulate({"model": {"preset": "llama3-8b", "layers": 1000000}, "cluster": "dgx-h100-ndr",
                                   "parallel": {"tp": 8, "dp": 8}, "training": {"global_batch": 64}},
                                  sets={"parallel.tp": 8}), ("<dict>", "/model/layers")),
        (lambda: stepsim.simulate("no-such-file.json"), ("no-such-file.json", "")),
        (lambda: stepsim.sweep(vary={"parallel.tpp": [1, 2]}), ("--vary", "parallel.tpp")),
        (lambda: stepsim.sweep(vary={"parallel.tp": []}), ("stepsim.sweep", "vary")),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, gpus=-8), ("--gpus", "-8")),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, jobs=5000), ("--jobs", "5000")),
        (lambda: stepsim.sweep(vary={"parallel.tp": "8:1:x2"}), ("--vary", "parallel.tp")),
        (lambda: stepsim.collective("allreduce", gpus=1), ("<command line>", "--gpus")),
        (lambda: stepsim.collective("allreduce", sets={"model.layers": 2}), ("--set", "model.layers")),
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
            assert (e.file, e.pointer) == ("--jobs", "-1"), str(e)
    print(f"plan: {len(want)} rows equal")


def frame_integers():
    """A plan row without a layout and a sweep point refused before it has a dp leave a null in an
    integer column: the DataFrame keeps the rows' integers and None (pandas made the column
    float64: tp 1.0 and NaN, where docs/python.md says tp is an integer and None without a layout)."""
    with tempfile.TemporaryDirectory() as folder:
        rows = os.path.join(folder, "rows.json")
        cli("plan", "--model", "gpt-1.3b", "--tokens", "1B", "--gpus", "100,8", "--cluster", "dgx-h100-ndr@2",
            "--max-layouts", "4", "-o", rows)
        with open(rows) as f:
            want = json.load(f)
    got = stepsim.plan(model="gpt-1.3b", tokens="1B", gpus=[100, 8], cluster="dgx-h100-ndr@2", max_layouts=4)
    assert [w["status"] for w in want] == ["no layout", "ok"], [w["status"] for w in want]
    for key in ("tp", "pp", "cp", "dp", "micro_batch", "virtual_stages", "ep", "etp"):
        cells = list(got[key])
        assert cells == [w[key] for w in want], (key, cells)
        assert cells[0] is None and type(cells[1]) is int, (key, [type(c).__name__ for c in cells])
    with tempfile.TemporaryDirectory() as folder:
        rows = os.path.join(folder, "rows.jsonl")
        cli("sweep", "--set", "model=gpt-1.3b", "--vary", "parallel.tp=1,3,8", "--gpus", "64", "--jobs", "1", "-o", rows)
        with open(rows) as f:
            want = [json.loads(line) for line in f]
    frame = stepsim.sweep(vary={"parallel.tp": [1, 3, 8]}, sets={"model": "gpt-1.3b"}, gpus=64, jobs=1)
    dp = list(frame["parallel.dp"])
    assert dp == [w["parallel.dp"] for w in want] == [64, None, 8], dp
    assert all(type(v) is int for v in dp if v is not None), [type(v).__name__ for v in dp]
    print("frame_integers: integer columns keep their integers and None")


def plan_own_cluster():
    """Without a cluster, the scenario's own cluster section (its price and network) is planned, as
    `stepsim plan SCENARIO.json` without --cluster plans it; with neither, the embedded default's
    own cluster, as `stepsim plan` without either plans it."""
    with tempfile.TemporaryDirectory() as folder:
        scenario = os.path.join(folder, "own.json")
        with open(scenario, "w") as f:
            json.dump({"preset": "default", "model": "llama3-8b",
                       "cluster": {"preset": "dgx-h100-ndr", "gpu_hour_price": 2.5,
                                   "inter_node": {"oversubscription": 4}}}, f)
        rows = os.path.join(folder, "rows.json")
        cli("plan", scenario, "--tokens", "1T", "--gpus", "8", "--max-layouts", "8", "-o", rows)
        with open(rows) as f:
            want = json.load(f)
        got = records(stepsim.plan(scenario, gpus=8, tokens="1T", max_layouts=8))
    assert len(got) == len(want) == 1 and want[0]["status"] == "ok", want
    assert want[0]["cost"] is not None, want[0]
    for key in want[0]:
        if key != "search_s":  # wall-clock time
            assert got[0][key] == want[0][key], f"{key}: {got[0][key]!r} != {want[0][key]!r}"
    # Neither a scenario nor a cluster: the embedded default's own cluster, dgx-h100-ndr.
    with tempfile.TemporaryDirectory() as folder:
        rows = os.path.join(folder, "rows.json")
        cli("plan", "--tokens", "1T", "--gpus", "8", "--max-layouts", "2", "-o", rows)
        with open(rows) as f:
            default = json.load(f)
    got = records(stepsim.plan(gpus=8, tokens="1T", max_layouts=2))
    assert len(got) == len(default) == 1 and default[0]["cluster"] == "dgx-h100-ndr", default
    for key in default[0]:
        if key != "search_s":
            assert got[0][key] == default[0][key], f"{key}: {got[0][key]!r} != {default[0][key]!r}"
    print(f"plan of the scenario's own cluster: cost {want[0]['cost']}, as the command line")


def collective():
    want = json.loads(cli("collective", "allgather", "--gpus", "16", "--ranks-per-node", "8", "--sweep", "1MiB:1GiB",
                          "--factor", "4", "--json", "-"))
    same(stepsim.collective("allgather", gpus=16, ranks_per_node=8, sweep="1MiB:1GiB", factor=4), want)
    same(stepsim.collective("allreduce"), json.loads(cli("collective", "allreduce", "--json", "-")))
    # The cluster's keys as --set takes them, a dict or a list: NVL36 racks of the NVL72 preset.
    racks = json.loads(cli("collective", "allreduce", "--cluster", "gb200-nvl72", "--gpus", "144", "--ranks-per-node",
                           "4", "--size", "1GiB", "--set", "cluster.nvlink_domain=36", "--json", "-"))
    for sets in ({"cluster.nvlink_domain": 36}, ["cluster.nvlink_domain=36"]):
        same(stepsim.collective("allreduce", cluster="gb200-nvl72", gpus=144, ranks_per_node=4, size="1GiB",
                                sets=sets), racks)
    assert racks != json.loads(cli("collective", "allreduce", "--cluster", "gb200-nvl72", "--gpus", "144",
                                   "--ranks-per-node", "4", "--size", "1GiB", "--json", "-"))
    print(f"collective: {len(want)} rows equal, and with the cluster's keys set")


def analyze():
    same(stepsim.analyze(TRACE), json.loads(cli("analyze", TRACE, "--json", "-")))
    # Standard input twice is the command line's refusal, before either is read.
    e = raised(lambda: stepsim.analyze(["-", "-"]), stepsim.ScenarioError)
    assert e.message == cli_error("analyze", "-", "-").split(": ", 2)[2], str(e)
    # A step the trace does not hold: named as the command line names it (docs/python.md).
    e = raised(lambda: stepsim.analyze(TRACE, step=3), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("--step", "3") and str(e) == cli_error("analyze", TRACE, "--step", "3"), str(e)
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


def nul_characters():
    """A NUL ends a C string: "s.json\\0junk" would read s.json. Every text argument refuses it,
    naming the argument, as Python's own open() refuses it."""
    resolved = json.loads(cli("presets", "default", "--resolved"))
    log = os.path.join(SOURCE, "tests/data/nccl-tests/a100-80g-8gpu-allreduce-a.txt")
    with tempfile.TemporaryDirectory() as folder:
        scenario = os.path.join(folder, "s.json")
        with open(scenario, "w") as f:
            json.dump(resolved, f)
        calib = os.path.join(folder, "a100.calib.json")
        cli("calibrate", "import-nccl-tests", log, "-o", calib)
        cut = "\0junk"
        for call, where in [
            (lambda: stepsim.simulate(scenario + cut), ("stepsim.simulate", "scenario")),
            (lambda: stepsim.simulate(calibration=calib + cut), ("stepsim.simulate", "calibration")),
            (lambda: stepsim.simulate(calibration=[calib, calib + cut]), ("stepsim.simulate", "calibration")),
            (lambda: stepsim.sweep(scenario + cut, vary={"parallel.tp": [1]}), ("stepsim.sweep", "scenario")),
            (lambda: stepsim.plan(scenario + cut, gpus=8, cluster="dgx-h100-ndr", tokens="1T"),
             ("stepsim.plan", "scenario")),
            (lambda: stepsim.analyze(TRACE + cut), ("stepsim.analyze", "paths")),
            (lambda: stepsim.analyze([TRACE + cut]), ("stepsim.analyze", "paths")),
            (lambda: stepsim.analyze(TRACE, step="5" + cut), ("<command line>", "--step")),
            (lambda: stepsim.collective("allreduce", cluster="dgx-a100-80g-hdr", calibration=calib + cut),
             ("<command line>", "--calibration")),
            (lambda: stepsim.collective("allreduce", cluster="dgx-a100-80g-hdr" + cut),
             ("<command line>", "--cluster")),
            (lambda: stepsim.collective("allreduce" + cut), ("<command line>", "stepsim collective")),
            (lambda: stepsim.simulate(sets={"model": "llama3-8b" + cut}), ("--set", "model")),
            (lambda: stepsim.simulate(sets=["model=llama3-8b" + cut]), ("--set", "model")),
            (lambda: stepsim.sweep(vary={"model": ["llama3-8b" + cut]}), ("--vary", "model")),
            (lambda: stepsim.sweep(vary={"parallel.tp": "1,2" + cut}), ("--vary", "parallel.tp")),
            (lambda: stepsim.plan(gpus=8, cluster="dgx-h100-ndr", tokens="1T", model="llama3-8b" + cut),
             ("<command line>", "--model")),
            (lambda: stepsim.plan(gpus=8, cluster="dgx-h100-ndr" + cut, tokens="1T"), ("<command line>", "--cluster")),
        ]:
            e = raised(call, stepsim.ScenarioError)
            assert (e.file, e.pointer) == where, (e.file, e.pointer, e.message)
            assert "NUL" in e.message and "junk" in e.message, e.message
    print("NUL characters: refused in every text argument")


def vary_keys():
    """An empty key, or one holding '=', is the command line's error for --vary =1,2 whatever
    form its values take; vary itself must be a dict."""
    want = cli_error("sweep", "--vary", "=1,2", "-o", "rows.jsonl")
    assert want == "--vary: =1,2: expected KEY=V1,V2,... or KEY=LO:HI:xF or KEY=LO:HI:+S", want
    for values in ([1, 2], (1, 2), range(1, 3), "1,2"):
        e = raised(lambda: stepsim.sweep(vary={"": values}), stepsim.ScenarioError)
        assert str(e) == want and (e.file, e.pointer) == ("--vary", "=1,2"), str(e)
        e = raised(lambda: stepsim.sweep(vary={"parallel.tp=4": values}), stepsim.ScenarioError)
        assert (e.file, e.pointer) == ("--vary", "parallel.tp=4=1,2") and "'='" in e.message, str(e)
    e = raised(lambda: stepsim.simulate(sets={"": 4}), stepsim.ScenarioError)
    assert str(e) == cli_error("simulate", "--set", "=4", "--json", "-"), str(e)
    e = raised(lambda: stepsim.simulate(sets={"parallel.tp=4": 4}), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("--set", "parallel.tp=4") and "'='" in e.message, str(e)
    for vary in (["parallel.tp"], "parallel.tp=1,2", ("parallel.tp", [1, 2])):
        e = raised(lambda: stepsim.sweep(vary=vary), TypeError)
        assert str(e).startswith("vary: "), str(e)
    e = raised(lambda: stepsim.sweep(vary={"parallel.tp": 4}), TypeError)
    assert str(e).startswith("vary: parallel.tp: "), str(e)
    print("vary keys: --vary's error for every form of values; vary not a dict is a TypeError")


def json_values():
    """A list value of vary or sets is written as on the command line, without spaces: the rows,
    sweep_id included, are those of sweep --vary 'KEY=["attn"],["attn","mlp"]'."""
    want = sweep_rows("--vary", 'training.cuda_graph_scope=["attn"],["attn","mlp"]',
                      "--set", "training.cuda_graphs=true")
    assert [w["training.cuda_graph_scope"] for w in want] == ['["attn"]', '["attn","mlp"]'], want
    for sets in ({"training.cuda_graphs": True}, ["training.cuda_graphs=true"]):
        got = records(stepsim.sweep(vary={"training.cuda_graph_scope": [["attn"], ["attn", "mlp"]]}, sets=sets))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            for key in w:
                assert g[key] == w[key], f"point {w['point']} {key}: {g[key]!r} != {w[key]!r}"
    # The same list as a --set value: the report of the command line's text.
    same(stepsim.simulate(sets={"training.cuda_graphs": True, "training.cuda_graph_scope": ["attn", "mlp"]}),
         json.loads(cli("simulate", "--set", "training.cuda_graphs=true", "--set",
                        'training.cuda_graph_scope=["attn","mlp"]', "--json", "-")))
    print(f"JSON values: {len(want)} rows of the command line, sweep_id {want[0]['sweep_id']}")


def integer_ranges():
    """Integers beyond the native types raise ScenarioError naming the argument, in the words the
    command line (or the module's own check) uses for a bad value of the same flag."""
    trace_rank = cli_error("analyze", TRACE, "--rank", "-1", "--json", "-")
    collective_gpus = cli_error("collective", "allreduce", "--gpus", "0")
    max_layouts = cli_error("plan", "--gpus", "8", "--cluster", "dgx-h100-ndr", "--tokens", "1T", "--max-layouts", "-1",
                            "-o", "rows.json")
    for call, want in [
        (lambda: stepsim.analyze(TRACE, rank=-1), trace_rank),
        (lambda: stepsim.collective("allreduce", gpus=2**31), collective_gpus.replace("got 0", f"got {2**31}")),
        (lambda: stepsim.collective("allreduce", gpus=-2**31 - 1),
         collective_gpus.replace("got 0", f"got {-2**31 - 1}")),
        (lambda: stepsim.plan(gpus=8, cluster="dgx-h100-ndr", tokens="1T", max_layouts=2**64),
         max_layouts.replace("-1", str(2**64))),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, jobs=2**64),
         f"--jobs: {2**64}: expected a whole number of simulations at once from 1 to 4096 (or 0: every usable core)"),
        (lambda: stepsim.plan(gpus=8, cluster="dgx-h100-ndr", tokens="1T", jobs=-2**63 - 1),
         f"--jobs: {-2**63 - 1}: expected a whole number of simulations at once from 1 to 4096 (or 0: every usable "
         "core)"),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, gpus=2**31),
         f"--gpus: {2**31}: expected a GPU count of 1 to {2**31 - 1} (or 0: parallel.dp as set)"),
    ]:
        e = raised(call, stepsim.ScenarioError)
        assert str(e) == want, f"{e} != {want}"
    e = raised(lambda: stepsim.collective("allreduce", ranks_per_node=2**31), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("<command line>", "--ranks-per-node") and str(2**31) in e.message, str(e)
    e = raised(lambda: stepsim.analyze(TRACE, rank=2**64), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("<command line>", "--rank"), str(e)
    print("integer ranges: ScenarioError naming the flag")


def numpy_values():
    """numpy's scalars (a DataFrame's cells) and arrays are taken wherever Python's numbers and
    lists are, with the command line's results."""
    import numpy as np

    want = json.loads(cli("simulate", "--set", "parallel.tp=2", "--set", "parallel.dp=32", "--json", "-"))
    same(stepsim.simulate(sets={"parallel.tp": np.int64(2), "parallel.dp": np.int32(32)}), want)
    same(stepsim.simulate({**json.loads(cli("presets", "default", "--resolved")), "parallel": {
        "tp": np.int64(2), "dp": np.uint8(32)}}, advise=np.bool_(False)), want)
    want = sweep_rows("--vary", "parallel.tp=1,2", "--vary", "data_parallel.bucket_cap_mb=25,100", "--gpus", "64")
    for vary in ({"parallel.tp": np.array([1, 2]), "data_parallel.bucket_cap_mb": np.array([25, 100])},
                 {"parallel.tp": [np.int64(1), np.int64(2)], "data_parallel.bucket_cap_mb": [np.int16(25), 100]}):
        got = records(stepsim.sweep(vary=vary, gpus=np.int64(64), jobs=np.int64(2), keep_oom=np.bool_(False)))
        assert len(got) == len(want) == 4
        for g, w in zip(got, want):
            for key in w:
                assert g[key] == w[key], f"point {w['point']} {key}: {g[key]!r} != {w[key]!r}"
    same(stepsim.collective("allreduce", gpus=np.int64(16), ranks_per_node=np.int32(8), sweep="1MiB:16MiB",
                            factor=np.float32(4)),
         json.loads(cli("collective", "allreduce", "--gpus", "16", "--ranks-per-node", "8", "--sweep", "1MiB:16MiB",
                        "--factor", "4", "--json", "-")))
    same(stepsim.analyze(TRACE, rank=np.int64(0), step=np.int64(5)),
         json.loads(cli("analyze", TRACE, "--rank", "0", "--step", "5", "--json", "-")))
    print("numpy values: the command line's results")


def wrong_types():
    """A bool where an integer is expected, a number or None where a bool is, bytes where text
    is: a TypeError naming the argument, never taken as something else or ignored."""
    plan = {"gpus": 8, "cluster": "dgx-h100-ndr", "tokens": "1T", "max_layouts": 2}
    for call, name in [
        (lambda: stepsim.simulate(advise=2.5), "advise"),
        (lambda: stepsim.simulate(advise=None), "advise"),
        (lambda: stepsim.simulate(advise=1), "advise"),
        (lambda: stepsim.simulate(b"default"), "scenario"),
        (lambda: stepsim.simulate(calibration=b"a.calib.json"), "calibration"),
        (lambda: stepsim.simulate(sets={b"parallel.tp": 2}), "sets"),
        (lambda: stepsim.simulate(sets=[b"parallel.tp=2"]), "sets"),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, keep_oom=0.5), "keep_oom"),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, gpus=True), "gpus"),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, gpus=64.0), "gpus"),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1]}, jobs=None), "jobs"),
        (lambda: stepsim.plan(**{**plan, "max_layouts": True}), "max_layouts"),
        (lambda: stepsim.plan(**plan, model=0), "model"),
        (lambda: stepsim.plan(**plan, model=b"llama3-8b"), "model"),
        (lambda: stepsim.plan(**plan, jobs=False), "jobs"),
        (lambda: stepsim.collective("allreduce", ranks_per_node=True), "ranks_per_node"),
        (lambda: stepsim.collective("allreduce", gpus=16.0), "gpus"),
        (lambda: stepsim.collective(b"allreduce"), "op"),
        (lambda: stepsim.collective("allreduce", size=1024), "size"),
        (lambda: stepsim.collective("allreduce", cluster=b"dgx-h100-ndr"), "cluster"),
        (lambda: stepsim.collective("allreduce", sweep="1MiB:4MiB", factor=True), "factor"),
        (lambda: stepsim.analyze(TRACE, step=True), "step"),
        (lambda: stepsim.analyze(TRACE, step=5.0), "step"),
        (lambda: stepsim.analyze(TRACE, rank=False), "rank"),
        (lambda: stepsim.analyze(TRACE.encode()), "paths"),
    ]:
        e = raised(call, TypeError)
        assert str(e).startswith(f"{name}: "), f"{name}: {e}"
    print("wrong types: TypeError naming the argument")


def dict_scenario_values():
    """What JSON cannot hold (NaN, infinities, lone surrogates) is refused at the value's JSON
    pointer in the dict, not as invalid JSON at a column of text the caller never wrote."""
    scenario = json.loads(cli("presets", "default", "--resolved"))
    for path, value, expected in [
        (["model"], float("nan"), "expected a finite number"),
        (["training", "seq_len"], float("inf"), "expected a finite number"),
        (["training", "global_batch"], -float("inf"), "expected a finite number"),
        (["model"], "llama3-\ud800", "not valid Unicode"),
    ]:
        bad = json.loads(json.dumps(scenario))
        bad[path[0]] = value if len(path) == 1 else {**bad[path[0]], path[1]: value}
        e = raised(lambda: stepsim.simulate(bad), stepsim.ScenarioError)
        assert (e.file, e.pointer) == ("<dict>", "/" + "/".join(path)) and expected in e.message, str(e)
    e = raised(lambda: stepsim.simulate({"model": float("nan")}), stepsim.ScenarioError)
    assert str(e) == "<dict>: /model: expected a finite number, got nan", str(e)
    e = raised(lambda: stepsim.simulate(sets={"training.seq_len": float("nan")}), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("--set", "training.seq_len") and "finite" in e.message, str(e)
    e = raised(lambda: stepsim.sweep(vary={"training.seq_len": [4096, float("inf")]}), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("--vary", "training.seq_len") and "finite" in e.message, str(e)
    print("dict scenario values: ScenarioError at the value's pointer")


def collective_factor():
    """factor without sweep would do nothing: refused, naming --factor."""
    e = raised(lambda: stepsim.collective("allreduce", factor=4), stepsim.ScenarioError)
    assert str(e) == "<command line>: --factor: applies only with --sweep", str(e)
    # Once the command line refuses --factor without --sweep too, its words are these.
    done = subprocess.run([STEPSIM, "collective", "allreduce", "--factor", "4"], capture_output=True, text=True)
    if done.returncode != 0:
        assert done.stderr.strip().removeprefix("stepsim: error: ") == str(e), done.stderr
    same(stepsim.collective("allreduce", size="1MiB", factor=None),
         json.loads(cli("collective", "allreduce", "--size", "1MiB", "--json", "-")))
    print("collective factor: refused without sweep")


def scenario_read_once():
    """Standard input and a FIFO are read once for every simulation of the scenario, as the
    command line reads them: the same report (calibration and advice included) and the same
    rows, where reading them again gave an empty scenario or waited for a writer forever."""
    resolved = cli("presets", "ddp-1.3b-64xa100", "--resolved")
    log = os.path.join(SOURCE, "tests/data/nccl-tests/a100-80g-8gpu-allreduce-a.txt")
    with tempfile.TemporaryDirectory() as folder:
        calib = os.path.join(folder, "a100.calib.json")
        cli("calibrate", "import-nccl-tests", log, "-o", calib)

        def piped(*args):
            done = subprocess.run([STEPSIM, *args], input=resolved, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            return done.stdout

        want = json.loads(piped("simulate", "-", "--calibration", calib, "--json", "-"))
        assert want["calibration"], "the calibration file measured nothing this scenario runs"
        got = child(f"import json, stepsim; print(json.dumps(stepsim.simulate('-', calibration={calib!r})))", resolved)
        same(json.loads(got), want)
        want = json.loads(piped("simulate", "-", "--advise", "--json", "-"))
        assert want["advice"]["alternatives"], "no advice to compare"
        same(json.loads(child("import json, stepsim; print(json.dumps(stepsim.simulate('-', advise=True)))",
                              resolved)), want)
        rows = os.path.join(folder, "rows.jsonl")
        piped("sweep", "-", "--vary", "parallel.tp=1,2", "--gpus", "64", "-o", rows)
        with open(rows) as f:
            want_rows = [json.loads(line) for line in f]
        assert [w["status"] for w in want_rows] == ["ok", "ok"], want_rows
        # The rows as the list of dicts they are without pandas, every value as its JSON type.
        got = child("import json, stepsim; stepsim._frame = lambda rows: rows; "
                    "print(json.dumps(stepsim.sweep('-', vary={'parallel.tp': [1, 2]}, gpus=64, jobs=2)))", resolved)
        same(json.loads(got), want_rows)
        # A FIFO: a writer writes the scenario once; the call reads it once and returns.
        fifo = os.path.join(folder, "scenario.fifo")
        os.mkfifo(fifo)
        writer = (f"import stepsim, threading, json\n"
                  f"stepsim._frame = lambda rows: rows\n"
                  f"def write():\n"
                  f"    with open({fifo!r}, 'w') as f:\n"
                  f"        f.write({resolved!r})\n"
                  f"for call in (lambda: stepsim.simulate({fifo!r}, calibration={calib!r}),\n"
                  f"             lambda: stepsim.sweep({fifo!r}, vary={{'parallel.tp': [1, 2]}}, gpus=64, jobs=2)):\n"
                  f"    t = threading.Thread(target=write)\n"
                  f"    t.start()\n"
                  f"    print(json.dumps(call()))\n"
                  f"    t.join()\n")
        report, swept = child(writer).splitlines()
        same(json.loads(report), json.loads(piped("simulate", "-", "--calibration", calib, "--json", "-")))
        same(json.loads(swept), want_rows)
    print("standard input and a FIFO: read once, the command line's report and rows")


def empty_names():
    """An empty scenario or trace name is refused as the command line refuses SCENARIO or TRACE
    given as "", naming the argument; None stays the embedded default."""
    want = cli_error("simulate", "", "--json", "-")
    assert want.startswith("<command line>: SCENARIO: the scenario file name is empty ("), want
    plan = {"gpus": 8, "cluster": "dgx-h100-ndr", "tokens": "1T", "max_layouts": 2}
    for call, function in [(lambda: stepsim.simulate(""), "stepsim.simulate"),
                           (lambda: stepsim.sweep("", vary={"parallel.tp": [1]}), "stepsim.sweep"),
                           (lambda: stepsim.plan("", **plan), "stepsim.plan")]:
        e = raised(call, stepsim.ScenarioError)
        assert (e.file, e.pointer) == (function, "scenario"), str(e)
        assert e.message.split(" (")[0] == want.split(": ", 2)[2].split(" (")[0], str(e)
    want = cli_error("analyze", "", "--json", "-")
    assert want == "<command line>: TRACE: the trace file or folder name is empty", want
    for paths in ("", [TRACE, ""]):
        e = raised(lambda: stepsim.analyze(paths), stepsim.ScenarioError)
        assert (e.file, e.pointer, e.message) == ("stepsim.analyze", "paths", want.split(": ", 2)[2]), str(e)
    print("empty names: refused as the command line refuses them")


def vendored_package():
    """The package copied under another name (vendor/stepsim) raises its own ScenarioError for
    bad input, not ModuleNotFoundError for a module named stepsim._core."""
    want = cli_error("simulate", "--set", "parallel.tp=x", "--json", "-")
    with tempfile.TemporaryDirectory() as folder:
        shutil.copytree(os.path.dirname(stepsim.__file__), os.path.join(folder, "vendor", "stepsim"))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        got = child("import importlib.util, json\n"
                    "assert importlib.util.find_spec('stepsim') is None, 'stepsim importable as itself'\n"
                    "from vendor import stepsim\n"
                    "try:\n"
                    "    stepsim.simulate(sets={'parallel.tp': 'x'})\n"
                    "except stepsim.ScenarioError as e:\n"
                    "    print(json.dumps([str(e), e.file, e.pointer, isinstance(e, ValueError)]))\n",
                    env=env, cwd=folder)
    assert json.loads(got) == [want, "--set", "parallel.tp", True], got
    print("vendored package: its own ScenarioError")


def unholdable_values():
    """What JSON has no form for is a TypeError naming the argument and the place in it."""
    import decimal

    for call, want in [
        (lambda: stepsim.simulate({"model": b"llama3-8b"}), "scenario: /model: "),
        (lambda: stepsim.simulate({"model": "llama3-8b", "training": {"seq_len": 1j}}), "scenario: /training/seq_len: "),
        (lambda: stepsim.simulate({"model": "llama3-8b", "parallel": {"tp": {1, 2}}}), "scenario: /parallel/tp: "),
        (lambda: stepsim.simulate({"model": "llama3-8b", "training": {"global_batch": decimal.Decimal(64)}}),
         "scenario: /training/global_batch: "),
        (lambda: stepsim.simulate({"model": ["x", b"y"]}), "scenario: /model/1: "),
        (lambda: stepsim.simulate({("model",): "llama3-8b"}), "scenario: "),
        (lambda: stepsim.simulate({"parallel": {("tp",): 2}}), "scenario: /parallel: "),
        (lambda: stepsim.simulate(sets={"model": b"x"}), "sets: model: "),
        (lambda: stepsim.simulate(sets={"training.seq_len": decimal.Decimal(4096)}), "sets: training.seq_len: "),
        (lambda: stepsim.simulate(sets={"training.cuda_graph_scope": ["attn", {"mlp"}]}),
         "sets: training.cuda_graph_scope/1: "),
        (lambda: stepsim.sweep(vary={"parallel.tp": [b"4"]}), "vary: parallel.tp: "),
        (lambda: stepsim.sweep(vary={"parallel.tp": [1, 2j]}), "vary: parallel.tp: "),
    ]:
        e = raised(call, TypeError)
        assert str(e).startswith(want) and "expected" in str(e), f"{want}: {e}"
        assert "JSON serializable" not in str(e) and not str(e)[len(want):].startswith("/"), str(e)
    print("values JSON cannot hold: TypeError naming the argument and the pointer")


def nul_in_scenario_paths():
    """A NUL in a dict scenario's calibration file name is refused at its pointer, not read up to
    the NUL (another file); a NUL in a name is escaped in the error, not its end."""
    log = os.path.join(SOURCE, "tests/data/nccl-tests/a100-80g-8gpu-allreduce-a.txt")
    with tempfile.TemporaryDirectory() as folder:
        calib = os.path.join(folder, "a100.calib.json")
        cli("calibrate", "import-nccl-tests", log, "-o", calib)
        scenario = {"preset": "ddp-1.3b-64xa100", "calibration": calib + "\0junk"}
        path = os.path.join(folder, "s.json")
        with open(path, "w") as f:
            json.dump(scenario, f)
        want = cli_error("simulate", path, "--json", "-")
        e = raised(lambda: stepsim.simulate(scenario), stepsim.ScenarioError)
        assert str(e) == want.replace(path, "<dict>", 1), f"{e} != {want}"
        assert (e.file, e.pointer) == ("<dict>", "/calibration/0") and "\\u0000junk" in e.message, str(e)
        e = raised(lambda: stepsim.simulate(path), stepsim.ScenarioError)
        assert str(e) == want, f"{e} != {want}"
        e = raised(lambda: stepsim.simulate("ddp-1.3b-64xa100", sets={"calibration": [calib + "\0junk"]}),
                   stepsim.ScenarioError)
        assert (e.file, e.pointer) == ("--set", "calibration[0]") and "\0" not in str(e), str(e)
    e = raised(lambda: stepsim.simulate({"model": "x\0y", "cluster": "dgx-h100-ndr"}), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("<dict>", "/model") and "'x\\u0000y'" in e.message, str(e)
    print("NUL in scenario paths: refused at the pointer, escaped in errors")


def collective_empty_sweep():
    """sweep="" is the sweep's own error, as on the command line, with or without factor."""
    for extra, kwargs in [((), {}), (("--factor", "2"), {"factor": 2})]:
        want = cli_error("collective", "allreduce", "--sweep", "", *extra, "--json", "-")
        assert want == "<command line>: --sweep: expected MIN:MAX such as 8B:4GiB, got ''", want
        e = raised(lambda: stepsim.collective("allreduce", sweep="", **kwargs), stepsim.ScenarioError)
        assert str(e) == want, f"{e} != {want}"
    print("collective sweep '': the command line's error")


def plan_empty_flags():
    """plan(model="") planned the default model, "" standing for the argument left out: each text
    argument of plan() is refused as the command line refuses the flag given ''; None is left out."""
    plan = {"gpus": 8, "cluster": "dgx-h100-ndr", "max_layouts": 1}
    for kwargs, flags in [({"model": "", "tokens": "1T"}, ("--model", "", "--tokens", "1T")),
                          ({"deadline": "", "tokens": "1T"}, ("--deadline", "", "--tokens", "1T")),
                          ({"tokens": "", "deadline": 10}, ("--tokens", "", "--deadline", "10"))]:
        want = cli_error("plan", "--gpus", "8", "--cluster", "dgx-h100-ndr", "--max-layouts", "1", *flags)
        e = raised(lambda: stepsim.plan(**plan, **kwargs), stepsim.ScenarioError)
        assert str(e) == want, f"{kwargs}: {e} != {want}"
    print("plan's empty text arguments: the command line's errors")


def list_items():
    """A bad item of a list argument is named by its place, not the list as a whole; an integer
    beyond a double (10**400) is refused at its JSON pointer, as 2**70 is, not at a place in JSON
    text the caller never wrote; a count beyond the native int in the words of its flag."""
    e = raised(lambda: stepsim.plan(gpus=[64.0], tokens="1T", cluster="dgx-h100-ndr"), TypeError)
    assert str(e) == "gpus[0]: expected an integer, got float", str(e)
    e = raised(lambda: stepsim.plan(gpus=[8, True], tokens="1T", cluster="dgx-h100-ndr"), TypeError)
    assert str(e) == "gpus[1]: expected an integer, got bool", str(e)
    e = raised(lambda: stepsim.plan(gpus=8, precision=["bf16", 8.5], tokens="1T", cluster="dgx-h100-ndr"), TypeError)
    assert str(e) == "precision[1]: expected a precision's name, got float", str(e)
    scenario = {"model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": {"tp": 8, "dp": 8},
                "training": {"global_batch": 2**70}}
    e = raised(lambda: stepsim.simulate(scenario), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("<dict>", "/training/global_batch"), str(e)
    scenario["training"]["global_batch"] = 10**400
    e = raised(lambda: stepsim.simulate(scenario), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("<dict>", "/training/global_batch"), str(e)
    assert e.message.endswith("is out of range (at most about 1.8e308)"), e.message
    e = raised(lambda: stepsim.simulate(sets={"training.global_batch": -10**400}), stepsim.ScenarioError)
    assert (e.file, e.pointer) == ("--set", "training.global_batch"), str(e)
    # gpus=2**31: the command line's words for --gpus 2147483648, with Python's own 0.
    want = cli_error("sweep", "--vary", "parallel.tp=8", "--gpus", str(2**31), "-o", "-")
    e = raised(lambda: stepsim.sweep(vary={"parallel.tp": [8]}, gpus=2**31), stepsim.ScenarioError)
    assert str(e) == want + " (or 0: parallel.dp as set)", f"{e} != {want}"
    print("list items named by place; huge integers at their pointer; gpus=2**31 in --gpus's words")


def plan_fp8_scaling_set():
    """FP8 current scaling given in sets while precision searches FP8: planned as the command line
    plans it, the same rows as training.precision fp8 given in sets (it was refused against the
    default scenario's bf16 before the searched precision applied)."""
    with tempfile.TemporaryDirectory() as folder:
        rows = os.path.join(folder, "rows.json")
        cli("plan", "--model", "llama3-8b", "--tokens", "1B", "--gpus", "8", "--cluster", "dgx-b200",
            "--set", "training.precision=fp8", "--set", "training.fp8_scaling=current", "--max-layouts", "8",
            "-o", rows)
        with open(rows) as f:
            want = json.load(f)
    got = records(stepsim.plan(model="llama3-8b", tokens="1B", gpus=8, cluster="dgx-b200", precision="fp8",
                               sets={"training.fp8_scaling": "current"}, max_layouts=8))
    assert len(got) == len(want) == 1 and want[0]["status"] == "ok", want
    for key in ("status", "tp", "pp", "dp", "precision", "step_time_s"):
        assert got[0][key] == want[0][key], f"{key}: {got[0][key]!r} != {want[0][key]!r}"
    print(f"plan with fp8_scaling in sets: step {got[0]['step_time_s']} s, as training.precision fp8 in sets")


def non_utf8_input():
    """docs/python.md: bad input raises ScenarioError. A scenario or calibration file that is not
    UTF-8 is one: its message says where, as the command line's does, with the bytes escaped."""
    with tempfile.TemporaryDirectory() as folder:
        scenario = os.path.join(folder, "nu.json")
        with open(scenario, "wb") as f:
            f.write(b'{\n  "preset": "ddp-1.3b-64xa100",\n  \xff"model": "gpt-1.3b"\n}\n')
        want = cli_error("simulate", scenario, "--json", "-")
        assert want.endswith("line 3, column 3: not valid UTF-8 at byte 37 (0xFF): expected UTF-8 text"), want
        e = raised(lambda: stepsim.simulate(scenario), stepsim.ScenarioError)
        assert str(e) == want, f"{e} != {want}"
        calib = os.path.join(folder, "c.json")
        with open(calib, "wb") as f:
            f.write(b'{"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100\xff"}}\n')
        e = raised(lambda: stepsim.simulate("ddp-1.3b-64xa100", calibration=calib), stepsim.ScenarioError)
        assert "not valid UTF-8 at byte 62 (0xFF)" in str(e), str(e)
        # A control character in a JSON string is escaped in the message, not printed raw.
        esc = os.path.join(folder, "esc.json")
        with open(esc, "w") as f:
            f.write('{"model": "\\u001b[31mred"}')
        e = raised(lambda: stepsim.simulate(esc), stepsim.ScenarioError)
        assert "\x1b" not in str(e) and "'\\u001b[31mred'" in e.message, str(e)
    print("input that is not UTF-8 raises ScenarioError saying where")


def compare_cluster():
    """simulate(compare_cluster=...) is `simulate --compare-cluster`: the same report with the same
    compare_clusters, the scenario's own cluster first, whichever way the clusters are given; and
    what the flag refuses it refuses in the flag's words."""
    want = json.loads(cli("simulate", "ddp-1.3b-64xa100", "--compare-cluster", "dgx-h100-ndr@3.5,dgx-b200",
                          "--json", "-"))
    assert [c["cluster"] for c in want["compare_clusters"]] == ["dgx-a100-80g-hdr", "dgx-h100-ndr", "dgx-b200"], want
    assert want["compare_clusters"][1]["cost"]["gpu_hour_price"] == 3.5
    for clusters in ("dgx-h100-ndr@3.5,dgx-b200", ["dgx-h100-ndr@3.5", "dgx-b200"],
                     {"dgx-h100-ndr": 3.5, "dgx-b200": None}):
        same(stepsim.simulate("ddp-1.3b-64xa100", compare_cluster=clusters), want)
    assert "compare_clusters" not in stepsim.simulate("ddp-1.3b-64xa100")
    for bad in ("no-such-cluster", "dgx-b200@0"):
        error = cli_error("simulate", "ddp-1.3b-64xa100", "--compare-cluster", bad, "--json", "-")
        e = raised(lambda: stepsim.simulate("ddp-1.3b-64xa100", compare_cluster=bad), stepsim.ScenarioError)
        assert str(e) == error, f"{e} != {error}"
    log = os.path.join(SOURCE, "tests/data/nccl-tests/a100-80g-8gpu-allreduce-a.txt")
    with tempfile.TemporaryDirectory() as folder:
        calib = os.path.join(folder, "a100.calib.json")
        cli("calibrate", "import-nccl-tests", log, "-o", calib)
        error = cli_error("simulate", "ddp-1.3b-64xa100", "--calibration", calib, "--compare-cluster", "dgx-b200")
        assert "cannot be combined with calibration files" in error, error
        e = raised(lambda: stepsim.simulate("ddp-1.3b-64xa100", calibration=calib, compare_cluster="dgx-b200"),
                   stepsim.ScenarioError)
        assert str(e) == error, f"{e} != {error}"
    e = raised(lambda: stepsim.simulate(compare_cluster=3), TypeError)
    assert str(e).startswith("compare_cluster: expected"), str(e)
    print("compare_cluster: the command line's comparison and refusals")


CASES = {f.__name__: f for f in [plan_empty_flags, list_items, default_scenario, embedded_example, scenario_as_dict, calibration, bad_scenario,
                                 sweep_into_frame, plan, frame_integers, plan_own_cluster, collective, analyze, presets, threads, nul_characters,
                                 vary_keys, json_values, integer_ranges, numpy_values, wrong_types,
                                 dict_scenario_values, collective_factor, scenario_read_once, empty_names,
                                 vendored_package, unholdable_values, nul_in_scenario_paths,
                                 collective_empty_sweep, plan_fp8_scaling_set, non_utf8_input, compare_cluster]}

if __name__ == "__main__":
    CASES[sys.argv[1]]()
