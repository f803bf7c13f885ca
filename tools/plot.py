#!/usr/bin/env python3
"""Pictures of stepsim results (matplotlib; Debian's python3-matplotlib).

  plot.py curves SWEEP.csv -x data_parallel.bucket_cap_mb [--group parallel.tp] -o curves.png
      step time and exposed communication against a varied key, one line per group value
  plot.py breakdown SWEEP.csv [--label KEY]... -o bars.png
      stacked bars of the step per configuration: compute, exposed communication per kind,
      bubble, optimizer, the rest
  plot.py timeline TRACE.json -o timeline.png [--ranks N]
      the kernels of a trace (stepsim simulate --trace, or a PyTorch profiler trace) as lanes
  plot.py pareto PLAN.csv -o pareto.png
      stepsim plan's rows: cost against time to train, the bands as error bars, the Pareto front

SWEEP is a sweep's rows as CSV or JSON lines (-o FILE.jsonl); PLAN is plan's rows as CSV or JSON
(-o FILE.json). Every picture is WIDTH x HEIGHT pixels (--width, --height; default 1200 x 700), in the format
-o's name ends with (.png, .svg or .pdf; a device or pipe gets PNG); a file is replaced whole or not at all, and never the
input it was drawn from. Rows that are
not plotted (out of memory, invalid, nothing fits, no price) are listed under the picture and
on stdout, never dropped silently; legends sit beside the axes, not over the data.

Needs Python 3 with matplotlib (Debian: apt install python3-matplotlib, then /usr/bin/python3).
"""
import argparse
import csv
import gzip
import json
import math
import os
import stat
import sys
import tempfile

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    print(f"plot.py: error: needs matplotlib, which {sys.executable} (Python {sys.version.split()[0]}) does not "
          "have: on Debian, apt install python3-matplotlib and run tools/plot.py with /usr/bin/python3",
          file=sys.stderr)
    sys.exit(2)

KINDS = ["tp", "cp", "ep", "dp", "fsdp", "pp", "other"]
COLOURS = {"compute": "#4C72B0", "bubble": "#BBBBBB", "optimizer": "#8172B2", "rest": "#EEEEEE",
           "tp": "#DD8452", "cp": "#937860", "ep": "#DA8BC3", "dp": "#C44E52", "fsdp": "#55A868",
           "pp": "#CCB974", "other": "#64B5CD", "memory": "#999999"}


def fail(message):
    print(f"plot.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def cell(value):
    """A JSON row's value as the CSV cell stepsim writes for it: null empty, true and false as
    such, numbers with every digit, a list or object as its JSON text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, separators=(",", ":"))


def json_rows(path, text):
    """The rows of `plan -o FILE.json` (one array of objects) or of `sweep -o FILE.jsonl` (one
    object a line), each as CSV would give it; None when `text` is neither (then read as CSV)."""
    try:
        document = json.loads(text)
        rows = document if isinstance(document, list) else [document]
    except RecursionError:
        fail(f"{path}: nested too deeply: expected stepsim's rows (flat JSON objects)")
    except ValueError:
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except RecursionError:
                fail(f"{path}: line {number}: nested too deeply: expected stepsim's rows (flat JSON objects)")
            except ValueError:
                fail(f"{path}: line {number}: not JSON: expected stepsim's CSV, JSON lines (sweep -o FILE.jsonl) or "
                     "JSON (plan -o FILE.json)")
    if not all(isinstance(r, dict) for r in rows):
        fail(f"{path}: expected rows as JSON objects, one a line (sweep -o FILE.jsonl) or in one array (plan -o "
             "FILE.json)")
    return [{key: cell(value) for key, value in r.items()} for r in rows]


def read_all(path):
    """The rows of stepsim's CSV, JSON lines (sweep -o FILE.jsonl) or JSON (plan -o FILE.json), told
    apart by their first character ('{' or '['), every value as the CSV cell would have it."""
    try:
        with open(path, newline="") as f:
            text = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except UnicodeDecodeError:
        fail(f"{path}: not text: expected stepsim's CSV, JSON lines (sweep -o FILE.jsonl) or JSON (plan -o FILE.json)")
    text = text.removeprefix("\ufeff")  # a byte order mark an editor put first
    if text.lstrip()[:1] in ("{", "["):
        return json_rows(path, text)
    try:
        return list(csv.DictReader(text.splitlines()))
    except csv.Error as e:
        fail(f"{path}: not CSV ({e}): expected stepsim's CSV, JSON lines (sweep -o FILE.jsonl) or JSON (plan -o "
             "FILE.json)")


def check_numbers(path, rows, keys, required=()):
    """Refuses, naming the row and the column, a row whose `keys` hold something other than a
    number (or nothing, except the `required` ones), as stepsim never writes them: the picture
    would otherwise stop half drawn."""
    for i, r in enumerate(rows, 1):
        for key in keys:
            value = r.get(key)
            if value is None and key not in r:
                fail(f"{path}: no column '{key}': expected stepsim's rows")
            if (value == "" or value is None) and key not in required:
                continue
            got = number(value if isinstance(value, str) else "")
            if got is None or not math.isfinite(got):
                point = r.get("point") or f"{r.get('cluster', '')} x {r.get('gpus', '')}"
                fail(f"{path}: row {i} ({point}): {key}: expected a number, got {value!r}")


def read_rows(path, left_out=None):
    """The rows with a step time; the others go to `left_out` (status and reason) when given."""
    rows = read_all(path)
    ok = [r for r in rows if r.get("status") == "ok" and r.get("step_time_s")]
    columns = ["step_time_s", "compute_s", "bubble_s", "optimizer_s"] + [f"exposed_{k}_s" for k in KINDS]
    check_numbers(path, ok, columns, required=("step_time_s",))
    if left_out is not None:
        left_out.extend(r for r in rows if not (r.get("status") == "ok" and r.get("step_time_s")))
    if not ok:
        fail(f"{path}: no row with status ok and a step time")
    return ok


def list_left_out(fig, lines):
    """What is not drawn, under the picture and on stdout."""
    for line in lines:
        print(f"not plotted: {line}")
    if not lines:
        return
    shown = lines[:6] + ([f"... and {len(lines) - 6} more (see stdout)"] if len(lines) > 6 else [])
    fig.text(0.01, 0.005, "not plotted: " + "; ".join(shown), fontsize="x-small", va="bottom", wrap=True)
    fig.subplots_adjust(bottom=0.12)


def outside_legend(axis):
    """The legend beside the axes, where it covers no data."""
    axis.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def figure(args, rows=1):
    dpi = 100
    fig, axes = plt.subplots(rows, 1, figsize=(args.width / dpi, args.height / dpi), dpi=dpi, squeeze=False)
    return fig, [a[0] for a in axes]


FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def written_through(path):
    """A device or FIFO (/dev/null, /dev/stdout, a pipe): written in place, as PNG unless its name
    says otherwise."""
    return os.path.exists(path) and not os.path.isdir(path) and not stat.S_ISREG(os.stat(path).st_mode)


def picture_format(path):
    return FORMATS.get(os.path.splitext(path)[1].lower(), "png")


def check_output(path, source):
    """Refuses, before any work, an output that cannot be written or would replace the input."""
    if not path:
        fail("-o: expected a file name, got ''")
    if not written_through(path) and os.path.splitext(path)[1].lower() not in FORMATS:
        fail(f"{path}: -o: expected a name ending in .png, .svg or .pdf (the picture's format)")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        fail(f"{path}: -o: the folder {folder} does not exist")
    if os.path.isdir(path):
        fail(f"{path}: -o: is a folder, not a file")
    if os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
        fail(f"{path}: -o: is {source}, the input: writing it would replace what was read (give the picture "
             "another name)")


def save(fig, path, footer=False):
    """Writes the picture whole or not at all: a regular file through a temporary renamed over
    it, a device or FIFO (/dev/null, /dev/stdout) written in place."""
    # Layout inside the figure (the pixel size stays as asked), leaving room for the list of
    # what is not plotted.
    fig.tight_layout(rect=(0, 0.06 if footer else 0, 1, 1))
    fmt = picture_format(path)
    try:
        if written_through(path):
            with open(path, "wb") as f:
                fig.savefig(f, dpi=100, format=fmt)
        else:
            target = os.path.realpath(path)
            fd, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".plot-")
            try:
                with os.fdopen(fd, "wb") as f:
                    fig.savefig(f, dpi=100, format=fmt)
                os.chmod(temporary, os.stat(target).st_mode & 0o7777 if os.path.exists(target) else 0o644)
                os.replace(temporary, target)
            except BaseException:
                os.unlink(temporary)
                raise
    except OSError as e:
        fail(f"{path}: -o: cannot write the picture: {e.strerror}")
    plt.close(fig)


def exposed(row):
    return sum(float(row.get(f"exposed_{k}_s") or 0) for k in KINDS)


def why(row):
    return row.get("reason") or row.get("status") or "no step time"


def curves(args):
    left_out = []
    rows = read_rows(args.sweep, left_out)
    if args.x not in rows[0]:
        fail(f"{args.sweep}: no column '{args.x}' (the -x key must be a varied key)")
    if args.group and args.group not in rows[0]:
        fail(f"{args.sweep}: no column '{args.group}'")
    groups = {}
    for r in rows:
        groups.setdefault(r[args.group] if args.group else "", []).append(r)
    fig, (top, bottom) = figure(args, rows=2)
    missing = {}
    for r in left_out:
        missing.setdefault(r.get(args.group, "") if args.group else "", []).append(r)
    order = lambda kv: (number(kv[0]) is None, number(kv[0]) or 0, kv[0])  # noqa: E731
    for name, members in sorted(groups.items(), key=order):
        members.sort(key=lambda r: number(r[args.x]) or 0)
        xs = [number(r[args.x]) for r in members]
        label = f"{args.group}={name}" if args.group else None
        if label and name in missing:
            label += f" ({len(missing[name])} not plotted)"
        top.plot(xs, [float(r["step_time_s"]) for r in members], marker="o", label=label)
        bottom.plot(xs, [exposed(r) for r in members], marker="o", label=label)
    for name, members in sorted(missing.items(), key=order):
        if name in groups or not args.group:
            continue
        # A whole curve without a step time: in the legend, marked, with no line.
        label = f"{args.group}={name}: none plotted ({members[0].get('status', '?')})"
        for axis in (top, bottom):
            axis.plot([], [], marker="x", linestyle="none", color="#999999", label=label)
    lines = [f"{args.group}={r.get(args.group, '')} " if args.group else "" for r in left_out]
    lines = [f"{g}{args.x}={r.get(args.x, '')}: {r.get('status', '?')}: {why(r)}" for g, r in zip(lines, left_out)]
    numeric = all(number(r[args.x]) is not None and number(r[args.x]) > 0 for r in rows)
    for axis in (top, bottom):
        if numeric and max(number(r[args.x]) for r in rows) / min(number(r[args.x]) for r in rows) >= 20:
            axis.set_xscale("log", base=2)
        axis.set_xlabel(args.x)
        axis.grid(True, alpha=0.3)
        if args.group:
            outside_legend(axis)
    top.set_ylabel("step time (s)")
    top.set_title("step time")
    bottom.set_ylabel("exposed communication (s)")
    bottom.set_title("exposed communication (all kinds)")
    for name, members in sorted(groups.items(), key=order):
        print(f"plotted: {args.group + '=' + name if args.group else 'all'}: {len(members)} points")
    list_left_out(fig, lines)
    save(fig, args.output, footer=bool(lines))


def breakdown(args):
    left_out = []
    rows = read_rows(args.sweep, left_out)
    for label in args.label or []:
        if label not in rows[0]:
            fail(f"{args.sweep}: no column '{label}' (a --label must be a column, such as a varied key)")
    labels = args.label or [c for c in rows[0] if "." in c]
    fig, (axis,) = figure(args)
    names = [" ".join(f"{k.split('.')[-1]}={r.get(k, '')}" for k in labels) or r["point"] for r in rows]
    bottoms = [0.0] * len(rows)
    parts = [("compute", lambda r: float(r["compute_s"] or 0))]
    parts += [(k, (lambda kind: lambda r: float(r.get(f"exposed_{kind}_s") or 0))(k)) for k in KINDS]
    parts += [("bubble", lambda r: float(r["bubble_s"] or 0)), ("optimizer", lambda r: float(r["optimizer_s"] or 0))]

    measured = list(parts)

    def rest(r):
        return max(0.0, float(r["step_time_s"]) - sum(f(r) for _, f in measured))

    parts.append(("rest", rest))
    for name, value in parts:
        heights = [value(r) for r in rows]
        if not any(h > 0 for h in heights):
            continue
        shown = name if name in ("compute", "bubble", "optimizer", "rest") else f"exposed {name}"
        axis.bar(range(len(rows)), heights, bottom=bottoms, color=COLOURS[name], label=shown)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    axis.set_xticks(range(len(rows)))
    axis.set_xticklabels(names, rotation=60, ha="right", fontsize="x-small")
    axis.set_ylabel("seconds per step")
    axis.set_title("where the step goes")
    outside_legend(axis)
    lines = [" ".join(f"{k.split('.')[-1]}={r.get(k, '')}" for k in labels) + f": {r.get('status', '?')}: {why(r)}"
             for r in left_out]
    list_left_out(fig, lines)
    save(fig, args.output, footer=bool(lines))


def load_trace(path):
    """The trace's events, each an object; a complete ('X') event's ts and dur numbers."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError, EOFError) as e:  # EOFError: a truncated gzip
        fail(f"{path}: {e}")
    except RecursionError:
        fail(f"{path}: nested too deeply: expected a trace (an object with \"traceEvents\", or a list of events)")
    if isinstance(data, dict):
        if not isinstance(data.get("traceEvents"), list):
            fail(f"{path}: no \"traceEvents\" list: expected a trace (stepsim simulate --trace, or a PyTorch "
                 "profiler trace)")
        data = data["traceEvents"]
    if not isinstance(data, list):
        fail(f"{path}: expected a trace (an object with \"traceEvents\", or a list of events), got "
             f"{type(data).__name__}")
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            fail(f"{path}: traceEvents[{i}]: expected an event (an object), got {json.dumps(e)[:40]}")
        if e.get("ph") == "X" and "dur" in e and e.get("cat") != "step":
            for key in ("ts", "dur"):
                value = e.get(key)
                if isinstance(value, bool) or not isinstance(value, (int, float, str)) or number(value) is None or \
                        not math.isfinite(number(value)):
                    fail(f"{path}: traceEvents[{i}]: {key}: expected a number of microseconds, got "
                         f"{json.dumps(value)}")
    return data


def category(event):
    """compute, bubble, memory or a communication kind (stepsim's args.kind; nccl kernels of
    other traces count as dp unless their name says otherwise)."""
    cat = event.get("cat") if isinstance(event.get("cat"), str) else ""
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    kind = args.get("kind")
    if kind in KINDS:
        return kind
    name = event.get("name") if isinstance(event.get("name"), str) else ""
    name = name.lower()
    if "nccl" in name:
        return next((k for k in KINDS if f" {k} " in f" {name} "), "dp")
    if cat in ("bubble", "optimizer"):
        return cat
    if "memcpy" in cat or "memset" in cat:
        return "memory"
    return "compute"


def timeline(args):
    trace = load_trace(args.trace)
    names = {(e.get("pid", 0), e.get("tid", 0)): str(e["args"]["name"]) for e in trace
             if e.get("ph") == "M" and e.get("name") == "thread_name" and isinstance(e.get("args"), dict) and
             "name" in e["args"]}
    # The whole-step markers span everything and would hide nothing but add a lane.
    events = [e for e in trace if e.get("ph") == "X" and "dur" in e and e.get("cat") != "step"]
    if not events:
        fail(f"{args.trace}: no complete ('X') events")
    # A pid or tid is a number or a name; anything else (a list, an object) is shown as its text.
    for e in events:
        for key in ("pid", "tid"):
            if not isinstance(e.get(key, 0), (int, float, str)):
                e[key] = json.dumps(e[key])
    lanes = sorted({(e.get("pid", 0), e.get("tid", 0)) for e in events}, key=lambda k: (str(k[0]), str(k[1])))
    keep = set(sorted({p for p, _ in lanes}, key=str)[: args.ranks])
    lanes = [lane for lane in lanes if lane[0] in keep]
    index = {lane: i for i, lane in enumerate(lanes)}
    t0 = min(float(e["ts"]) for e in events)
    fig, (axis,) = figure(args)
    by_colour = {}
    for e in events:
        lane = (e.get("pid", 0), e.get("tid", 0))
        if lane in index:
            by_colour.setdefault(category(e), []).append((index[lane], (float(e["ts"]) - t0) / 1e3, float(e["dur"]) / 1e3))
    for name, bars in sorted(by_colour.items()):
        colour = COLOURS.get(name, "#333333")
        per_lane = {}
        for lane, start, length in bars:
            per_lane.setdefault(lane, []).append((start, max(length, 1e-3)))
        for lane, ranges in per_lane.items():  # one call per lane: thousands of kernels stay fast
            axis.broken_barh(ranges, (lane - 0.4, 0.8), color=colour)
        axis.plot([], [], color=colour, linewidth=8, label=name)
    axis.set_yticks(range(len(lanes)))
    axis.set_yticklabels([f"{p}/{names.get((p, t), t)}" for p, t in lanes], fontsize="x-small")
    axis.invert_yaxis()
    axis.set_xlabel("time (ms)")
    axis.set_ylabel("rank (pid) / stream")
    axis.set_title(f"timeline of {args.trace.split('/')[-1]}")
    outside_legend(axis)
    save(fig, args.output)


def pareto(args):
    rows = read_all(args.plan)
    if rows and "train_days" not in rows[0]:
        fail(f"{args.plan}: not a stepsim plan CSV (no train_days column)")
    drawn = [r for r in rows if r.get("status") == "ok" and number(r.get("train_days") or "") and
             number(r.get("cost") or "")]
    lines = [f"{r.get('cluster')} x {r.get('gpus')}: " + (r.get("status") if r.get("status") != "ok" else
             "no cost (no price, --cluster NAME@PRICE) or no token budget (--tokens)") for r in rows if r not in drawn]
    if not drawn:
        fail(f"{args.plan}: no row with a time to train and a cost (plan --tokens N --cluster NAME@PRICE)")
    check_numbers(args.plan, drawn, ["train_days_low", "train_days_high", "cost_low", "cost_high"],
                  required=("train_days_low", "train_days_high", "cost_low", "cost_high"))
    fig, (axis,) = figure(args)
    for r in drawn:
        days, cost = float(r["train_days"]), float(r["cost"])
        xerr = [[days - float(r["train_days_low"])], [float(r["train_days_high"]) - days]]
        yerr = [[cost - float(r["cost_low"])], [float(r["cost_high"]) - cost]]
        label = f"{r['cluster']} x {r['gpus']} ({r.get('precision', '')})"
        axis.errorbar([days], [cost], xerr=xerr, yerr=yerr, marker="o" if r.get("pareto") == "true" else "s",
                      capsize=4, label=label + (" *" if r.get("pareto") == "true" else ""))
        print(f"plotted: {label}: {days:.1f} days, cost {cost:.0f}")
    front = sorted((float(r["train_days"]), float(r["cost"])) for r in drawn if r.get("pareto") == "true")
    if len(front) > 1:
        axis.plot([d for d, _ in front], [c for _, c in front], color="#333333", linewidth=1, linestyle="--",
                  label="Pareto front")
    axis.set_xlabel("time to train (days)")
    axis.set_ylabel("cost (price per GPU-hour x GPU-hours)")
    axis.set_title("cost against time to train (* on the Pareto front; bars: validation error of each GPU)")
    axis.grid(True, alpha=0.3)
    outside_legend(axis)
    list_left_out(fig, lines)
    save(fig, args.output, footer=bool(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=700)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("curves", help="step time and exposed communication against a varied key")
    p.add_argument("sweep")
    p.add_argument("-x", required=True)
    p.add_argument("--group")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("breakdown", help="stacked breakdown bars per configuration")
    p.add_argument("sweep")
    p.add_argument("--label", action="append")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("pareto", help="stepsim plan's rows: cost against time to train")
    p.add_argument("plan")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("timeline", help="a trace's kernels as lanes")
    p.add_argument("trace")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    if not (100 <= args.width <= 10000 and 100 <= args.height <= 10000):
        fail("--width and --height: expected 100 to 10000 pixels")
    source = {"curves": "sweep", "breakdown": "sweep", "timeline": "trace", "pareto": "plan"}[args.command]
    check_output(args.output, getattr(args, source))
    try:
        {"curves": curves, "breakdown": breakdown, "timeline": timeline, "pareto": pareto}[args.command](args)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, RecursionError) as e:
        # Input the checks above did not foresee: named as theirs are, never a traceback.
        fail(f"{getattr(args, source)}: cannot draw it: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
