"""stepsim in Python: simulate a training step, sweep a scenario's keys, plan which cluster to
buy, analyze profiler traces and predict collectives with the functions the `stepsim` command
line calls.

Every result is the JSON the command line writes with --json, read by Python's json module, so
the numbers are the command line's to the last digit. Bad input raises ScenarioError, whose
.file, .pointer and .message say which file (or argument), where in it (a JSON pointer) and what
was expected. The functions release the GIL while they work: threads simulate side by side.

    import stepsim
    report = stepsim.simulate("ddp-1.3b-64xa100", sets={"data_parallel.bucket_cap_mb": 100})
    report["step_time_s"], report["breakdown_s"]["exposed_comm"]["dp"]
    frame = stepsim.sweep(vary={"data_parallel.bucket_cap_mb": [5, 25, 100]})

See docs/python.md.
"""
import json
import os

from . import _core
from ._core import ScenarioError

__all__ = ["ScenarioError", "simulate", "sweep", "plan", "analyze", "collective", "presets"]
__version__ = _core.version()

# The name a scenario given as a dict has in errors (ScenarioError.file).
DICT_SOURCE = "<dict>"


def _scenario(scenario):
    """(path, text): a file or preset name, or a dict's JSON; None is the embedded default."""
    if scenario is None:
        return "", None
    if isinstance(scenario, dict):
        return DICT_SOURCE, json.dumps(scenario)
    if isinstance(scenario, (str, os.PathLike)):
        return os.fspath(scenario), None
    raise TypeError(f"scenario: expected a dict, a file path or a preset name, got {type(scenario).__name__}")


def _value(value):
    """A value as --set takes it: text as it is, anything else as JSON (True is true)."""
    return value if isinstance(value, str) else json.dumps(value)


def _sets(sets):
    """--set assignments from a dict {"parallel.tp": 4} or a list of "key=value" strings."""
    if sets is None:
        return []
    if isinstance(sets, dict):
        return [f"{key}={_value(value)}" for key, value in sets.items()]
    if isinstance(sets, str):
        raise TypeError('sets: expected a dict or a list of "key=value" strings, got one string')
    return list(sets)


def _files(files):
    if files is None:
        return []
    return [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else [os.fspath(f) for f in files]


def simulate(scenario=None, sets=None, calibration=None, advise=False):
    """The report of one training step as a dict, the fields of `stepsim simulate --json`.

    scenario: a dict (a scenario file's contents), a file path, an example preset's name
    (stepsim.presets()), or None for the embedded default. sets: overrides as `--set` takes
    them, a dict {"parallel.tp": 4} or a list of "key=value". calibration: calibration files
    (one path or a list) applied after the scenario's own, as `--calibration`. advise: simulate
    the fixes for exposed communication whatever the scenario's size, as `--advise` (without it,
    as without the flag: when communication is exposed, and simulated when the scenario is small).
    """
    path, text = _scenario(scenario)
    return json.loads(_core.simulate_json(path, text, _sets(sets), _files(calibration), advise))


def sweep(scenario=None, vary=None, sets=None, gpus=0, keep_oom=False, jobs=0):
    """Every point of the product of `vary`, one row each as `stepsim sweep -o FILE.jsonl` writes
    it: a pandas DataFrame when pandas imports, else a list of dicts.

    vary: {key: values}, the first key varying slowest; values a list ([1, 2, 4]) or the text of
    --vary ("1,2,4", a range "1:256:x2" or "1:4:+1"). gpus: derive parallel.dp = gpus / (tp·pp·cp)
    per point. keep_oom: points that do not fit keep every column. jobs: simulations at once
    (0: every usable core). A point that fails is a row with its status and reason.
    """
    path, text = _scenario(scenario)
    axes = [(key, _core.axis_values(key, values) if isinstance(values, str) else [_value(v) for v in values])
            for key, values in (vary or {}).items()]
    rows = [json.loads(line) for line in _core.sweep_rows(path, text, axes, _sets(sets), gpus, keep_oom, jobs)]
    return _frame(rows)


def _frame(rows):
    """Rows as a pandas DataFrame when pandas imports, else the list of dicts itself."""
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame.from_records(rows, columns=list(rows[0]) if rows else None)


def _text(value, name):
    """A number or text as the flag takes it ("" for None)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TypeError(f"{name}: expected a number or text, got {type(value).__name__}")
    return value if isinstance(value, str) else repr(value)


def _list_text(values, name):
    """A list (or one item) as the text of a comma-separated flag."""
    if values is None:
        return ""
    if isinstance(values, (str, int)) and not isinstance(values, bool):
        return str(values)
    if isinstance(values, (list, tuple)) and all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                 for v in values):
        return ",".join(str(v) for v in values)
    raise TypeError(f"{name}: expected one value, a list of them or the flag's text, got {type(values).__name__}")


def _clusters(cluster):
    """--cluster values from "name[@price]", a list of them, or a dict {name: price or None}."""
    if isinstance(cluster, str):
        return [cluster]
    if isinstance(cluster, dict):
        return [name if price is None else f"{name}@{_text(price, 'cluster')}" for name, price in cluster.items()]
    if isinstance(cluster, (list, tuple)) and all(isinstance(c, str) for c in cluster):
        return list(cluster)
    raise TypeError('cluster: expected "name[@price]", a list of them or a dict {name: price}, '
                    f"got {type(cluster).__name__}")


def plan(scenario=None, *, gpus, cluster, tokens=None, deadline=None, model=None, precision=None, sets=None,
         max_layouts=_core.DEFAULT_PLAN_LAYOUTS, jobs=0):
    """Which cluster to buy: for each cluster and GPU count the fastest layout that fits, and what
    the token budget costs on it, one row each as `stepsim plan ... -o rows.json` writes it: a
    pandas DataFrame when pandas imports, else a list of dicts.

    gpus: a count, a list ([128, 256]) or the text of --gpus ("64:1024:x2"). cluster: a cluster
    preset "name" or "name@price" (price per GPU-hour), a list of them, or a dict {name: price or
    None}. tokens: the budget, a number or text ("1T", "300B"); deadline: days. At least one of
    the two. model: a model preset, as --model. precision: precisions to search ("bf16,fp8" or a
    list; default the scenario's). max_layouts and jobs as the flags. A cluster and GPU count
    where nothing fits is a row with status "none fits" or "no layout" and its reason.
    """
    path, text = _scenario(scenario)
    rows = json.loads(_core.plan_json(path, text, model or "", _text(tokens, "tokens"), _text(deadline, "deadline"),
                                      _list_text(gpus, "gpus"), _clusters(cluster),
                                      [_list_text(precision, "precision")] if precision is not None else [],
                                      _sets(sets), max_layouts, jobs))
    return _frame(rows)


def analyze(paths, rank=None, step=None):
    """A PyTorch profiler (Kineto) trace measured as `stepsim analyze --json` does, as a dict.

    paths: a trace file (.json or .json.gz), a folder of one job's rank files, or a list of them.
    One rank (one file, or `rank` of a folder): its steps and collectives; several: every rank,
    across ranks and the stragglers. step: only ProfilerStep#N (N or the full name).
    """
    paths = _files(paths)
    return json.loads(_core.analyze_json(paths, rank, None if step is None else str(step)))


def collective(op, **options):
    """The rows of `stepsim collective OP --json`: time, algbw and busbw per size, with the
    (algorithm, protocol) pair NCCL would choose.

    Keyword arguments, as the command line's flags: size ("256MiB"), sweep ("8B:4GiB"), factor,
    gpus, ranks_per_node, cluster, algorithm, protocol, calibration (one file or a list).
    """
    if "calibration" in options:
        options["calibration"] = _files(options["calibration"])
    return json.loads(_core.collective_json(op, **options))


def presets():
    """The embedded GPUs, clusters, models and example scenarios: [{"kind", "name", "summary"}]."""
    return _core.presets()
