#!/usr/bin/env python3
"""The Jupyter kernel on a GPU, through a real jupyter_client: what a notebook user does there.

Usage: python3 scripts/kernel-gpu-check.py DEP_BINARY [DEVICE]   (needs jupyter_client;
scripts/gpu-check runs it when the Python it uses has jupyter_client, on a machine with a GPU.
DEVICE is gpu0 by default; `cpu` runs the same cells without a GPU, to check the script itself)

It installs the kernelspec of DEP_BINARY into a temporary prefix, starts the kernel and runs
cells that use gpu0: a matmul whose sum is known (the live display ends with every op done),
the same under `%engine per-device` (the display names the GPU's worker), a bad matmul on the
GPU (an error naming both shapes; the kernel goes on), the first result read again (variables
kept), and a long GPU cell interrupted (the kernel answers within seconds, keeps the variables
it had, and the interrupted writes' variable keeps its last computed value: a cancelled op writes
nothing). Prints one line per check and
exits 1 if any failed.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

from jupyter_client.manager import start_new_kernel

TIMEOUT = 120
failures = []


def check(name, condition, detail=""):
    print(f"{'ok  ' if condition else 'FAIL'} {name}" + (f": {detail}" if detail and not condition else ""))
    if not condition:
        failures.append(name)


def run_cell(client, code, timeout=TIMEOUT):
    """Runs `code`; returns the execute_reply and the iopub messages of the cell, in order."""
    msg_id = client.execute(code)
    messages = []
    deadline = time.monotonic() + timeout
    while True:
        message = client.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            break
    reply = client.get_shell_msg(timeout=max(1, deadline - time.monotonic()))
    return reply, messages


def stdout_of(messages):
    return "".join(m["content"]["text"] for m in messages
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def last_display(messages):
    displays = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
    return displays[-1]["content"]["data"] if displays else {}


def main():
    dep = os.path.abspath(sys.argv[1])
    device = sys.argv[2] if len(sys.argv) > 2 else "gpu0"
    prefix = tempfile.mkdtemp(prefix="dep-kernel-gpu-")
    subprocess.run([dep, "kernel", "install", "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)
    os.environ["JUPYTER_PATH"] = os.path.join(prefix, "share", "jupyter")
    manager, client = start_new_kernel(kernel_name="dep", startup_timeout=60)
    try:
        started = time.monotonic()
        reply, messages = run_cell(client, f"x = ones(512, 512) * 0.01\nwith {device} {{ y = x @ x }}\nprint sum(y)")
        first_cell = time.monotonic() - started
        status = reply["content"]["status"]
        check(f"a matmul on {device} runs in a cell", status == "ok", str(reply["content"]))
        printed = stdout_of(messages).strip()
        # 512 * 512 elements, each 512 * 0.01 * 0.01 = 0.0512: 13421.77
        check("its sum is the expected 13421.77", printed.startswith("13421.7"), printed)
        final = last_display(messages).get("text/plain", "")
        check("the display's final state has every op done",
              "in all" in final and "running" not in final and "waiting" not in final, final[:400])
        # The threaded engine (the kernel's default) runs a GPU op's enqueue on a CPU worker;
        # the per-device engine gives the GPU workers of its own, which the display names.
        reply, _ = run_cell(client, "%engine per-device")
        check("%engine per-device is taken", reply["content"]["status"] == "ok", str(reply["content"]))
        reply, messages = run_cell(client, f"x = ones(512, 512) * 0.01\nwith {device} {{ w = x @ x }}\nprint sum(w)")
        final = last_display(messages).get("text/plain", "")
        rows = [line for line in final.splitlines() if line.startswith("w = x @ x")]
        check(f"under the per-device engine the op runs on a {device} worker",
              reply["content"]["status"] == "ok" and rows and device in rows[0].split("done")[-1],
              final[:600])
        print(f"     (first cell: {first_cell:.2f} s, opening the device included)")

        reply, messages = run_cell(client, f"with {device} {{ z = ones(3, 4) @ ones(5, 6) }}")
        content = reply["content"]
        text = content.get("evalue", "") + "".join(content.get("traceback", []))
        check(f"a bad matmul on {device} is an error reply", content["status"] == "error", str(content))
        check("the error names both shapes", "[3, 4]" in text and "[5, 6]" in text, text[:400])

        reply, messages = run_cell(client, "print sum(y)")
        check("the kernel goes on after the error, with its variables",
              reply["content"]["status"] == "ok" and stdout_of(messages).strip().startswith("13421.7"),
              stdout_of(messages))

        msg_id = client.execute(f"with {device} {{ for i in 0..100000 {{ y = work(1, y) }} }}")
        time.sleep(1.5)
        interrupted = time.monotonic()
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=30)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = client.get_shell_msg(timeout=30)
        waited = time.monotonic() - interrupted
        check(f"an interrupted cell on {device} ends within 10 s", waited < 10, f"{waited:.1f} s")
        reply, messages = run_cell(client, "print sum(x)")
        check("after the interrupt the kernel answers with the variables it had",
              reply["content"]["status"] == "ok" and stdout_of(messages).strip().startswith("2621.4"),
              str(reply["content"]) + stdout_of(messages))
        # A cancelled op writes nothing: `y` keeps the value of its last write that ran (`work`
        # gives its input back, so the same sum).
        reply, messages = run_cell(client, "print sum(y)")
        check("the interrupted writes' variable keeps its last computed value",
              reply["content"]["status"] == "ok" and stdout_of(messages).strip().startswith("13421.7"),
              str(reply["content"]) + stdout_of(messages))
        print(f"     (interrupt answered in {waited:.2f} s)")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        shutil.rmtree(prefix, ignore_errors=True)
    if failures:
        print(f"{len(failures)} kernel GPU check(s) failed")
        return 1
    print("every kernel GPU check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
