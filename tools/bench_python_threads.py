#!/usr/bin/env python3
"""Whether the Python module simulates side by side: the same simulations run one after the
other on one thread, then on THREADS threads at once (the module releases the GIL while it
simulates). Prints both wall times, the speed-up (at most the cores there are) and the cores
the process kept busy (its CPU time over the wall time), and the same simulations in as many
processes at once, which no GIL can hold back: on a machine whose other work takes cores, the
threads' speed-up is to be read against theirs.

    PYTHONPATH=build/release/python tools/bench_python_threads.py [SCENARIO] [--threads N] [--repeat R]
"""
import argparse
import multiprocessing
import threading
import time

import stepsim


def timed(body):
    """(wall seconds, this process's CPU seconds over them)."""
    start, cpu = time.perf_counter(), time.process_time()
    body()
    wall = time.perf_counter() - start
    return wall, (time.process_time() - cpu) / wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default="ddp-1.3b-64xa100", help="a file or an example preset")
    parser.add_argument("--threads", type=int, default=4, help="simulations at once (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the fastest of each way counts (default 3)")
    args = parser.parse_args()
    simulate = lambda: stepsim.simulate(args.scenario)  # noqa: E731
    simulate()  # presets parsed, pages touched: the rounds that follow compare like with like

    def one_thread():
        for _ in range(args.threads):
            simulate()

    def many_threads():
        workers = [threading.Thread(target=simulate) for _ in range(args.threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    def many_processes():
        workers = [multiprocessing.get_context("fork").Process(target=simulate) for _ in range(args.threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    serial, parallel, processes = [], [], []
    for _ in range(args.repeat):
        serial.append(timed(one_thread))
        parallel.append(timed(many_threads))
        processes.append(timed(many_processes))
    print(f"{args.threads} simulations of {args.scenario}, fastest of {args.repeat} rounds (cores busy):")
    for name, rounds in [("one thread", serial), (f"{args.threads} threads at once", parallel)]:
        listed = ", ".join(f"{wall:.3f} ({busy:.2f})" for wall, busy in rounds)
        print(f"  {name:<18} {min(rounds)[0]:.3f} s  (rounds: {listed})")
    print(f"  speed-up           {min(serial)[0] / min(parallel)[0]:.2f}x")
    listed = ", ".join(f"{wall:.3f}" for wall, _ in processes)
    print(f"  {args.threads} processes at once {min(processes)[0]:.3f} s  (rounds: {listed}): "
          f"speed-up {min(serial)[0] / min(processes)[0]:.2f}x")


if __name__ == "__main__":
    main()
