#!/usr/bin/env python3
"""Writes the seed corpus and dictionaries of the fuzz targets (tests/fuzz) under OUT_DIR,
derived from configs/, tests/data/ and the golden reports, so that no copy is checked in.

    tools/fuzz_corpus.py OUT_DIR
"""
import gzip
import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def dictionary(tokens):
    """libFuzzer's dictionary format: one quoted token a line, other bytes as \\xNN."""
    def quote(token):
        raw = token.encode("latin-1") if max(map(ord, token)) < 128 or token.startswith("\x1f") else token.encode()
        return "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\x{b:02x}" for b in raw)
    return "".join(f'"{quote(t)}"\n' for t in sorted(tokens) if t and len(t) < 64)


def leaves(value, prefix=""):
    """(dotted key, JSON text) of every leaf of a resolved scenario."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from leaves(child, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, json.dumps(value)


def scenario_seeds(out):
    """Whole scenario files for scenario_text; --set lines for scenario_set and simulate_set."""
    for f in sorted((ROOT / "configs").glob("*/*.json")):
        shutil.copy(f, out / "scenario_text" / f"{f.parent.name}-{f.name}")
    tokens = set()
    for f in sorted((ROOT / "tests/golden").glob("*.json")):
        config = json.loads(f.read_text())["config"]
        lines = [f"{k}={v}" for k, v in leaves(config)]
        # The largest examples take seconds under the sanitizers: -timeout would flag them.
        slow = f.stem in ("gpt-1t-selene", "gpt-530b-selene")
        for target in ("scenario_set",) if slow else ("scenario_set", "simulate_set"):
            write(out / target / f"{f.stem}.txt", "\n".join(lines) + "\n")
        if f.stem == "default":
            for i, line in enumerate(lines):
                write(out / "scenario_set" / f"default-{i:03}.txt", line + "\n")
                write(out / "simulate_set" / f"default-{i:03}.txt", line + "\n")
        for k, v in leaves(config):
            tokens.update([k, v, k.split(".")[-1]])
    for f in sorted((ROOT / "configs").glob("*/*.json")):
        tokens.update([f.stem, f"{f.parent.name[:-1]}={f.stem}"])
    tokens.update(["=", ".", "1e999", "-1", "0", "9223372036854775807", "4611686018427387904", "nan", "null",
                   '"', "{", "}", "[", "]", ",", ":", "//", "/*", "*/", " b/s", " GB/s", " Gb/s", " us", " ms",
                   " s", " GiB", " MiB", " TFLOPS", " PFLOPS", " FLOPS", '"preset"'])
    for target in ("scenario_text", "scenario_set", "simulate_set"):
        write(out / f"{target}.dict", dictionary(tokens))


def trace_subset(trace, steps):
    """The first `steps` ProfilerSteps of a trace with a few of their GPU events and the
    launches of those: small enough to mutate quickly, shaped like the real thing."""
    events = trace["traceEvents"]
    annotations = [e for e in events if e.get("name", "").startswith("ProfilerStep#")][:steps]
    if not annotations:
        return None
    begin = min(e["ts"] for e in annotations)
    end = max(e["ts"] + e.get("dur", 0) for e in annotations)
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and begin <= e["ts"] <= end + 1e5]
    nccl = [e for e in gpu if "nccl" in e.get("name", "")][:12]
    compute = [e for e in gpu if "nccl" not in e.get("name", "")]
    # The compute kernels that overlap the kept collectives, so that some time is hidden.
    overlapping = [c for c in compute if any(c["ts"] < n["ts"] + n.get("dur", 0) and n["ts"] < c["ts"] + c.get("dur", 0)
                                             for n in nccl)][:40]
    kept = nccl + (overlapping or compute[:30])
    kept = list({id(e): e for e in kept}.values())
    correlations = {e.get("args", {}).get("correlation") for e in kept}
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in correlations]
    subset = {k: v for k, v in trace.items() if k not in ("traceEvents", "deviceProperties")}
    subset["traceEvents"] = sorted(annotations + kept + launches, key=lambda e: e["ts"])
    return json.dumps(subset, separators=(",", ":"))


def kineto_seeds(out):
    for f in sorted((ROOT / "tests/data/traces").glob("*.json.gz")):
        with gzip.open(f, "rt") as stream:
            trace = json.load(stream)
        for steps in (1, 2):
            text = trace_subset(trace, steps)
            if text:
                write(out / "kineto" / f"{f.name[:-8]}-{steps}step.json", text)
                if steps == 1:
                    write(out / "kineto" / f"{f.name[:-8]}-1step.json.gz", gzip.compress(text.encode(), mtime=0))
    tokens = ['"traceEvents"', '"ph"', '"X"', '"cat"', '"kernel"', '"gpu_memcpy"', '"gpu_memset"', '"cuda_runtime"',
              '"user_annotation"', '"ProfilerStep#"', '"name"', '"pid"', '"tid"', '"ts"', '"dur"', '"args"',
              '"stream"', '"correlation"', '"device"', '"bytes"', '"distributedInfo"', '"rank"', '"world_size"',
              '"Collective name"', '"Process Group Name"', '"Process Group Ranks"', '"In msg nelems"',
              '"Out msg nelems"', '"Group size"', '"dtype"', '"ncclKernel_AllReduce_RING_LL_Sum_float"',
              '"ncclDevKernel_AllGather_RING_LL"', '"allreduce"', '"Memcpy DtoH"', '"Memset"', '"step"',
              '"compute"', '"comm"', '"bubble"', '"memory"', "1e308", "-1", "9.3e12", "\x1f\x8b\x08"]
    write(out / "kineto.dict", dictionary(tokens))


def nccl_tests_seeds(out):
    for f in sorted((ROOT / "tests/data/nccl-tests").glob("*.txt")):
        shutil.copy(f, out / "nccl_tests" / f.name)
    tokens = ["#", "N/A", "float", "half", "bfloat16", "sum", "none", "-1", "# Avg bus bandwidth", "#  Rank",
              "out-of-place", "in-place", "1e999", "nan", "inf", "9223372036854775807", "\n"]
    write(out / "nccl_tests.dict", dictionary(tokens))


def regression_seeds(out, target, tokens):
    """The saved inputs of a target (tests/fuzz/regressions/TARGET) as its seeds."""
    for f in sorted((ROOT / "tests/fuzz/regressions" / target).glob("*")):
        shutil.copy(f, out / target / f.name)
    write(out / f"{target}.dict", dictionary(tokens))


def main():
    out = pathlib.Path(sys.argv[1])
    for target in ("scenario_text", "scenario_set", "simulate_set", "kineto", "nccl_tests", "sweep_spec",
                   "calibration_file"):
        shutil.rmtree(out / target, ignore_errors=True)
        (out / target).mkdir(parents=True)
    scenario_seeds(out)
    kineto_seeds(out)
    nccl_tests_seeds(out)
    regression_seeds(out, "sweep_spec", ["vary ", "set ", "gpus ", "keep-oom", "shard ", "slurm ", "name ", "{shard}",
                                         "parallel.tp=", "parallel.pp=", "parallel.cp=", "training.micro_batch=",
                                         "data_parallel.bucket_cap_mb=", "model=", ":", "x2", "+1", ",", "/", "-1",
                                         "1e999", "9223372036854775807", "4.0", "\n"])
    regression_seeds(out, "calibration_file", ['"stepsim_calibration"', '"provenance"', '"collectives"', '"compute"',
                                               '"gpu"', '"gpu_count"', '"op"', '"ranks"', '"nodes"', '"ranks_per_node"',
                                               '"dtype"', '"bytes"', '"time_us"', '"algbw_gbps"', '"busbw_gbps"',
                                               '"points"', '"fit"', '"alpha_us"', '"alpha_fitted"', '"max_error"',
                                               '"allreduce"', '"allgather"', "1e999", "-1", "0", "null", "nan", "{",
                                               "}", "[", "]", ","])


if __name__ == "__main__":
    main()
