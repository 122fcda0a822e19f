"""Fixtures for the kernel tests: a real `dep kernel` started by jupyter_client.

scripts/kernel-tests installs the kernelspec into the venv (`dep kernel install --prefix`)
before pytest runs, so `kernel_name="dep"` is the binary built from this checkout.
"""

import os
import queue
import time

import pytest
from jupyter_client.manager import KernelManager

KERNEL_NAME = "dep"
TIMEOUT = 60


class Kernel:
    """A started kernel, its blocking client, and the file its stderr goes to; `env`, when
    given, is the kernel's whole environment."""

    def __init__(self, stderr_path, env=None):
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "w")
        self.km = KernelManager(kernel_name=KERNEL_NAME)
        self.km.start_kernel(stderr=self._stderr, **({} if env is None else {"env": env}))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=TIMEOUT)

    def stderr(self):
        self._stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)
        self._stderr.close()

    def iopub_until_idle(self, msg_id, timeout=TIMEOUT):
        """Every iopub message whose parent is msg_id, up to and including its idle status."""
        messages = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no idle for {msg_id}; got {[m['msg_type'] for m in messages]}")
            try:
                msg = self.kc.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            messages.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return messages

    def shell_reply(self, msg_id, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            reply = self.kc.get_shell_msg(timeout=max(deadline - time.monotonic(), 0.01))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    def execute(self, code, timeout=TIMEOUT, **kwargs):
        """Runs a cell; returns (reply, iopub messages from busy to idle)."""
        msg_id = self.kc.execute(code, **kwargs)
        reply = self.shell_reply(msg_id, timeout)
        return reply, self.iopub_until_idle(msg_id, timeout)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = Kernel(os.path.join(tmp_path_factory.mktemp("kernel"), "stderr.log"))
    yield k
    k.close()


def stdout_of(messages):
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def types_of(messages):
    return [m["msg_type"] for m in messages]
