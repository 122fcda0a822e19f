"""The dep kernel against a real jupyter_client: live displays, interrupts, bad signatures,
errors that do not harm the next cell, and the small requests (comms, history, control)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.session import Session

from conftest import Kernel, stdout_of, types_of

SETUP = "A = ones(256, 256)"


def long_cell(kernel, seconds):
    """A cell that runs for about `seconds` whatever the build: ops of 25 ms each (`work(25, x)`
    takes 25 ms, then gives x). Few ops keep the event log small, so the test measures the
    interrupt, not the display's cost of a long log on a 2-core machine."""
    n_iterations = max(32, int(seconds / 0.025))
    return f"for i in 0..{n_iterations} {{ B = work(25, A @ A) }}"


def test_a_long_cell_shows_a_live_display_updated_until_its_final_state(kernel):
    reply, _ = kernel.execute(SETUP)
    assert reply["content"]["status"] == "ok"
    reply, messages = kernel.execute(long_cell(kernel, 1.0) + '\nC = B + 1\nprint "done", sum(C)')
    assert reply["content"]["status"] == "ok"
    types = types_of(messages)
    assert types[0] == "status" and messages[0]["content"]["execution_state"] == "busy"
    assert types[1] == "execute_input"
    assert types[-1] == "status" and messages[-1]["content"]["execution_state"] == "idle"

    displays = [m for m in messages if m["msg_type"] == "display_data"]
    assert len(displays) == 1, types
    display_id = displays[0]["content"]["transient"]["display_id"]
    updates = [m for m in messages if m["msg_type"] == "update_display_data"]
    assert len(updates) >= 2, types
    assert all(m["content"]["transient"]["display_id"] == display_id for m in updates)
    assert types.index("display_data") < types.index("update_display_data")

    # The display comes first; the updates show ops running while they run; the last update
    # is the final state: every op done, nothing left in any queue.
    first_text = displays[0]["content"]["data"]["text/plain"]
    assert "so far" in first_text
    assert any("running" in m["content"]["data"]["text/plain"] for m in updates[:-1])
    # While it runs, the timeline of what has run so far is drawn under the tables.
    assert any("dep-timeline" in m["content"]["data"]["text/html"] for m in updates[:-1])
    final = updates[-1]["content"]["data"]
    assert "in all" in final["text/plain"], final["text/plain"]
    assert "waiting" not in final["text/plain"] and "running" not in final["text/plain"]
    # The HTML is the views crate's fragment under the cell's heading: the matmuls' rows, done.
    html = final["text/html"]
    # Under the tables, the timeline of what ran: the cell's ops as bars, labels in tooltips.
    assert "dep-timeline" in html and "<svg" in html, html[:2000]
    assert html.index("in all") < html.index("<td>B = work(25, A @ A)</td>"), html[:2000]
    assert ">done</span>" in html and ">running</span>" not in html
    # Every op of the cell (the matmuls, C = B + 1, the print's sum and wait) is done.
    match = re.search(r"(\d+) ops: (\d+) done", final["text/plain"])
    assert match and match.group(1) == match.group(2) and int(match.group(1)) >= 32, final["text/plain"]
    assert "done" in stdout_of(messages)
    # At most ~10 updates a second.
    duration = _seconds_between(messages[0], messages[-1])
    assert len(updates) <= 10 * duration + 3, (len(updates), duration)


def test_the_display_comes_before_the_printed_output_and_the_last_update_before_idle(kernel):
    reply, messages = kernel.execute('A = ones(8, 8)\nB = A + 1\nprint "B[0, 0] =", B[0, 0]')
    assert reply["content"]["status"] == "ok"
    types = types_of(messages)
    assert types.index("display_data") < types.index("stream"), types
    assert stdout_of(messages) == "B[0, 0] = 2\n"


def test_watch_off_turns_the_display_off_and_on_again(kernel):
    reply, messages = kernel.execute("%watch off\nW = ones(4, 4) + 1")
    assert reply["content"]["status"] == "ok"
    assert "display_data" not in types_of(messages)
    reply, messages = kernel.execute("%watch on\nW = W + 1")
    assert "display_data" in types_of(messages)


def test_an_interrupt_ends_a_long_cell_and_the_kernel_keeps_its_variables(kernel):
    kernel.execute(SETUP)
    cell = long_cell(kernel, 20.0)
    started = time.monotonic()
    msg_id = kernel.kc.execute(cell)
    # Wait until the display shows ops running, then interrupt over the control channel.
    while True:
        msg = kernel.kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] in ("display_data", "update_display_data"):
            break
    interrupt_id = kernel.kc.session.send(kernel.kc.control_channel.socket, "interrupt_request", {})["header"]["msg_id"]
    control_reply = kernel.kc.control_channel.get_msg(timeout=10)
    assert control_reply["parent_header"]["msg_id"] == interrupt_id
    assert control_reply["msg_type"] == "interrupt_reply"
    assert control_reply["content"]["status"] == "ok"

    reply = kernel.shell_reply(msg_id, timeout=30)
    elapsed = time.monotonic() - started
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "Interrupted"
    assert elapsed < 8, f"the cell ran {elapsed:.1f} s: the interrupt did not cancel its ops"
    messages = kernel.iopub_until_idle(msg_id)
    errors = [m for m in messages if m["msg_type"] == "error"]
    assert len(errors) == 1 and errors[0]["content"]["ename"] == "Interrupted"
    final = [m for m in messages if m["msg_type"] == "update_display_data"][-1]["content"]["data"]["text/plain"]
    assert "cancelled" in final, final

    # The kernel lives on, with A intact.
    reply, messages = kernel.execute('print "sum(A) =", sum(A)')
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(messages) == "sum(A) = 65536\n"


def test_an_interrupt_reaches_a_cell_blocked_in_print(kernel):
    kernel.execute(SETUP)
    msg_id = kernel.kc.execute(long_cell(kernel, 20.0) + '\nprint "never", sum(B)')
    time.sleep(1.0)
    kernel.kc.session.send(kernel.kc.control_channel.socket, "interrupt_request", {})
    assert kernel.kc.control_channel.get_msg(timeout=10)["msg_type"] == "interrupt_reply"
    reply = kernel.shell_reply(msg_id, timeout=15)
    assert reply["content"]["ename"] == "Interrupted"
    assert "never" not in stdout_of(kernel.iopub_until_idle(msg_id))


def test_a_second_interrupt_stops_waiting_for_a_running_op_which_goes_on(kernel):
    # The first interrupt ends the blocked print and the cell waits for the running op; the
    # second ends that wait (it used to run the op's whole 6 s): the op goes on, and a later
    # cell that reads w waits for it.
    started = time.monotonic()
    msg_id = kernel.kc.execute("w = work(6000, ones(2))\nprint w")
    for _ in range(2):
        time.sleep(0.7)
        kernel.kc.session.send(kernel.kc.control_channel.socket, "interrupt_request", {})
        assert kernel.kc.control_channel.get_msg(timeout=10)["msg_type"] == "interrupt_reply"
    reply = kernel.shell_reply(msg_id, timeout=20)
    assert reply["content"]["ename"] == "Interrupted"
    assert time.monotonic() - started < 4.5, "the cell waited for the running op"
    assert "1 running op goes on" in reply["content"]["evalue"], reply["content"]["evalue"]
    messages = kernel.iopub_until_idle(msg_id)
    errors = [m for m in messages if m["msg_type"] == "error"]
    traceback = "\n".join(errors[0]["content"]["traceback"])
    # The last display, drawn while the op goes on, times it up to then, as the displays
    # before it did (it used to say `0 ns+` and `... in all`, timed to the op's start).
    displays = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
    last = displays[-1]["content"]["data"]["text/plain"]
    heading = last.splitlines()[0]
    assert "1 running" in heading and heading.endswith(" so far"), last
    row = next(line for line in last.splitlines() if line.startswith("w = work(6000, ones(2))"))
    assert re.search(r"\d+\.\d+ s\+$", row), last
    # What the message says of the variables is what they hold: nothing cancelled was written.
    assert "Every variable keeps its last computed value" in traceback, traceback
    assert "hold a `cancelled` error" not in traceback, traceback
    reply, messages = kernel.execute("print sum(w)")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(messages) == "2.0\n"
    assert time.monotonic() - started > 5.5, "print read w before its op ended"


def test_after_a_second_interrupt_only_a_cell_that_reads_the_running_op_waits_for_it(tmp_path):
    # Two workers whatever the machine: the op left running keeps one, later cells get the other.
    two_workers = Kernel(str(tmp_path / "stderr.log"), env={**os.environ, "DEP_THREADS": "2"})
    try:
        reply, _ = two_workers.execute("A = ones(4)")
        assert reply["content"]["status"] == "ok", reply["content"]
        started = time.monotonic()
        msg_id = two_workers.kc.execute("X = work(5000, A)\nprint X")
        for _ in range(2):
            time.sleep(0.5)
            two_workers.kc.session.send(two_workers.kc.control_channel.socket, "interrupt_request", {})
            assert two_workers.kc.control_channel.get_msg(timeout=10)["msg_type"] == "interrupt_reply"
        reply = two_workers.shell_reply(msg_id, timeout=20)
        assert "1 running op goes on" in reply["content"]["evalue"], reply["content"]
        two_workers.iopub_until_idle(msg_id)
        # A cell that does not read X answers at once (it used to wait for X's op to end)...
        asked = time.monotonic()
        reply, messages = two_workers.execute("print 1")
        answered = time.monotonic()
        assert reply["content"]["status"] == "ok", reply["content"]
        assert stdout_of(messages) == "1.0\n"
        assert answered - asked < 2.0, f"print 1 took {answered - asked:.1f} s: it waited for X's op"
        assert answered - started < 4.5, "X's op had ended before print 1 was asked: nothing shown"
        # ... and one that reads X waits for it.
        reply, messages = two_workers.execute("print sum(X)")
        assert reply["content"]["status"] == "ok", reply["content"]
        assert stdout_of(messages) == "4.0\n"
        assert time.monotonic() - started > 4.8, "print read X before its op ended"
    finally:
        two_workers.close()


def test_an_interrupt_while_engine_waits_for_ops_keeps_the_engine(tmp_path):
    # %engine waits for every op, one an earlier cell let go included: it heard no interrupt
    # until that op ended (the cell hung for its whole run), then replaced the engine anyway.
    # Now the first interrupt cancels what has not started, the second stops waiting, and the
    # engine is kept.
    k = Kernel(str(tmp_path / "stderr.log"), env={**os.environ, "DEP_THREADS": "2"})
    try:
        msg_id = k.kc.execute("X = work(8000, ones(2))\nprint X")
        for _ in range(2):
            time.sleep(0.5)
            k.kc.session.send(k.kc.control_channel.socket, "interrupt_request", {})
            assert k.kc.control_channel.get_msg(timeout=10)["msg_type"] == "interrupt_reply"
        assert "1 running op goes on" in k.shell_reply(msg_id, timeout=20)["content"]["evalue"]
        k.iopub_until_idle(msg_id)
        started = time.monotonic()
        msg_id = k.kc.execute("Y = X + 1\n%engine naive\nprint 2")
        for _ in range(2):
            time.sleep(0.5)
            k.kc.session.send(k.kc.control_channel.socket, "interrupt_request", {})
            assert k.kc.control_channel.get_msg(timeout=10)["msg_type"] == "interrupt_reply"
        reply = k.shell_reply(msg_id, timeout=20)
        messages = k.iopub_until_idle(msg_id)
        assert time.monotonic() - started < 4.0, "the cell waited for X's op"
        assert reply["content"]["ename"] == "Interrupted", reply["content"]
        out = stdout_of(messages)
        assert "the engine was not replaced" in out and "2.0" not in out, out
        reply, messages = k.execute("%vars")
        out = stdout_of(messages)
        assert re.search(r"^Y .* no value", out, re.M), out
        reply, messages = k.execute("print 3")
        assert any("threaded engine" in m["content"]["data"]["text/plain"]
                   for m in messages if m["msg_type"] in ("display_data", "update_display_data")), messages
    finally:
        k.close()


def test_an_interrupt_stops_a_loop_at_its_next_statement(kernel):
    # 1,000 iterations of 20 ms, each printing: 20 s unless the interrupt stops the loop itself.
    msg_id = kernel.kc.execute("x = ones(2)\nfor i in 0..1000 {\n  x = work(20, x + 1)\n  print i, sum(x)\n}")
    time.sleep(1.0)
    kernel.kc.session.send(kernel.kc.control_channel.socket, "interrupt_request", {})
    assert kernel.kc.control_channel.get_msg(timeout=10)["msg_type"] == "interrupt_reply"
    reply = kernel.shell_reply(msg_id, timeout=10)
    assert reply["content"]["ename"] == "Interrupted"
    printed = stdout_of(kernel.iopub_until_idle(msg_id)).splitlines()
    assert 0 < len(printed) < 500, printed
    # x keeps its last computed value: an op the interrupt cancelled (the loop's next
    # `x = work(...)`, when it was pushed and not yet started) writes nothing.
    reply, messages = kernel.execute("print sum(x) > 0")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(messages) == "1.0\n"
    # The kernel lives on, and x can be written again.
    reply, messages = kernel.execute("x = ones(2)\nprint sum(x)")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(messages) == "2.0\n"


def test_a_message_with_a_bad_signature_is_dropped_and_the_next_good_one_answered(kernel):
    forger = Session(key=b"not-the-key", username="mallory")
    forged = forger.send(kernel.kc.shell_channel.socket, "execute_request", {"code": "Forged = ones(1)", "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    forged_id = forged["header"]["msg_id"]
    time.sleep(1.0)
    # No reply and no busy for the forged message...
    while True:
        try:
            msg = kernel.kc.get_shell_msg(timeout=0.2)
        except Exception:
            break
        assert msg["parent_header"].get("msg_id") != forged_id
    while True:
        try:
            msg = kernel.kc.get_iopub_msg(timeout=0.2)
        except Exception:
            break
        assert msg["parent_header"].get("msg_id") != forged_id
    # ... it was logged ...
    assert "bad HMAC signature" in kernel.stderr()
    # ... it did not run, and the next good message is answered.
    reply, messages = kernel.execute("print Forged")
    assert reply["content"]["status"] == "error"
    assert "unknown name `Forged`" in reply["content"]["evalue"]


def test_an_error_cell_names_line_and_statement_and_the_next_cell_uses_earlier_variables(kernel):
    reply, _ = kernel.execute("P = ones(2, 3)\nQ = ones(4, 5)")
    assert reply["content"]["status"] == "ok"
    reply, messages = kernel.execute("R = P + 1\nS = P @ Q\nprint S")
    content = reply["content"]
    assert content["status"] == "error"
    assert content["ename"] == "RuntimeError"
    assert "S = P @ Q" in content["evalue"], content["evalue"]
    assert re.search(r"\(cell\[\d+\]:2\)", content["evalue"]), content["evalue"]
    traceback = "\n".join(content["traceback"])
    assert "cell[" in traceback and ":2:" in traceback, traceback
    errors = [m for m in messages if m["msg_type"] == "error"]
    assert len(errors) == 1 and errors[0]["content"]["evalue"] == content["evalue"]

    reply, messages = kernel.execute('print "R:", sum(R), "P:", sum(P)')
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(messages) == "R: 12 P: 6\n"


def test_a_failure_read_in_a_later_cell_names_the_cell_it_happened_in(kernel):
    kernel.execute("A7 = ones(3)")
    failing, _ = kernel.execute("\n\nC7 = A7 @ ones(4)")
    assert failing["content"]["status"] == "error", failing["content"]
    reply, _ = kernel.execute("x7 = 1\nprint C7")
    content = reply["content"]
    assert content["status"] == "error", content
    place = f"(cell[{failing['content']['execution_count']}]:3)"
    assert "C7 = A7 @ ones(4)" in content["evalue"] and place in content["evalue"], content["evalue"]


def test_a_syntax_error_reports_every_error_and_runs_nothing(kernel):
    reply, messages = kernel.execute("Z1 = ones(2)\nZ2 = Z1 + )\nZ3 = (")
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "SyntaxError"
    assert len(reply["content"]["traceback"]) == 2
    reply, _ = kernel.execute("print Z1")
    assert reply["content"]["status"] == "error"


def test_execution_count_increments(kernel):
    first, _ = kernel.execute("N1 = 1")
    second, messages = kernel.execute("N2 = 2")
    assert second["content"]["execution_count"] == first["content"]["execution_count"] + 1
    inputs = [m for m in messages if m["msg_type"] == "execute_input"]
    assert inputs[0]["content"]["execution_count"] == second["content"]["execution_count"]
    # An empty cell runs nothing and, as in IPython, takes no number.
    empty, _ = kernel.execute("  \n")
    assert empty["content"]["status"] == "ok"
    assert empty["content"]["execution_count"] == second["content"]["execution_count"]
    third, _ = kernel.execute("N3 = 3")
    assert third["content"]["execution_count"] == second["content"]["execution_count"] + 1


def dag_of(messages):
    """What %dag showed: (its DOT text, its SVG or None). With Graphviz installed the DAG is an
    image/svg+xml display whose text/plain is the DOT; without, the DOT goes to stdout."""
    for m in messages:
        data = m["content"].get("data", {}) if m["msg_type"] == "display_data" else {}
        if "digraph" in data.get("text/plain", ""):
            return data["text/plain"], data.get("image/svg+xml")
    return stdout_of(messages), None


def test_magics_work_and_a_bad_magic_is_an_error(kernel):
    kernel.execute("%engine threaded 2\nM = ones(64, 64)\nM2 = M @ M\nM3 = M + 1")
    reply, messages = kernel.execute("%timeline\n%dag\n%why M2\n%help")
    assert reply["content"]["status"] == "ok"
    text = stdout_of(messages)
    assert "M2 is ready" in text
    assert "%trace FILE" in text and "%graph [NAME]" in text
    dot, svg = dag_of(messages)
    assert "digraph" in dot and "RAW" in dot and "M2 = M @ M" in dot, dot
    if shutil.which("dot"):
        assert svg is not None and "<svg" in svg and "M2 = M @ M" in svg
    # %timeline is the views crate's SVG Gantt chart (each bar's statement in its tooltip), with
    # the text timeline as its fallback.
    timeline = [m for m in messages if m["msg_type"] == "display_data"][0]["content"]["data"]
    assert timeline["image/svg+xml"].startswith("<svg") and "M2 = M @ M" in timeline["image/svg+xml"]
    assert "timeline" in timeline["text/plain"] and "critical path" in timeline["text/plain"]
    reply, _ = kernel.execute("%frobnicate")
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "MagicError"
    reply, _ = kernel.execute("%engine naive\nprint sum(M3)")
    assert reply["content"]["status"] == "ok"


def test_a_loaded_scripts_display_shows_its_own_ops_only(kernel, tmp_path):
    """%load runs a script as the cell's code: its display, like a code cell's, shows the ops of
    this cell, not those of the cell before it or of an earlier %load."""
    script = tmp_path / "loaded.dep"
    script.write_text("L9 = K9 + 5\n")
    kernel.execute("K9 = ones(2)\nJ9 = K9 * 2")
    for _ in range(2):
        reply, messages = kernel.execute(f"%load {script}")
        assert reply["content"]["status"] == "ok", reply["content"]
        shown = [m["content"]["data"]["text/plain"] for m in messages
                 if m["msg_type"] in ("display_data", "update_display_data")]
        assert shown, messages
        final = shown[-1]
        assert final.count("L9 = K9 + 5") == 1 and "J9 = K9 * 2" not in final, final


def listed_commands(help_text, sigil):
    """The command names a help text lists: the first word after `sigil` on its indented lines."""
    prefix = "  " + sigil
    return {line[len(prefix):].split()[0] for line in help_text.splitlines() if line.startswith(prefix)}


def test_percent_help_lists_the_commands_colon_help_lists(kernel):
    """One command table: %help in the real kernel and :help in the real REPL (the same binary,
    from the kernelspec) list the same commands."""
    reply, messages = kernel.execute("%help")
    assert reply["content"]["status"] == "ok"
    magics = listed_commands(stdout_of(messages), "%")
    dep = KernelSpecManager().get_kernel_spec("dep").argv[0]
    repl = subprocess.run([dep], input=":help\n", capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1"})
    assert repl.returncode == 0, repl.stderr
    colon = listed_commands(repl.stdout, ":")
    assert len(magics) >= 15 and "engine" in magics, magics
    assert magics == colon


def test_why_inside_a_cell_explains_a_waiting_op(kernel):
    kernel.execute(SETUP)
    code = "%engine threaded 1\n" + long_cell(kernel, 0.5) + "\nD = B + 1\n%why D"
    reply, messages = kernel.execute(code)
    assert reply["content"]["status"] == "ok"
    text = stdout_of(messages)
    # Lines are the cell's own, as the student sees them: `cell[N]:L`.
    line = code.split("\n").index("D = B + 1") + 1
    count = reply["content"]["execution_count"]
    assert f"D will be written by D = B + 1 (cell[{count}]:{line})" in text, text
    assert "which waits for B: written by B = work(25, A @ A)" in text, text
    # Once D is done, %why tells from the event log what its write waited for.
    reply, messages = kernel.execute("%why D")
    text = stdout_of(messages)
    assert text.startswith("D is ready: nothing reads or writes it now\n"), text
    assert f"D was last written by D = B + 1 (cell[{count}]:{line}), which waited " in text, text
    assert "for B: written by B = work(25, A @ A)" in text, text
    # After a cell that ran code, the log holds that cell's events only: %why says D's write
    # is older than them (it used to say nothing of it, as if D had never been written).
    kernel.execute("E = 1")
    reply, messages = kernel.execute("%why D")
    text = stdout_of(messages)
    assert "D was last written before the events kept here (a notebook keeps the events of the last cell that ran code)" in text, text


def test_graph_and_dag_show_a_recorded_graph(kernel):
    reply, _ = kernel.execute("G = ones(8, 8)\ngraph step {\n  H = G + 1\n  K = H @ G\n}\nrun step")
    assert reply["content"]["status"] == "ok", reply["content"]
    reply, messages = kernel.execute("%graph\n%graph step")
    assert reply["content"]["status"] == "ok", reply["content"]
    text = stdout_of(messages)
    assert "recorded graphs: step" in text, text
    assert "graph step: 2 ops, 1 edge (carrying 1 RAW, 0 WAR, 0 WAW)" in text and "peak memory per run" in text, text
    reply, messages = kernel.execute("%dag step")
    assert reply["content"]["status"] == "ok", reply["content"]
    dot, svg = dag_of(messages)
    assert 'digraph "step"' in dot and "H = G + 1" in dot and "RAW" in dot, dot
    if shutil.which("dot"):
        assert svg is not None and "K = H @ G" in svg
    reply, _ = kernel.execute("%graph nope")
    assert reply["content"]["ename"] == "MagicError"
    assert "no graph named `nope`; recorded graphs: step" in reply["content"]["evalue"]
    # Completion knows the recorded graphs.
    msg_id = kernel.kc.complete("%dag st", 7)
    assert kernel.shell_reply(msg_id)["content"]["matches"] == ["step"]


def test_trace_writes_chrome_trace_json(kernel, tmp_path):
    import json

    kernel.execute("W = ones(2)\nW = W + 1")
    kernel.execute("T = ones(16, 16)\nU = T @ T\nV = U + T")
    path = tmp_path / "cell.json"
    reply, messages = kernel.execute(f"%trace {path}")
    assert reply["content"]["status"] == "ok"
    trace = json.loads(path.read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {"U = T @ T", "V = U + T"} <= {e["name"] for e in slices}
    assert any(e["ph"] == "s" for e in trace["traceEvents"])
    # Each op's line is its line in its cell, as the notebook's reports number it (`cell[N]:2`),
    # not the session's count of every cell's lines so far.
    lines = {e["name"]: e["args"]["line"] for e in slices}
    assert lines["U = T @ T"] == 2 and lines["V = U + T"] == 3, lines


def test_unknown_comms_are_closed_and_comm_info_is_empty(kernel):
    msg = kernel.kc.session.msg("comm_open", {"comm_id": "c1", "target_name": "jupyter.widget", "data": {}})
    kernel.kc.shell_channel.send(msg)
    messages = kernel.iopub_until_idle(msg["header"]["msg_id"])
    closes = [m for m in messages if m["msg_type"] == "comm_close"]
    assert len(closes) == 1 and closes[0]["content"]["comm_id"] == "c1"
    msg_id = kernel.kc.comm_info()
    assert kernel.shell_reply(msg_id)["content"]["comms"] == {}
    msg_id = kernel.kc.history()
    assert kernel.shell_reply(msg_id)["content"]["history"] == []


def test_control_kernel_info_is_wrapped_in_busy_and_idle(kernel):
    msg = kernel.kc.session.send(kernel.kc.control_channel.socket, "kernel_info_request", {})
    reply = kernel.kc.control_channel.get_msg(timeout=10)
    assert reply["parent_header"]["msg_id"] == msg["header"]["msg_id"]
    assert reply["content"]["language_info"]["name"] == "dep"
    statuses = [m["content"]["execution_state"] for m in kernel.iopub_until_idle(msg["header"]["msg_id"])]
    assert statuses == ["busy", "idle"]


def test_one_stable_session_id(kernel):
    sessions = set()
    for _ in range(3):
        msg_id = kernel.kc.kernel_info()
        sessions.add(kernel.shell_reply(msg_id)["header"]["session"])
    assert len(sessions) == 1


def test_complete_and_inspect_know_the_session(kernel):
    kernel.execute("Weights = ones(3, 4)")
    msg_id = kernel.kc.complete("x = Wei", 7)
    content = kernel.shell_reply(msg_id)["content"]
    assert content["matches"] == ["Weights"] and content["cursor_start"] == 4 and content["cursor_end"] == 7
    msg_id = kernel.kc.inspect("Weights", 3)
    content = kernel.shell_reply(msg_id)["content"]
    assert content["found"] and "[3, 4]" in content["data"]["text/plain"]


def _seconds_between(first, last):
    from datetime import datetime

    def when(msg):
        date = msg["header"]["date"]
        return date if isinstance(date, datetime) else datetime.fromisoformat(str(date))

    return max((when(last) - when(first)).total_seconds(), 0.001)


def test_requests_queued_behind_a_failed_cell_are_aborted_then_the_kernel_runs_again(kernel):
    # The failing cell runs for a second first, so the next request is surely queued by then.
    kernel.execute(SETUP)
    failing = kernel.kc.execute(long_cell(kernel, 1.0) + "\nprint not_defined_anywhere")
    queued = kernel.kc.execute("Queued = ones(2)")
    assert kernel.shell_reply(failing)["content"]["status"] == "error"
    assert kernel.shell_reply(queued)["content"]["status"] == "aborted"
    kernel.iopub_until_idle(queued)
    reply, _ = kernel.execute("print Queued")
    assert reply["content"]["status"] == "error"  # the aborted cell never ran
    reply, messages = kernel.execute('After = ones(2)\nprint "after:", sum(After)')
    assert reply["content"]["status"] == "ok" and stdout_of(messages) == "after: 2\n"


def test_a_silent_cell_publishes_nothing_but_its_status_and_keeps_the_count(kernel):
    before, _ = kernel.execute("Count1 = 1")
    reply, messages = kernel.execute("Silent = ones(4, 4) + 1", silent=True)
    assert reply["content"]["status"] == "ok"
    assert types_of(messages) == ["status", "status"]
    after, _ = kernel.execute("Count2 = Silent + 1")
    assert after["content"]["execution_count"] == before["content"]["execution_count"] + 1


def test_engine_sim_with_ranks_runs_each_cell_on_every_rank(kernel):
    reply, _ = kernel.execute("%engine sim --ranks 4")
    assert reply["content"]["status"] == "ok", reply["content"]
    reply, messages = kernel.execute("x = ones(2) * (rank() + 1)\nx = allreduce(x)\nprint rank(), ranks(), x")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(messages) == "0 4 [10. 10.]\n"
    # A later cell runs on every rank again: each has its own x.
    reply, messages = kernel.execute("y = allreduce(x)\nprint y")
    assert stdout_of(messages) == "[40. 40.]\n"
    # Another rank's failure is the cell's error, with its rank.
    reply, _ = kernel.execute("with rank = 3 { z = ones(2) @ ones(3) }\nprint 1")
    assert reply["content"]["status"] == "error"
    assert "error (rank 3): matmul" in "\n".join(reply["content"]["traceback"])
    reply, messages = kernel.execute("%engine threaded 2\nprint ranks()")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(messages).endswith("one rank again, rank 0's variables kept\n1.0\n"), stdout_of(messages)


def test_the_kernel_gpu_check_passes_with_the_cpu_in_place_of_the_gpu():
    """scripts/kernel-gpu-check.py runs only on GPU machines (through scripts/gpu-check); its
    cells run here on the CPU, so that the script cannot rot between GPU sessions."""
    dep = KernelSpecManager().get_kernel_spec("dep").argv[0]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                          "kernel-gpu-check.py")
    result = subprocess.run([sys.executable, script, dep, "cpu"], capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every kernel GPU check passed" in result.stdout, result.stdout


# A client process that starts a kernel, writes its pid to the file named by its argument, and
# waits to be killed.
CLIENT_OF_A_KERNEL = """
import os, sys, time
from jupyter_client.manager import KernelManager
km = KernelManager(kernel_name="dep")
km.start_kernel()
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=60)
with open(sys.argv[1] + ".part", "w") as f:
    f.write(str(km.provisioner.pid))
os.replace(sys.argv[1] + ".part", sys.argv[1])
time.sleep(600)
"""


def _is_running(pid):
    """Whether the process pid runs. An ended kernel stays a zombie when the process that
    adopted it does not reap orphans (as some containers' init does not): that has ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X", "x")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="tells a running process by /proc")
def test_the_kernel_ends_when_the_client_process_that_started_it_is_killed(tmp_path):
    pid_file = tmp_path / "kernel.pid"
    log_path = tmp_path / "client.log"
    # No pipes: the client and its kernel write to a file, so that nothing here waits on a pipe
    # that a process left behind holds open.
    with open(log_path, "w") as log:
        client = subprocess.Popen([sys.executable, "-c", CLIENT_OF_A_KERNEL, str(pid_file)],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    kernel_pid = None
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert client.poll() is None, f"the client ended: {log_path.read_text()}"
            assert time.monotonic() < deadline, f"no kernel in 60 s: {log_path.read_text()}"
            time.sleep(0.1)
        kernel_pid = int(pid_file.read_text())
        assert _is_running(kernel_pid)
        client.kill()
        client.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _is_running(kernel_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _is_running(kernel_pid), "the kernel outlived the client that started it"
        assert "the process that started the kernel" in log_path.read_text(), log_path.read_text()
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(timeout=10)
        if kernel_pid is not None and _is_running(kernel_pid):
            try:
                os.kill(kernel_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
