#!/usr/bin/env python3
"""Independent reference numbers for stepsim's step-by-step trace analysis, from the raw Kineto events.

Plain python3 (gzip, json, decimal), sharing no code with stepsim. It re-derives stepsim's
own step-window rules (not HolisticTraceAnalysis' figures: those are tested against what HTA
printed, in real_traces_test.cpp). Definitions:
- GPU activities: complete events (ph X, with dur) of category kernel, gpu_memcpy,
  gpu_memset. Communication = name starts with "nccl" or contains "ncclKernel"; memory =
  Memcpy/Memset; computation = every other kernel.
- Steps: a GPU activity belongs to ProfilerStep#N when its launch (the cuda_runtime event
  with the same correlation id) lies in that CPU annotation's [ts, ts + dur); without a
  launch, when its own start does. A step's window starts at the first start of its
  activities and ends where the next step's window starts; the last step's window ends at
  the last end of the activities of all the steps. A step's GPU-side annotation
  (gpu_user_annotation ProfilerStep#N) counts as one of its activities for these bounds.
- Within a window: merge each class's intervals (clipped to the window); hidden fraction =
  |comm ∩ comp| / |comm|; exposed = |comm| - |comm ∩ comp|;
  memory-only = |memory - comm - comp|; idle = window - |comm ∪ comp ∪ memory|.
  Exposed time per collective op is split equally among the ops running at that instant.
- "whole_trace_hidden_fraction": the same ratio over every GPU activity of the file, exact
  timestamps, no step left out.
Times are exact integers of picoseconds (timestamps parsed as decimals); outputs in seconds.

Usage: step_windows.py TRACE.json[.gz] [...]            prints the numbers as JSON
       step_windows.py --check PINNED.json TRACE_DIR     exits 1 unless they equal PINNED.json
       step_windows.py --pin TRACE.json[.gz] [...]       prints PINNED.json (picoseconds)
"""
import gzip
import json
import sys
from decimal import Decimal

GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memory", "Memcpy": "memory",
            "gpu_memset": "memory", "Memset": "memory"}
LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8,
               "float64": 8, "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2,
               "char": 1, "byte": 1, "int8": 1, "uint8": 1, "bool": 1}


def ps(value):
    return int(Decimal(value) * 1000000)


def load(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return json.loads(f.read(), parse_float=Decimal)


def classify(name, cat_class):
    if cat_class == "memory" or "Memcpy" in name or "Memset" in name:
        return "memory"
    if name.startswith("nccl") or "ncclKernel" in name:
        return "comm"
    return "comp"


def coll_op(args, name):
    squeeze = lambda s: "".join(c for c in s.lower() if c.isalnum())
    prefixes = [("allreduce", "allreduce"), ("allgather", "allgather"), ("reducescatter", "reducescatter"),
                ("broadcast", "broadcast"), ("bcast", "broadcast"), ("alltoall", "alltoall"),
                ("sendrecv", "sendrecv"), ("send", "sendrecv"), ("recv", "sendrecv"), ("reduce", "reduce")]
    candidates = []
    if args.get("Collective name"):
        candidates.append(squeeze(args["Collective name"]))
    for lead in ("ncclDevKernel_", "ncclKernel_"):
        if lead in name:
            word = name.split(lead, 1)[1]
            for stop in "_(":
                word = word.split(stop, 1)[0]
            candidates.append(squeeze(word))
            break
    for c in candidates:
        for prefix, op in prefixes:
            if c.startswith(prefix):
                return op
    return "other"


def merge(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(merged):
    return sum(e - s for s, e in merged)


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def clip(events, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in events if min(e, hi) > max(s, lo)]


def exposed_by_op(acts, lo, hi):
    points = sorted({lo, hi} | {t for a in acts for t in (a["start"], a["end"]) if lo < t < hi})
    totals = {}
    for s, e in zip(points, points[1:]):
        running = [a for a in acts if a["start"] <= s and a["end"] >= e]
        if any(a["class"] == "comp" for a in running):
            continue
        ops = sorted({a["op"] for a in running if a["class"] == "comm"})
        for op in ops:
            totals[op] = totals.get(op, 0) + (e - s) / len(ops)
    return {op: v * 1e-12 for op, v in sorted(totals.items())}


def window_metrics(acts, lo, hi):
    by = {c: merge(clip([(a["start"], a["end"]) for a in acts if a["class"] == c], lo, hi))
          for c in ("comm", "comp", "memory")}
    comm, comp = length(by["comm"]), length(by["comp"])
    overlap = length(intersect(by["comm"], by["comp"]))
    busy = merge(by["comm"] + by["comp"])
    any_activity = length(merge(busy + by["memory"]))
    return {
        "step_time_s": (hi - lo) * 1e-12,
        "compute_s": comp * 1e-12,
        "comm_s": comm * 1e-12,
        "overlap_s": overlap * 1e-12,
        "exposed_comm_s": (comm - overlap) * 1e-12,
        "memory_only_s": (any_activity - length(busy)) * 1e-12,
        "idle_s": (hi - lo - any_activity) * 1e-12,
        "hidden_fraction": overlap / comm if comm else 0.0,
        "exposed_by_op_s": exposed_by_op(acts, lo, hi),
    }


def collective_record(a):
    args = a["args"]
    nelems = max(int(args.get("In msg nelems", -1)), int(args.get("Out msg nelems", -1)))
    dtype = str(args.get("dtype", "")).split(":")[-1].lower()
    size = nelems * DTYPE_BYTES.get(dtype, 0) if nelems > 0 else 0
    n = int(args.get("Group size", 0))
    factor = {"allreduce": 2 * (n - 1) / n if n else 1, "allgather": (n - 1) / n if n else 1,
              "reducescatter": (n - 1) / n if n else 1, "alltoall": (n - 1) / n if n else 1}.get(a["op"], 1)
    seconds = (a["end"] - a["start"]) * 1e-12
    algbw = size / seconds if seconds > 0 else 0.0
    return {"op": a["op"], "elements": nelems, "bytes": size, "group_size": n, "duration_s": seconds,
            "algbw_GBps": algbw * 1e-9, "busbw_GBps": algbw * factor * 1e-9}


def analyse(path):
    doc = load(path)
    events = doc["traceEvents"]
    acts, steps, gpu_steps, launches = [], [], [], {}
    for ev in events:
        if ev.get("ph") != "X" or "ts" not in ev:
            continue
        cat, name, args = ev.get("cat"), ev.get("name", ""), ev.get("args", {})
        if cat in GPU_CATS and "dur" in ev:
            start = ps(ev["ts"])
            cls = classify(name, GPU_CATS[cat])
            acts.append({"start": start, "end": start + ps(ev["dur"]), "class": cls, "name": name, "args": args,
                         "corr": args.get("correlation"), "op": coll_op(args, name) if cls == "comm" else None})
        elif cat in LAUNCH_CATS and "correlation" in args:
            launches[args["correlation"]] = ps(ev["ts"])
        elif cat == "user_annotation" and name.startswith("ProfilerStep#") and "dur" in ev:
            steps.append((ps(ev["ts"]), ps(ev["ts"]) + ps(ev["dur"]), name))
        elif cat == "gpu_user_annotation" and name.startswith("ProfilerStep#") and "dur" in ev:
            gpu_steps.append((ps(ev["ts"]), ps(ev["ts"]) + ps(ev["dur"]), name))
    steps.sort()
    members = {name: [] for _, _, name in steps}
    for a in acts:
        t = launches.get(a["corr"], a["start"]) if a["corr"] is not None else a["start"]
        for s, e, name in steps:
            if s <= t < e:
                members[name].append(a)
                break
    spans = {}
    for s, e, name in gpu_steps:
        spans.setdefault(name, []).append((s, e))
    windows = [(min([a["start"] for a in members[name]] + [s for s, _ in spans.get(name, [])]),
                max([a["end"] for a in members[name]] + [e for _, e in spans.get(name, [])]), name)
               for _, _, name in steps if members[name]]
    per_step = []
    last_end = max((hi for _, hi, _ in windows), default=None)
    for i, (lo, hi, name) in enumerate(windows):
        hi = windows[i + 1][0] if i + 1 < len(windows) else last_end
        m = window_metrics(acts, lo, hi)
        m["name"] = name
        inside = sorted((a for a in acts if a["class"] == "comm" and lo <= a["start"] < hi), key=lambda a: a["start"])
        m["collectives"] = [collective_record(a) for a in inside]
        per_step.append(m)
    whole = window_metrics(acts, min(a["start"] for a in acts), max(a["end"] for a in acts))
    dist = doc.get("distributedInfo", {})
    return {"file": path.split("/")[-1], "rank": dist.get("rank"), "world_size": dist.get("world_size"),
            "gpu_activities": len(acts), "whole_trace_hidden_fraction": whole["hidden_fraction"],
            "steps": per_step}


PINNED_FIELDS = ["step_time_s", "compute_s", "comm_s", "overlap_s", "exposed_comm_s", "memory_only_s", "idle_s"]


def pinned(result):
    return {"file": result["file"], "whole_trace_hidden_fraction": round(result["whole_trace_hidden_fraction"], 12),
            "steps": [[s["name"]] + [round(s[f] * 1e12) for f in PINNED_FIELDS] for s in result["steps"]]}


def check(pinned_path, trace_dir):
    expected = json.load(open(pinned_path))
    ok = True
    for entry in expected:
        got = pinned(analyse(trace_dir + "/" + entry["file"]))
        if got != entry:
            print("mismatch for %s:\n expected %s\n got      %s" % (entry["file"], entry, got))
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"]:
        sys.exit(check(sys.argv[2], sys.argv[3]))
    if sys.argv[1:2] == ["--pin"]:
        print(json.dumps([pinned(analyse(p)) for p in sys.argv[2:]], indent=1))
    else:
        print(json.dumps([analyse(p) for p in sys.argv[1:]], indent=1))
