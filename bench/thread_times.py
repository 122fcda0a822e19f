#!/usr/bin/env python3
"""Runs a command and prints the CPU seconds each of its threads used, by thread name, beside
the wall time: where an observed run's time goes on a machine without a profiler (the
interpreter's thread is `dep`, the recorder's `dep-record`, a trace encoder's `dep-trace-*`,
the workers' `dep-cpu:N`). Reads /proc/PID/task/*/stat every few milliseconds until the command
exits, so a thread's last few milliseconds may be missed; Linux only.

Usage: bench/thread_times.py [--runs N] COMMAND [ARG...]
"""
import os
import subprocess
import tempfile
import sys
import time


def thread_times(command):
    """The wall seconds of one run of `command` and each named thread's CPU seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    seen = {}
    start = time.perf_counter()
    errors = tempfile.TemporaryFile()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
    while process.poll() is None:
        try:
            tids = os.listdir(f"/proc/{process.pid}/task")
        except OSError:
            break
        for tid in tids:
            try:
                with open(f"/proc/{process.pid}/task/{tid}/stat") as stat:
                    text = stat.read()
            except OSError:
                continue
            name = text[text.index("(") + 1 : text.rindex(")")]
            fields = text[text.rindex(")") + 2 :].split()
            seen[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)
        time.sleep(0.002)
    wall = time.perf_counter() - start
    if process.wait() != 0:
        errors.seek(0)
        sys.exit(f"thread_times.py: {' '.join(command)} failed:\n{errors.read().decode()}")
    by_name = {}
    for name, seconds in seen.values():
        by_name[name] = by_name.get(name, 0.0) + seconds
    return wall, by_name


def main():
    args = sys.argv[1:]
    runs = 1
    if args[:1] == ["--runs"]:
        runs, args = int(args[1]), args[2:]
    if not args:
        sys.exit(__doc__)
    for _ in range(runs):
        wall, by_name = thread_times(args)
        busy = sorted(by_name.items(), key=lambda item: -item[1])
        shown = " ".join(f"{name} {seconds:.2f}" for name, seconds in busy if seconds >= 0.01)
        print(f"wall {wall:.2f} s; CPU s by thread: {shown}")


if __name__ == "__main__":
    main()
