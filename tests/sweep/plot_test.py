#!/usr/bin/env python3
"""tools/plot.py renders valid PNGs of the asked size from a small sweep and a simulated trace.

usage: plot_test.py STEPSIM_BINARY SOURCE_DIR
"""
import os
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


def main():
    stepsim, source = sys.argv[1], sys.argv[2]
    plot = [sys.executable, os.path.join(source, "tools", "plot.py")]
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
        bad = subprocess.run(plot + ["curves", csv, "-x", "no.such.key", "-o", os.path.join(d, "x.png")],
                             capture_output=True, text=True)
        if bad.returncode != 2 or "no column 'no.such.key'" not in bad.stderr:
            raise AssertionError(f"an unknown column: exit {bad.returncode}, {bad.stderr!r}")


if __name__ == "__main__":
    main()
