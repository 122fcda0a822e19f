"""Every teaching notebook in samples/ runs headless, top to bottom, without an error, and its
cells end in displays a student can read: every op in a final state, ops named by the line of
their cell (`cell[3]:1`), the ops of a loop told apart by their iteration."""

import functools
import pathlib
import re
from html import unescape

import nbformat
import pytest
from nbclient import NotebookClient

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples"
NOTEBOOKS = sorted(SAMPLES.glob("*.ipynb"))
# What the loop ops of a lesson's displays say about their iteration.
ITERATION_MARKS = {
    "gpipe": [r"set\(x, \d, .*\) i=\d"],
    "priorities": [r"set\(layers, \d, .*\) k=\d", r"set\(received, \d, .*\) r=\d"],
}
# The lesson notebooks scripts/make-lesson-notebooks.py makes, and the script each is made from.
LESSON_SCRIPTS = {
    "gpipe": "gpipe",
    "priorities": "priorities",
    "two_gpus": "two_gpus",
    "gpu_sync": "gpu_sync",
    "data_parallel": "data_parallel_lesson",
}


@functools.cache
def executed(path):
    """The notebook at `path`, run headless top to bottom (once for every test that reads it)."""
    notebook = nbformat.read(path, as_version=4)
    # nbclient raises CellExecutionError at the first cell that ends in an error. It applies
    # each update_display_data to the output it updates: what is left is the final display.
    NotebookClient(notebook, timeout=300, kernel_name="dep").execute()
    return notebook


def test_there_are_teaching_notebooks():
    names = {path.stem for path in NOTEBOOKS}
    assert {"intro", "conflicts", "random", "memory"} <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs_without_error_and_ends_in_final_displays(path):
    assert nbformat.read(path, as_version=4).metadata.kernelspec.name == "dep"
    notebook = executed(path)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    outputs = [output for cell in code_cells for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    # Every notebook shows the live display of at least one cell, in HTML with a text fallback.
    displays = [
        (cell, output)
        for cell in code_cells
        for output in cell.outputs
        if output.output_type == "display_data" and "text/html" in output.data
    ]
    assert displays and all("text/plain" in output.data for _, output in displays)
    htmls = []
    for cell, output in displays:
        text = output.data["text/plain"]
        heading = text.splitlines()[0]
        htmls.append(output.data["text/html"])
        # The final state: the heading says "in all" and counts no op still on its way.
        assert heading.startswith(f"cell[{cell.execution_count}] · "), heading
        assert " in all" in heading, heading
        assert not re.search(r"\d+ (running|ready|waiting)\b", heading), heading
        # Ops are named by their cell's lines, never by a session-wide number.
        rows = [line for line in text.splitlines()[1:] if re.search(r" (done|failed|skipped|cancelled) ", line)]
        assert rows, text
        for row in rows:
            # (An engine's own wait for a `print`, `wait a`, has no line: `-`.)
            assert re.search(r" (cell\[\d+\]:\d+|-) ", row), row
        assert "(line " not in text, text
    # (The HTML shows labels whole; the text fallback may cut them to its width.)
    for mark in ITERATION_MARKS.get(path.stem, []):
        assert any(re.search(mark, html) for html in htmls), mark


def test_each_simulated_lesson_ends_with_a_sentence_to_check_against_its_timeline():
    """Issue 15, item 6: a lesson on simulated devices ends, after its last timeline, with what
    the student can check in that picture (times on the virtual clock, the same everywhere)."""
    simulated = []
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        cells = [cell for cell in notebook.cells if cell.source.strip()]
        code = [cell for cell in cells if cell.cell_type == "code"]
        if not code or code[0].source.strip() != "%engine sim":
            continue
        simulated.append(path.stem)
        last_timeline = max(
            index
            for index, cell in enumerate(cells)
            if cell.cell_type == "code" and cell.source.lstrip().startswith("%timeline")
        )
        after = cells[last_timeline + 1 :]
        assert after and after[-1].cell_type == "markdown", path.name
        assert after[-1].source.startswith("Check it against"), (path.name, after[-1].source)
    assert {"gpipe", "priorities", "two_gpus", "gpu_sync"} <= set(simulated), simulated


def test_each_lesson_notebook_prints_what_dep_run_of_its_script_prints():
    """A lesson's prose quotes `dep run`'s numbers (a step time, a makespan). Under `%engine sim`
    a cell's end runs the virtual clock until its ops have ended, so a lesson cut into cells
    where its ops should overlap prints other numbers than `dep run` (samples/expected/, which
    the Rust tests compare with `dep run`): two_gpus' step took 2.51 ms, not 2.37 ms, when each
    GPU's forward and backward was a cell of its own."""
    for name, script in LESSON_SCRIPTS.items():
        notebook = executed(SAMPLES / f"{name}.ipynb")
        printed = "".join(
            output.text
            for cell in notebook.cells
            if cell.cell_type == "code" and not cell.source.lstrip().startswith("%")
            for output in cell.outputs
            if output.output_type == "stream" and output.name == "stdout"
        )
        assert printed == (SAMPLES / "expected" / f"{script}.out").read_text(), name


def timeline_bars(svg):
    """A timeline SVG's op bars, each `label · state on lane from start for duration`, without
    the op's place and number (a cell's line in a notebook, a script's line in `dep run`)."""
    bars = []
    for title in re.findall(r"<title>(.*?)</title>", svg):
        title = re.sub(r" \((cell\[\d+\]:\d+|line \d+)\)", "", unescape(title))
        bars.append(re.sub(r" · op\d+ on ", " on ", title))
    return sorted(bars)


def test_the_two_gpus_notebook_overlaps_its_gpus_as_dep_run_does():
    """two_gpus' step is one cell, so that GPU 0's and GPU 1's forward and backward run at the
    same time and the gradient copies run under backward, and its last `%timeline` (which draws
    the last cell that ran ops) draws the whole step: bar for bar the timeline `dep run` draws
    (samples/expected/two_gpus.svg), which its closing sentence describes."""
    notebook = executed(SAMPLES / "two_gpus.ipynb")
    timelines = [
        output.data["image/svg+xml"]
        for cell in notebook.cells
        if cell.cell_type == "code" and cell.source.strip() == "%timeline"
        for output in cell.outputs
        if "image/svg+xml" in output.data
    ]
    assert timelines, "two_gpus.ipynb draws no timeline"
    bars = timeline_bars(timelines[-1])
    starts = {
        bar.split(" · ")[0]: bar.split(" from ")[1].split(" for ")[0]
        for bar in bars
        if bar.startswith(("fc1_0 = ", "fc1_1 = "))
    }
    # (Both GPUs' first op in the last timeline, starting at one instant.)
    assert len(starts) == 2 and len(set(starts.values())) == 1, starts
    assert bars == timeline_bars((SAMPLES / "expected" / "two_gpus.svg").read_text())
