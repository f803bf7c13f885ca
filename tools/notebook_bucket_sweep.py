#!/usr/bin/env python3
"""A notebook in cells (# %%, as Jupyter and VS Code open it): how DDP's bucket size moves the
step time and the exposed communication of Llama-3-8B on 64 H100, at TP 2, 4 and 8.

    PYTHONPATH=build/release/python tools/notebook_bucket_sweep.py [PLOT.png]

docs/python.md walks through it; ctest runs it (plot to the build folder).
"""
# %% A sweep into a DataFrame: 9 bucket sizes x 3 TP degrees, dp derived from 64 GPUs.
import sys

import matplotlib

matplotlib.use("Agg")  # a file, not a window: runs headless as a test
import matplotlib.pyplot as plt

import stepsim

frame = stepsim.sweep(
    vary={"parallel.tp": [2, 4, 8], "data_parallel.bucket_cap_mb": "1:256:x2"},
    sets={"model": "llama3-8b"},
    gpus=64,
)
print(frame.status.value_counts())  # TP 2 does not fit in 80 GB (113 GiB at its peak): "oom" rows
ok = frame[frame.status == "ok"]
print(ok[["parallel.tp", "parallel.dp", "data_parallel.bucket_cap_mb", "step_time_s", "exposed_dp_s", "mfu"]])

# %% The best bucket size per TP degree.
best = ok.loc[ok.groupby("parallel.tp").step_time_s.idxmin()]
print(best[["parallel.tp", "data_parallel.bucket_cap_mb", "step_time_s"]].to_string(index=False))

# %% Step time and exposed DP communication against the bucket size, one line per TP degree.
figure, (step, exposed) = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
for tp, group in ok.groupby("parallel.tp"):
    step.plot(group["data_parallel.bucket_cap_mb"], group.step_time_s, marker="o", label=f"TP {tp}")
    exposed.plot(group["data_parallel.bucket_cap_mb"], group.exposed_dp_s * 1e3, marker="o", label=f"TP {tp}")
step.set(xscale="log", xlabel="bucket_cap_mb (MiB)", ylabel="step time (s)")
exposed.set(xscale="log", xlabel="bucket_cap_mb (MiB)", ylabel="exposed DP communication (ms)")
step.legend()
figure.tight_layout()
output = sys.argv[1] if len(sys.argv) > 1 else "bucket_sweep.png"
figure.savefig(output)
print(f"wrote {output}")
