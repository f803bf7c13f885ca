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
import math
import os
import sys

from . import _core
from ._core import ScenarioError

__all__ = ["ScenarioError", "simulate", "sweep", "plan", "analyze", "collective", "presets"]
__version__ = _core.version()

# The name a scenario given as a dict has in errors (ScenarioError.file).
DICT_SOURCE = "<dict>"

# The native functions' integer types: a Python int beyond them is refused here, naming the
# argument, instead of by pybind11's "incompatible function arguments".
_INT = (-2**31, 2**31 - 1)
_LONG_LONG = (-2**63, 2**63 - 1)
# sweep::kMaxJobs and the largest GPU count of `stepsim collective`, for the messages of integers
# beyond the native types (the native checks give the same ones for those inside).
_MAX_JOBS = 4096
# The largest integer a double holds; the scenario reader refuses a number beyond it.
_LARGEST_DOUBLE = int(sys.float_info.max)
_MAX_COLLECTIVE_GPUS = 1 << 20

# --vary's and --set's syntax errors, in the command line's words.
_VARY_SYNTAX = "expected KEY=V1,V2,... or KEY=LO:HI:xF or KEY=LO:HI:+S"
_SET_SYNTAX = 'expected KEY=VALUE, e.g. parallel.tp=4 or cluster.inter_node.nic_bandwidth="200 Gb/s"'


def _error(file, pointer, message):
    """A ScenarioError as the native functions raise it: str() is "file: pointer: message"."""
    # A pointer to a key that holds a lone surrogate shows it escaped, so that the error prints.
    file, pointer = (part.encode("utf-8", "backslashreplace").decode() for part in (file, pointer))
    error = ScenarioError(": ".join(part for part in (file, pointer, message) if part))
    error.file, error.pointer, error.message = file, pointer, message
    return error


def _plain(value):
    """numpy's scalars and arrays (a DataFrame's cells, np.arange) as the Python values they hold,
    without importing numpy: what has .tolist() (arrays, Series, numpy scalars) or .item()."""
    if type(value) in (str, int, float, bool, list, tuple, dict, type(None)):
        return value
    for method in ("tolist", "item"):
        convert = getattr(value, method, None)
        if callable(convert):
            return convert()
    return value


def _native(text, file, pointer):
    """Text as the native functions take it. They open files by C string, so a NUL would end a
    path early and another file would be read (Python's open() refuses it too); a lone surrogate
    has no UTF-8."""
    if "\0" in text:
        raise _error(file, pointer, f"expected text without NUL characters, got {text!r}")
    _unicode(text, file, pointer)
    return text


def _unicode(text, file, pointer):
    """Refuses text with a lone surrogate (from "\\ud800" or a file name Python could not decode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _error(file, pointer, f"the string {text!r} is not valid Unicode (a lone surrogate "
                                    f"U+{ord(text[e.start]):04X} at character {e.start + 1})") from None


def _json(value, file, pointer):
    """`value` as JSON, written as one would write it on the command line (["attn","mlp"]: no
    spaces, non-ASCII as it is), so that a sweep's sweep_id and varied columns are the command
    line's."""
    return json.dumps(_json_value(value, file, pointer), separators=(",", ":"), ensure_ascii=False)


# The argument a JSON value comes from, by the name its errors give as ScenarioError.file.
_ARGUMENT = {DICT_SOURCE: "scenario", "--set": "sets", "--vary": "vary"}
# The values json.dumps writes as JSON's own (and, as text, as keys).
_JSON_SCALARS = (str, int, float, bool, type(None))


def _not_json(file, pointer, expected, value):
    """The TypeError for a value JSON cannot hold: the argument, where in it, what was expected."""
    where = f"{pointer}: " if pointer else ""
    return TypeError(f"{_ARGUMENT.get(file, file)}: {where}expected {expected}, got {type(value).__name__}")


def _json_value(value, file, pointer):
    """`value` with numpy's values as Python's; NaN, infinities and lone surrogates, which JSON
    cannot hold, are refused at their JSON pointer (json.dumps would write NaN, which no JSON
    reader takes, and the error would point into text the caller never wrote). What JSON has no
    form for (bytes, a set, a complex number, a Decimal, a tuple as a key) is a TypeError naming
    the argument and the pointer, not json.dumps's naming neither. So is an integer beyond a
    double's range (10**400), which the scenario reader would place by line and column."""
    value = _plain(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            key = _plain(key)  # json.dumps writes the other keys it takes (1, True) as text
            if not isinstance(key, _JSON_SCALARS):
                raise _not_json(file, pointer, "keys as text", key)
            name = key if isinstance(key, str) else json.dumps(key)
            member = f"{pointer}/{name.replace('~', '~0').replace('/', '~1')}"
            _unicode(name, file, member)
            out[key] = _json_value(item, file, member)
        return out
    if isinstance(value, (list, tuple)):
        return [_json_value(item, file, f"{pointer}/{i}") for i, item in enumerate(value)]
    if not isinstance(value, _JSON_SCALARS):
        raise _not_json(file, pointer, "text, a number, True, False, None, a list or a dict", value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _error(file, pointer, f"expected a finite number, got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _LARGEST_DOUBLE:
        # As the scenario reader words it, which would name only the place in the JSON text.
        raise _error(file, pointer, f"the number {value} is out of range (at most about 1.8e308)")
    if isinstance(value, str):
        _unicode(value, file, pointer)
    return value


def _scenario(scenario, function):
    """(path, text): a file or preset name, or a dict's JSON; None is the embedded default."""
    if scenario is None:
        return "", None
    if isinstance(scenario, dict):
        return DICT_SOURCE, _json(scenario, DICT_SOURCE, "")
    if isinstance(scenario, (str, os.PathLike)):
        path = _path(scenario, "scenario", f"stepsim.{function}")
        # As the command line refuses SCENARIO given as "": None is the embedded default.
        if not path:
            raise _error(f"stepsim.{function}", "scenario",
                         "the scenario file name is empty (leave it out, or give None, for the embedded default)")
        return path, None
    raise TypeError(f"scenario: expected a dict, a file path or a preset name, got {type(scenario).__name__}")


def _path(path, name, file, pointer=None):
    """A file path (text or os.PathLike) as the native functions take it; errors name the
    argument `name`, a ScenarioError as `file` and `pointer` (the argument's name if None)."""
    path = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(path, str):
        raise TypeError(f"{name}: expected a file path, got {type(path).__name__}")
    return _native(path, file, name if pointer is None else pointer)


def _files(files, name, file, pointer=None):
    """One path or a list of them."""
    if files is None:
        return []
    if isinstance(files, (str, os.PathLike)):
        return [_path(files, name, file, pointer)]
    files = _plain(files)
    if not isinstance(files, (list, tuple)):
        raise TypeError(f"{name}: expected a file path or a list of them, got {type(files).__name__}")
    return [_path(f, name, file, pointer) for f in files]


def _key(key, name):
    """A key of sets or vary: text (bytes or a number is no scenario key)."""
    if not isinstance(key, str):
        raise TypeError(f'{name}: expected keys as text such as "parallel.tp", got {type(key).__name__}')
    return key


def _value(value, file, key):
    """A value as --set takes it: text as it is, anything else as JSON (True is true)."""
    value = _plain(value)
    return _native(value, file, key) if isinstance(value, str) else _json(value, file, key)


def _sets(sets):
    """--set assignments from a dict {"parallel.tp": 4} or a list of "key=value" strings."""
    if sets is None:
        return []
    if isinstance(sets, dict):
        return [_assignment(_key(key, "sets"), value) for key, value in sets.items()]
    if isinstance(sets, (str, bytes)):
        raise TypeError(f'sets: expected a dict or a list of "key=value" strings, got one {type(sets).__name__}')
    try:
        entries = [_plain(entry) for entry in sets]
    except TypeError:
        raise TypeError(f'sets: expected a dict or a list of "key=value" strings, got {type(sets).__name__}') from None
    for entry in entries:
        if not isinstance(entry, str):
            raise TypeError(f'sets: expected "key=value" strings, got {type(entry).__name__}')
        _native(entry, "--set", entry.partition("=")[0])
    return entries


def _assignment(key, value):
    """"key=value": the key neither empty nor holding '=' (the value would start at it)."""
    text = _value(value, "--set", key)
    if not key:
        raise _error("--set", f"={text}", _SET_SYNTAX)
    if "=" in key:
        raise _error("--set", key, "expected a key without '=' (--set KEY=VALUE ends the key at the first '=')")
    return f"{_native(key, '--set', key)}={text}"


def _axes(vary):
    """sweep()'s axes [(key, values)] from {key: values}, as --vary KEY=VALUES gives them."""
    if vary is None:
        return []
    if not isinstance(vary, dict):
        raise TypeError(f"vary: expected a dict {{key: values}}, got {type(vary).__name__}")
    return [_axis(_key(key, "vary"), values) for key, values in vary.items()]


def _axis(key, values):
    """One axis: a list of values, or the text of --vary ("1,2,4", "1:256:x2")."""
    values = _plain(values)
    if isinstance(values, str):
        listed, text = None, _native(values, "--vary", key)
    elif isinstance(values, (list, tuple, range)):
        listed = [_value(v, "--vary", key) for v in values]
        text = ",".join(listed)
    else:
        raise TypeError(f"vary: {key}: expected a list of values or the text of --vary, got {type(values).__name__}")
    # --vary KEY=VALUES takes the key up to the first '=': an empty key, or one holding '=', has
    # no command line of its own, and the rows would be blamed on a --set the caller never wrote.
    if not key:
        raise _error("--vary", f"={text}", _VARY_SYNTAX)
    if "=" in key:
        raise _error("--vary", f"{key}={text}",
                     "expected a key without '=' (--vary KEY=VALUES ends the key at the first '=')")
    _native(key, "--vary", key)
    return key, _core.axis_values(key, text) if listed is None else listed


def _int(value, name):
    """An integer argument: numpy's integers too, but not a bool (True is no count)."""
    value = _plain(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}")
    return value


def _bool(value, name):
    """A flag: True or False (numpy's too), not a number or None that would be read as one."""
    value = _plain(value)
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__}")
    return value


def _inside(value, bounds):
    """Whether `value` fits the native type whose bounds these are."""
    return bounds[0] <= value <= bounds[1]


def _jobs(jobs):
    """sweep()'s and plan()'s jobs, refused in the words of --jobs; the native check refuses what
    is out of range but fits."""
    jobs = _int(jobs, "jobs")
    if not _inside(jobs, _LONG_LONG):
        raise _error("--jobs", str(jobs), f"expected a whole number of simulations at once from 1 to {_MAX_JOBS} "
                                          "(or 0: every usable core)")
    return jobs


def simulate(scenario=None, sets=None, calibration=None, advise=False, compare_cluster=None):
    """The report of one training step as a dict, the fields of `stepsim simulate --json`.

    scenario: a dict (a scenario file's contents), a file path, an example preset's name
    (stepsim.presets()), or None for the embedded default. sets: overrides as `--set` takes
    them, a dict {"parallel.tp": 4} or a list of "key=value". calibration: calibration files
    (one path or a list) applied after the scenario's own, as `--calibration`. advise: simulate
    the fixes for exposed communication whatever the scenario's size, as `--advise` (without it,
    as without the flag: when communication is exposed, and simulated when the scenario is small).
    compare_cluster: other cluster presets to simulate the same job on with its layout held
    fixed, as `--compare-cluster`: "name[@price]" (price per GPU-hour), a list of them or a dict
    {name: price or None}; the report then has `compare_clusters`, the scenario's own cluster
    first. Its errors are in the words of --compare-cluster.
    """
    path, text = _scenario(scenario, "simulate")
    calibrations = _files(calibration, "calibration", "stepsim.simulate")
    clusters = _clusters(compare_cluster, "compare_cluster", "--compare-cluster")
    return json.loads(_core.simulate_json(path, text, _sets(sets), calibrations, _bool(advise, "advise"), clusters))


def sweep(scenario=None, vary=None, sets=None, gpus=0, keep_oom=False, jobs=0):
    """Every point of the product of `vary`, one row each as `stepsim sweep -o FILE.jsonl` writes
    it: a pandas DataFrame when pandas imports, else a list of dicts.

    vary: {key: values}, the first key varying slowest; values a list ([1, 2, 4]) or the text of
    --vary ("1,2,4", a range "1:256:x2" or "1:4:+1"). gpus: derive parallel.dp = gpus / (tp·pp·cp)
    per point. keep_oom: points that do not fit keep every column. jobs: simulations at once
    (0: every usable core). A point that fails is a row with its status and reason.
    """
    path, text = _scenario(scenario, "sweep")
    axes = _axes(vary)
    gpus = _int(gpus, "gpus")
    if not _inside(gpus, _INT):
        # The words of --gpus.
        raise _error("--gpus", str(gpus), f"expected a GPU count of 1 to {_INT[1]} (or 0: parallel.dp as set)")
    rows = _core.sweep_rows(path, text, axes, _sets(sets), gpus, _bool(keep_oom, "keep_oom"),
                            _jobs(jobs))
    return _frame([json.loads(line) for line in rows])


def _frame(rows):
    """Rows as a pandas DataFrame when pandas imports, else the list of dicts itself. A column of
    integers with a null among them (a plan row without a layout, a sweep point refused before it
    has a dp) keeps its integers and None, as the rows hold them: pandas would make it float64,
    tp 8.0 and NaN."""
    try:
        import pandas
    except ImportError:
        return rows
    frame = pandas.DataFrame.from_records(rows, columns=list(rows[0]) if rows else None)
    for name in frame.columns:
        values = [row.get(name) for row in rows]
        if None in values and all(v is None or (type(v) is int) for v in values) and any(v is not None for v in values):
            frame[name] = pandas.Series(values, index=frame.index, dtype=object)
    return frame


def _flag(name):
    """The command line's flag of a keyword argument: ranks_per_node is --ranks-per-node."""
    return "--" + name.replace("_", "-")


def _string(value, name):
    """A text argument (None: the flag not given, passed on as None), named as its flag in errors."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected text, got {type(value).__name__}")
    return _native(value, "<command line>", _flag(name))


def _text(value, name):
    """A number or text as the flag takes it (None: the flag not given)."""
    value = _plain(value)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TypeError(f"{name}: expected a number or text, got {type(value).__name__}")
    return _native(value, "<command line>", _flag(name)) if isinstance(value, str) else repr(value)


def _list_text(values, name, item):
    """A list (or one item) as the text of a comma-separated flag (None: the flag not given); a bad
    item of a list is named by its place (`gpus[0]: expected an integer, got float`)."""
    values = _plain(values)
    if values is None:
        return None
    if isinstance(values, (list, tuple)):
        items = [_plain(v) for v in values]
        for i, v in enumerate(items):
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise TypeError(f"{name}[{i}]: expected {item}, got {type(v).__name__}")
    elif isinstance(values, bool) or not isinstance(values, (str, int)):
        raise TypeError(f"{name}: expected one value, a list of them or the flag's text, "
                        f"got {type(values).__name__}")
    else:
        items = [values]
    return _native(",".join(str(v) for v in items), "<command line>", _flag(name))


def _clusters(cluster, name="cluster", flag="--cluster"):
    """Values of `flag` from "name[@price]", a list of them, or a dict {name: price or None};
    None gives none."""
    cluster = _plain(cluster)
    if cluster is None:
        return []
    if isinstance(cluster, str):
        names = [cluster]
    elif isinstance(cluster, dict) and all(isinstance(key, str) for key in cluster):
        names = [key if price is None else f"{key}@{_text(price, name)}" for key, price in cluster.items()]
    elif isinstance(cluster, (list, tuple)) and all(isinstance(c, str) for c in cluster):
        names = list(cluster)
    else:
        raise TypeError(f'{name}: expected "name[@price]", a list of them or a dict {{name: price}}, '
                        f"got {type(cluster).__name__}")
    return [_native(text, "<command line>", flag) for text in names]


def plan(scenario=None, *, gpus, cluster=None, tokens=None, deadline=None, model=None, precision=None, sets=None,
         max_layouts=_core.DEFAULT_PLAN_LAYOUTS, jobs=0):
    """Which cluster to buy: for each cluster and GPU count the fastest layout that fits, and what
    the token budget costs on it, one row each as `stepsim plan ... -o rows.json` writes it: a
    pandas DataFrame when pandas imports, else a list of dicts.

    gpus: a count, a list ([128, 256]) or the text of --gpus ("64:1024:x2"). cluster: a cluster
    preset "name" or "name@price" (price per GPU-hour), a list of them, or a dict {name: price or
    None}; without one, the scenario's own cluster (its cluster section, price included) is planned,
    as `stepsim plan SCENARIO.json` without --cluster does. tokens: the budget, a number or text ("1T", "300B"); deadline: days. At least one of
    the two. model: a model preset, as --model. precision: precisions to search ("bf16,fp8" or a
    list; default the scenario's). max_layouts and jobs as the flags. A cluster and GPU count
    where nothing fits is a row with status "none fits" or "no layout" and its reason.
    """
    path, text = _scenario(scenario, "plan")
    max_layouts = _int(max_layouts, "max_layouts")
    if not _inside(max_layouts, _LONG_LONG):
        # The command line's words for a count outside the flag's range.
        raise _error("--max-layouts", str(max_layouts), "expected a number of layouts from 0 (every one) to 1000000")
    rows = json.loads(_core.plan_json(path, text, _string(model, "model"), _text(tokens, "tokens"),
                                      _text(deadline, "deadline"), _list_text(gpus, "gpus", "an integer"), _clusters(cluster),
                                      [_list_text(precision, "precision", "a precision's name")] if precision is not None else [],
                                      _sets(sets), max_layouts, _jobs(jobs)))
    return _frame(rows)


def analyze(paths, rank=None, step=None):
    """A PyTorch profiler (Kineto) trace measured as `stepsim analyze --json` does, as a dict.

    paths: a trace file (.json or .json.gz), a folder of one job's rank files, or a list of them.
    One rank (one file, or `rank` of a folder): its steps and collectives; several: every rank,
    across ranks and the stragglers. step: only ProfilerStep#N (N or the full name).
    """
    paths = _files(paths, "paths", "stepsim.analyze")
    # As the command line refuses TRACE given as "" (no file or folder has that name).
    if "" in paths:
        raise _error("stepsim.analyze", "paths", "the trace file or folder name is empty")
    if paths.count("-") > 1:
        raise _error("stepsim.analyze", "paths", "'-' (standard input) is given twice, but it can be read only once: "
                     "give all but one of them as files")
    return json.loads(_core.analyze_json(paths, _rank(rank), _step(step)))


def _rank(rank):
    """analyze()'s rank (the global rank, as --rank), refused in the words --rank uses."""
    if rank is None:
        return None
    rank = _int(rank, "rank")
    if rank < 0:
        raise _error("<command line>", "--rank", f"expected a rank of 0 or more, got {rank}")
    if rank >= 2**20:
        raise _error("<command line>", "--rank", f"expected a rank below {2**20}, got {rank}")
    return rank


def _step(step):
    """analyze()'s step: N or the full name "ProfilerStep#N"."""
    step = _plain(step)
    if step is None:
        return None
    if isinstance(step, bool) or not isinstance(step, (int, str)):
        raise TypeError(f'step: expected a step number or its name "ProfilerStep#N", got {type(step).__name__}')
    return _native(str(step), "<command line>", "--step")


def collective(op, *, size=None, sweep=None, factor=None, gpus=None, ranks_per_node=None, cluster=None,
               algorithm=None, protocol=None, calibration=None, sets=None):
    """The rows of `stepsim collective OP --json`: time, algbw and busbw per size, with the
    (algorithm, protocol) pair NCCL would choose.

    Keyword arguments, as the command line's flags: size ("256MiB"), sweep ("8B:4GiB"), factor
    (with sweep only), gpus, ranks_per_node, cluster, algorithm, protocol, calibration (one file
    or a list), sets (the cluster's keys as `--set` takes them, a dict {"cluster.nvlink_domain":
    36} or a list of "cluster.key=value"). None, or an argument left out, is the flag left out.
    """
    if not isinstance(op, str):
        raise TypeError(f"op: expected the collective's name such as \"allreduce\", got {type(op).__name__}")
    options = {name: _string(value, name) for name, value in
               [("size", size), ("sweep", sweep), ("cluster", cluster), ("algorithm", algorithm),
                ("protocol", protocol)] if value is not None}
    if factor is not None:
        options["factor"] = _factor(factor)
        # Without a sweep there is one size and no step: the factor would do nothing. A sweep
        # given as "" is the sweep's own error, as on the command line.
        if sweep is None:
            raise _error("<command line>", "--factor", "applies only with --sweep")
    if gpus is not None:
        options["gpus"] = _collective_int(gpus, "gpus", f"expected 2 to {_MAX_COLLECTIVE_GPUS} GPUs")
    if ranks_per_node is not None:
        options["ranks_per_node"] = _collective_int(ranks_per_node, "ranks_per_node",
                                                    "expected 1 to the cluster's GPUs per node")
    if calibration is not None:
        options["calibration"] = _files(calibration, "calibration", "<command line>", "--calibration")
    if sets is not None:
        options["sets"] = _sets(sets)
    return json.loads(_core.collective_json(_native(op, "<command line>", "stepsim collective"), **options))


def _collective_int(value, name, expected):
    """A count of collective() within the native int (the native checks word the rest)."""
    value = _int(value, name)
    if not _inside(value, _INT):
        raise _error("<command line>", _flag(name), f"{expected}, got {value}")
    return value


def _factor(factor):
    """The size step of a sweep: a number (one too large for a float is refused as --factor is)."""
    factor = _plain(factor)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError(f"factor: expected a number, got {type(factor).__name__}")
    try:
        return float(factor)
    except OverflowError:
        raise _error("<command line>", "--factor",
                     f"expected a factor between 1.001 and 1000000, got {factor}") from None


def presets():
    """The embedded GPUs, clusters, models and example scenarios: [{"kind", "name", "summary"}]."""
    return _core.presets()
