#!/usr/bin/env python3
"""Time per statement of `c = c + b` on 4 elements as a user pays it: a whole `dep run` process
against the same loop as a whole Python + NumPy process, side by side, interleaved.

Each figure is (process time with N iterations - process time with 0 iterations) / N, so start-up
(process, parsing, imports) cancels out. Wall-clock, the best and the median of R runs of each,
alternating dep and NumPy so that both see the same machine load (on a machine of many cores a
threaded run is now and then much faster than its neighbours, as its threads happen to land:
the best picks those runs, the median does not).

Usage (from the repository root):
    python3 -m venv bench/.venv && bench/.venv/bin/pip install numpy==1.23.5
    cargo build --release -p dep
    bench/.venv/bin/python bench/script_time.py [--n 1000000] [--runs 5] [--dep PATH]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEP = os.path.join(ROOT, "target", "release", "dep")

DEP_LOOP = "b = ones(4)\nc = ones(4)\nfor i in 0..{n} {{ c = c + b }}\nprint c[0]\n"
NUMPY_LOOP = (
    "import numpy as np\n"
    "b = np.ones(4, dtype=np.float32)\nc = np.ones(4, dtype=np.float32)\n"
    "for i in range({n}):\n    c = c + b\nprint(c[0])\n"
)


def wall(command):
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="iterations")
    parser.add_argument("--runs", type=int, default=5, help="runs of each command")
    parser.add_argument("--dep", default=DEP, help="the dep binary (default: the release build)")
    args = parser.parse_args()
    dep = args.dep
    if not os.access(dep, os.X_OK):
        sys.exit(f"script_time.py: build {dep} first: cargo build --release -p dep")
    with tempfile.TemporaryDirectory() as work:
        commands = {}
        for n in (args.n, 0):
            dep_script = os.path.join(work, f"loop{n}.dep")
            py_script = os.path.join(work, f"loop{n}.py")
            with open(dep_script, "w") as f:
                f.write(DEP_LOOP.format(n=n))
            with open(py_script, "w") as f:
                f.write(NUMPY_LOOP.format(n=n))
            for engine in ("naive", "threaded"):
                commands[(f"dep {engine}", n)] = [dep, "run", "--engine", engine, dep_script]
            commands[("numpy", n)] = [sys.executable, py_script]
        times = {key: [] for key in commands}
        for _ in range(args.runs):
            for key, command in commands.items():
                times[key].append(wall(command))
    names = ("dep naive", "dep threaded", "numpy")
    best, median = (
        {
            name: (pick(times[(name, args.n)]) - pick(times[(name, 0)])) / args.n * 1e6
            for name in names
        }
        for pick in (min, statistics.median)
    )
    print(f"c = c + b on 4 elements, {args.n} iterations, {args.runs} runs, µs per statement")
    print(f"{'':14} {'best':>7}   {'':10} {'median':>7}")
    for name in names:
        print(
            f"{name:14} {best[name]:7.3f}   {best[name] / best['numpy']:5.2f}x NumPy"
            f" {median[name]:7.3f}   {median[name] / median['numpy']:5.2f}x NumPy"
        )


if __name__ == "__main__":
    main()
