"""JupyterLab in headless Chromium: open a sample notebook, run all, watch the live display
change while ops run and end in its final state, and save two screenshots of the same cell: one
mid-run (ops running and waiting; checked as seen, pictured when a picture catches it) and one
at the end (every op in its final state).

Run by scripts/kernel-browser-test (which installs JupyterLab, Playwright and Debian's chromium).
Usage: jupyterlab_screenshot.py NOTEBOOK MID_RUN.png END.png
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("DEP_CHROMIUM", "/usr/bin/chromium")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_server(url, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:
            time.sleep(0.5)
    raise SystemExit(f"JupyterLab did not start at {url}")


def write_settings(settings_dir, extension, plugin, values):
    path = os.path.join(settings_dir, extension)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, f"{plugin}.jupyterlab-settings"), "w") as f:
        json.dump(values, f)


def is_live(text):
    """Whether a display's text shows ops running and others waiting behind them."""
    return "running" in text and "waiting" in text and "so far" in text


def is_final(text):
    """Whether a display's text shows its cell's final state: every op over, none unfinished."""
    return "in all" in text and not any(f" {state}" in text.split("\n")[0] for state in ("running", "ready", "waiting"))


def screenshot_of_cell(page, text, path, state=is_live):
    """A picture of the window scrolled to the cell that contains `text`, kept only
    if the cell's display still shows `state` once the picture is taken."""
    cell = page.locator(".jp-CodeCell", has_text=text).first
    cell.evaluate("el => el.scrollIntoView({block: 'start'})")
    picture = page.screenshot()
    display = cell.locator(".dep-view")
    if display.count() == 0 or not state(display.first.inner_text()):
        return None
    with open(path, "wb") as f:
        f.write(picture)
    return path


def main():
    notebook, out_png, end_png = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    root = tempfile.mkdtemp(prefix="dep-lab-")
    shutil.copy(notebook, root)
    name = os.path.basename(notebook)
    # Settings: render every cell (JupyterLab 4 renders only the cells in view by default, and the
    # displays of the others could not be watched), and no news pop-up over the screenshot.
    settings = os.path.join(root, "settings")
    write_settings(settings, "@jupyterlab/notebook-extension", "tracker", {"windowingMode": "none"})
    write_settings(settings, "@jupyterlab/apputils-extension", "notification", {"fetchNews": "false", "checkForUpdates": False})
    port = free_port()
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--allow-root", "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         f"--LabApp.user_settings_dir={settings}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "lab.log"), "w"),
    )
    try:
        wait_for_server(f"http://127.0.0.1:{port}/api")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{name}")
            page.wait_for_function("window.jupyterapp !== undefined", timeout=60000)
            # The kernel is up when the toolbar's kernel status says idle.
            page.wait_for_selector(".jp-Notebook", timeout=60000)
            page.wait_for_function(
                "() => { const w = window.jupyterapp.shell.currentWidget;"
                " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
                " && w.sessionContext.session.kernel.status === 'idle'; }",
                timeout=60000,
            )
            page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); }")
            # Start "Run All" without awaiting it (the command's promise ends with the last cell).
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

            # Watch the live displays while the cells run: record each display's text, and take
            # the screenshot while step 3 runs: reads running, the write waiting behind them.
            seen = {}
            shot = None
            saw_live = False
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                texts = page.eval_on_selector_all(".dep-view", "els => els.map(e => e.innerText)")
                # Retaken while the state lasts, so the picture is of its latest moment.
                if any(is_live(text) for text in texts):
                    saw_live = True
                    shot = screenshot_of_cell(page, "%why A", out_png) or shot
                for idx, text in enumerate(texts):
                    seen.setdefault(idx, [])
                    if not seen[idx] or seen[idx][-1] != text:
                        seen[idx].append(text)
                busy = page.evaluate(
                    "() => { const w = window.jupyterapp.shell.currentWidget;"
                    " return w.sessionContext.session.kernel.status; }"
                )
                n_pending = page.eval_on_selector_all(".jp-InputPrompt", "els => els.filter(e => e.innerText.includes('*')).length")
                if busy == "idle" and n_pending == 0 and texts:
                    break
                time.sleep(0.05)
            else:
                raise SystemExit("the notebook did not finish running")

            errors = page.eval_on_selector_all(".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']", "els => els.map(e => e.textContent)")
            if errors:
                raise SystemExit(f"errors in the notebook: {errors}")
            changed = {idx: texts for idx, texts in seen.items() if len(texts) >= 2}
            if not changed:
                raise SystemExit(f"no live display changed while the cells ran: {seen}")
            finals = page.eval_on_selector_all(".dep-view", "els => els.map(e => e.innerText)")
            if not all("in all" in text for text in finals):
                raise SystemExit(f"a display did not end in its final state: {finals}")
            live_states = [t for texts in changed.values() for t in texts if "so far" in t]
            print(f"{len(finals)} live displays; {len(changed)} changed while running; {len(live_states)} live states seen")
            for text in (live_states[:1] + finals[2:3]):
                print("----\n" + text)

            if not saw_live:
                raise SystemExit("never saw a display with ops running and waiting at once")
            if shot is None:
                # The state was seen, but it ended each time before a picture of it was taken
                # (on a fast machine the cell's reads run well under a second, and a screenshot
                # of the page can take a few hundred milliseconds): the picture is a document,
                # the state seen is the check.
                print(f"a display showed ops running and waiting, but no picture caught it: {out_png} not rewritten")
            else:
                print(f"screenshot of a live display: {shot}")
            # The same cell once the notebook has run: its display in its final state.
            end_shot = screenshot_of_cell(page, "%why A", end_png, state=is_final)
            if end_shot is None:
                raise SystemExit("the display of the screenshot's cell did not end in its final state")
            print(f"screenshot of the same display at the end: {end_shot}")
            browser.close()
    finally:
        lab.terminate()
        lab.wait(timeout=30)


if __name__ == "__main__":
    main()
