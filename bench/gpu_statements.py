#!/usr/bin/env python3
"""What a small GPU statement costs through dep's engine, side by side with PyTorch eager.

Usage (from the repository root, on a machine with an NVIDIA GPU):
    cargo build --release -p dep
    python3 bench/gpu_statements.py [N] [--dep PATH]

Three loops of N iterations on gpu0, each timed inside its own script (dep: `clock()` between
two `wait`s, the per-device engine; PyTorch: perf_counter around the loop, then a synchronize):
  - `c = c + 1` on 4 floats: a chain of dependent tiny kernels (enqueue and run);
  - the same, then `v = c[0]` read on the host every iteration: a round trip GPU -> host;
  - `x = work(0.01, x)`: a 10 µs spin kernel per statement, so the GPU's own time is known.
Prints µs per iteration for dep and PyTorch, and the ratio. Without a GPU dep exits with its
error and the script says so. PyTorch's column is left out when torch cannot use CUDA.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEP_SCRIPT = """
with gpu0 {{
  c = zeros(4)
  x = zeros(4)
}}
wait
t0 = clock()
for i in 0..{n} {{
  with gpu0 {{
    c = c + 1
  }}
}}
wait
t1 = clock()
for i in 0..{n} {{
  with gpu0 {{
    c = c + 1
  }}
  v = c[0]
}}
wait
t2 = clock()
for i in 0..{n} {{
  with gpu0 {{
    x = work(0.01, x)
  }}
}}
wait
t3 = clock()
print "chain", (t1 - t0) * 1000 / {n}
print "readback", (t2 - t1) * 1000 / {n}
print "spin10", (t3 - t2) * 1000 / {n}
print "check", v
"""


def dep_figures(dep, n):
    with tempfile.NamedTemporaryFile("w", suffix=".dep", delete=False) as script:
        script.write(DEP_SCRIPT.format(n=n))
    try:
        run = subprocess.run([dep, "run", script.name, "--engine", "per-device"],
                             capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(script.name)
    if run.returncode != 0:
        sys.exit(f"dep failed (no GPU?):\n{run.stderr}")
    figures = {}
    for line in run.stdout.splitlines():
        name, value = line.split()
        figures[name] = float(value)
    expected = 2 * n
    if figures.pop("check") != expected:
        sys.exit(f"dep computed a wrong value (expected c[0] = {expected})")
    return figures


def torch_figures(n):
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    dev = torch.device("cuda:0")
    c = torch.zeros(4, device=dev)
    torch.cuda.synchronize()
    figures = {}
    start = time.perf_counter()
    for _ in range(n):
        c = c + 1
    torch.cuda.synchronize()
    figures["chain"] = (time.perf_counter() - start) * 1e6 / n
    start = time.perf_counter()
    for _ in range(n):
        c = c + 1
        v = c[0].item()
    torch.cuda.synchronize()
    figures["readback"] = (time.perf_counter() - start) * 1e6 / n
    assert v == 2 * n
    # torch has no spin kernel; torch.cuda._sleep(cycles) is the nearest, in clock cycles.
    cycles = int(torch.cuda.clock_rate() * 1e6 * 10e-6) if hasattr(torch.cuda, "clock_rate") else None
    if cycles and hasattr(torch.cuda, "_sleep"):
        start = time.perf_counter()
        for _ in range(n):
            torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        figures["spin10"] = (time.perf_counter() - start) * 1e6 / n
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=2000)
    parser.add_argument("--dep", default=os.path.join(ROOT, "target", "release", "dep"))
    args = parser.parse_args()
    dep = dep_figures(args.dep, args.n)
    torch = torch_figures(args.n)
    print(f"{'loop (N = ' + str(args.n) + ')':<34} {'dep µs':>10} {'torch µs':>10} {'ratio':>7}")
    for name, what in [("chain", "c = c + 1 (4 floats)"),
                       ("readback", "c = c + 1; v = c[0]"),
                       ("spin10", "x = work(0.01, x) (10 µs kernel)")]:
        mine = dep[name]
        theirs = torch.get(name) if torch else None
        ratio = f"{mine / theirs:.2f}x" if theirs else "-"
        theirs_text = f"{theirs:.2f}" if theirs else "-"
        print(f"{what:<34} {mine:>10.2f} {theirs_text:>10} {ratio:>7}")


if __name__ == "__main__":
    main()
