#!/usr/bin/env python3
"""tools/plot.py renders valid PNGs of the asked size from a small sweep, a simulated trace and a plan;
the rows it cannot draw are listed, and without matplotlib it says which Python it needs.

usage: plot_test.py STEPSIM_BINARY SOURCE_DIR [malformed]
  malformed: only the malformed inputs, which plot.py refuses with exit 2 naming the file
"""
import gzip
import json
import os
import stat
import struct
import subprocess
import sys
import tempfile


def png_size(path):
    """Width and height from the PNG signature and IHDR chunk (no imaging library)."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def readme_bucket_example(stepsim, plot, d):
    """The README's bucket-size example: every TP curve it computes is drawn, or listed as not plotted
    (TP 2 of Llama 3 8B does not fit an 80 GB GPU at DP 32), never dropped silently."""
    csv = os.path.join(d, "buckets.csv")
    subprocess.run([stepsim, "sweep", "--vary", "data_parallel.bucket_cap_mb=1:256:x2", "--vary", "parallel.tp=2,4,8",
                    "--set", "model=llama3-8b", "--gpus", "64", "-o", csv], check=True, capture_output=True)
    out = subprocess.run(plot + ["curves", csv, "-x", "data_parallel.bucket_cap_mb", "--group", "parallel.tp", "-o",
                                 os.path.join(d, "buckets.png")], check=True, capture_output=True, text=True).stdout
    for tp in ("2", "4", "8"):
        plotted = f"plotted: parallel.tp={tp}: " in out
        listed = out.count(f"not plotted: parallel.tp={tp} ")
        if not plotted and listed != 9:
            raise AssertionError(f"TP {tp}: neither plotted nor its 9 points listed:\n{out}")
    if "not plotted: parallel.tp=2 data_parallel.bucket_cap_mb=1: oom: " not in out:
        raise AssertionError(f"TP 2's out-of-memory points are not listed as such:\n{out}")
    print("README bucket example: every TP curve plotted or listed")


def plan_pareto(stepsim, plot, d):
    csv = os.path.join(d, "plan.csv")
    subprocess.run([stepsim, "plan", "--model", "gpt-1.3b", "--tokens", "10B", "--gpus", "8", "--cluster",
                    "dgx-h100-ndr@2.5,dgx-a100-80g-hdr@1.8,dgx-b200", "-o", csv], check=True, capture_output=True)
    out = os.path.join(d, "pareto.png")
    listing = subprocess.run(plot + ["pareto", csv, "-o", out], check=True, capture_output=True, text=True).stdout
    if png_size(out) != (1200, 700):
        raise AssertionError(f"pareto: {png_size(out)} pixels")
    # dgx-b200 has no price: it has no cost to draw, and says so.
    if "not plotted: dgx-b200 x 8: no cost" not in listing or listing.count("plotted: dgx-") != 3:
        raise AssertionError(f"pareto listing:\n{listing}")
    print("pareto: 1200x700 PNG, the row without a price listed")
    # The same plan as JSON (-o plan.json): the same rows drawn and listed.
    rows_json = os.path.join(d, "plan.json")
    subprocess.run([stepsim, "plan", "--model", "gpt-1.3b", "--tokens", "10B", "--gpus", "8", "--cluster",
                    "dgx-h100-ndr@2.5,dgx-a100-80g-hdr@1.8,dgx-b200", "-o", rows_json], check=True, capture_output=True)
    from_json = subprocess.run(plot + ["pareto", rows_json, "-o", os.path.join(d, "pareto-json.png")], check=True,
                               capture_output=True, text=True).stdout
    if from_json != listing:
        raise AssertionError(f"pareto from JSON:\n{from_json}\nfrom CSV:\n{listing}")
    print("pareto: plan's JSON rows drawn as its CSV rows")


def json_lines(stepsim, plot, csv, d):
    """A sweep's JSON lines (-o FILE.jsonl) are drawn as its CSV rows: the same curves, the same
    points listed; a --label that is no column is refused as -x is."""
    jsonl = os.path.join(d, "sweep.jsonl")
    subprocess.run([stepsim, "sweep", "--vary", "data_parallel.bucket_cap_mb=1:64:x4", "--vary", "parallel.tp=4,8",
                    "--set", "model=llama3-8b", "--gpus", "64", "-o", jsonl], check=True, capture_output=True)
    for command in (["curves", "-x", "data_parallel.bucket_cap_mb", "--group", "parallel.tp"], ["breakdown"]):
        said = []
        for rows in (csv, jsonl):
            run = subprocess.run(plot + [command[0], rows] + command[1:] + ["-o", os.path.join(d, "rows.png")],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                raise AssertionError(f"{command[0]} {rows}: exit {run.returncode}, {run.stderr!r}")
            said.append(run.stdout.replace(rows, "ROWS"))
        if said[0] != said[1]:
            raise AssertionError(f"{command[0]}: from JSON lines:\n{said[1]}\nfrom CSV:\n{said[0]}")
    for rows in (csv, jsonl):
        bad = subprocess.run(plot + ["breakdown", rows, "--label", "bogus", "-o", os.path.join(d, "b2.png")],
                             capture_output=True, text=True)
        if bad.returncode != 2 or "no column 'bogus'" not in bad.stderr:
            raise AssertionError(f"breakdown --label bogus: exit {bad.returncode}, {bad.stderr!r}")
    if os.path.exists(os.path.join(d, "b2.png")):
        raise AssertionError("breakdown --label bogus drew a picture")
    print("JSON lines: drawn as the CSV rows; --label bogus refused")


def without_matplotlib(source, csv, d):
    """Python without its site packages has no matplotlib: the message says which Python it needs."""
    run = subprocess.run([sys.executable, "-S", os.path.join(source, "tools", "plot.py"), "curves", csv, "-x",
                          "parallel.tp", "-o", os.path.join(d, "none.png")], capture_output=True, text=True)
    if run.returncode != 2 or "needs matplotlib" not in run.stderr or "python3-matplotlib" not in run.stderr:
        raise AssertionError(f"without matplotlib: exit {run.returncode}, {run.stderr!r}")


def outputs(plot, csv, d):
    """The picture's format follows -o's name; a name of no picture format, a missing folder, the
    input itself and a full device are refused with exit 2 and the input kept; /dev/null is
    written through, not replaced."""
    base = plot + ["curves", csv, "-x", "data_parallel.bucket_cap_mb"]
    svg = os.path.join(d, "curves.svg")
    subprocess.run(base + ["-o", svg], check=True, capture_output=True)
    with open(svg, "rb") as f:
        if b"<svg" not in f.read(1000):
            raise AssertionError(f"{svg} is not an SVG")
    with open(csv, "rb") as f:
        rows = f.read()
    odd = os.path.join(d, "rows.png")  # sweep rows under a picture's name
    with open(odd, "wb") as f:
        f.write(rows)
    for source, name, message in [(csv, "curves.txt", "expected a name ending in .png, .svg or .pdf"),
                                  (csv, os.path.join(d, "no", "x.png"), "does not exist"),
                                  (odd, odd, "is " + odd + ", the input"),
                                  (csv, "/dev/full", "cannot write the picture")]:
        run = subprocess.run(plot + ["curves", source, "-x", "data_parallel.bucket_cap_mb", "-o", name],
                             capture_output=True, text=True)
        if run.returncode != 2 or message not in run.stderr:
            raise AssertionError(f"-o {name}: exit {run.returncode}, {run.stderr!r}")
    subprocess.run(base + ["-o", "/dev/null"], check=True, capture_output=True)
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        raise AssertionError("/dev/null is no longer a device")
    for source in (csv, odd):
        with open(source, "rb") as f:
            if f.read() != rows:
                raise AssertionError(f"the input {source} was changed")
    if [n for n in os.listdir(d) if n.startswith(".plot-")]:
        raise AssertionError(f"temporary files left in {d}: {os.listdir(d)}")
    print("outputs: .svg written as SVG, /dev/null written through; .txt, a missing folder, the input and /dev/full "
          "refused")


def malformed_inputs(plot, csv, trace, d):
    """Malformed rows and traces are refused as plot.py's own errors are: exit 2 and
    "plot.py: error: FILE: ...", never a traceback; no picture is written."""
    with open(csv) as f:
        header, first = f.readline(), f.readline()
    columns = header.rstrip("\n").split(",")
    cells = first.rstrip("\n").split(",")
    cells[columns.index("step_time_s")] = "abc"
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    no_ts = [dict(e) for e in events]
    del next(e for e in no_ts if e.get("ph") == "X" and e.get("cat") != "step")["ts"]
    null_name = [dict(e) for e in events]
    next(e for e in null_name if e.get("ph") == "X" and e.get("cat") != "step")["name"] = None
    whole = gzip.compress(json.dumps({"traceEvents": events}).encode())
    files = {
        "nodict.json": ('{"a": 1}', "no \"traceEvents\" list"),
        "list.json": ("[1, 2]", "traceEvents[0]: expected an event (an object), got 1"),
        "nots.json": (json.dumps({"traceEvents": no_ts}), ": ts: expected a number of microseconds, got null"),
        "trunc.json.gz": (whole[: len(whole) // 2], "Compressed file ended before the end-of-stream marker"),
        "deep.json": ("[" * 100000 + "]" * 100000, "nested too deeply"),
    }
    rows = {
        "bad.csv": (header + ",".join(cells) + "\n", "row 1 (0): step_time_s: expected a number, got 'abc'"),
        "deep.jsonl": ("[" * 100000 + "\n", "nested too deeply"),
    }
    plan = ("cluster,gpus,status,train_days,train_days_low,train_days_high,cost,cost_low,cost_high,pareto\n"
            "dgx-h100-ndr,8,ok,0.137,,0.15,65.9,59.6,72.2,true\n")
    cases = [(["timeline", name], name, text, said) for name, (text, said) in files.items()]
    cases += [(["curves", name, "-x", "data_parallel.bucket_cap_mb"], name, text, said)
              for name, (text, said) in rows.items()]
    cases += [(["breakdown", "bad.csv"], "bad.csv", rows["bad.csv"][0], rows["bad.csv"][1])]
    cases += [(["pareto", "plan2.csv"], "plan2.csv", plan,
               "row 1 (dgx-h100-ndr x 8): train_days_low: expected a number, got ''")]
    for args, name, text, said in cases:
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())
        out = os.path.join(d, "malformed.png")
        run = subprocess.run(plot + [args[0], path] + args[2:] + ["-o", out], capture_output=True, text=True,
                             cwd=d)
        if run.returncode != 2 or not run.stderr.startswith(f"plot.py: error: {path}: ") or said not in run.stderr \
                or "Traceback" in run.stderr or os.path.exists(out):
            raise AssertionError(f"{' '.join(args)}: exit {run.returncode}, {run.stderr!r} (expected 2 and {said!r})")
    # A null event name is drawn as a kernel of no name: not an error.
    path = os.path.join(d, "nullname.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": null_name}, f)
    subprocess.run(plot + ["timeline", path, "-o", os.path.join(d, "nullname.png")], check=True, capture_output=True)
    print(f"malformed inputs: {len(cases)} refused with exit 2 naming the file; a null event name drawn")


def main():
    stepsim, source = sys.argv[1], sys.argv[2]
    plot = [sys.executable, os.path.join(source, "tools", "plot.py")]
    if sys.argv[3:] == ["malformed"]:
        with tempfile.TemporaryDirectory(prefix="stepsim-plot-") as d:
            csv, trace = os.path.join(d, "sweep.csv"), os.path.join(d, "step.json")
            subprocess.run([stepsim, "sweep", "--vary", "data_parallel.bucket_cap_mb=1,4", "-o", csv], check=True)
            subprocess.run([stepsim, "simulate", "--trace", trace], check=True, stdout=subprocess.DEVNULL)
            malformed_inputs(plot, csv, trace, d)
        return
    with tempfile.TemporaryDirectory(prefix="stepsim-plot-") as d:
        csv = os.path.join(d, "sweep.csv")
        trace = os.path.join(d, "step.json")
        subprocess.run([stepsim, "sweep", "--vary", "data_parallel.bucket_cap_mb=1:64:x4", "--vary",
                        "parallel.tp=4,8", "--set", "model=llama3-8b", "--gpus", "64", "-o", csv], check=True)
        subprocess.run([stepsim, "simulate", "--set", "parallel.pp=2", "--set", "parallel.dp=4", "--trace", trace],
                       check=True, stdout=subprocess.DEVNULL)
        cases = [
            (["curves", csv, "-x", "data_parallel.bucket_cap_mb", "--group", "parallel.tp"], (1200, 700)),
            (["--width", "800", "--height", "500", "breakdown", csv], (800, 500)),
            (["timeline", trace], (1200, 700)),
        ]
        for args, size in cases:
            out = os.path.join(d, args[0 if args[0] != "--width" else 4] + ".png")
            subprocess.run(plot + args + ["-o", out], check=True)
            got = png_size(out)
            if got != size:
                raise AssertionError(f"{' '.join(args)}: {got[0]}x{got[1]} pixels, expected {size[0]}x{size[1]}")
            print(f"{os.path.basename(out)}: {got[0]}x{got[1]} PNG, {os.path.getsize(out)} bytes")
        readme_bucket_example(stepsim, plot, d)
        plan_pareto(stepsim, plot, d)
        json_lines(stepsim, plot, csv, d)
        without_matplotlib(source, csv, d)
        outputs(plot, csv, d)
        bad = subprocess.run(plot + ["curves", csv, "-x", "no.such.key", "-o", os.path.join(d, "x.png")],
                             capture_output=True, text=True)
        if bad.returncode != 2 or "no column 'no.such.key'" not in bad.stderr:
            raise AssertionError(f"an unknown column: exit {bad.returncode}, {bad.stderr!r}")


if __name__ == "__main__":
    main()
