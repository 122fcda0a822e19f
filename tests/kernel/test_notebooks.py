"""Every teaching notebook in samples/ runs headless, top to bottom, without an error, and its
cells end in displays a student can read: every op in a final state, ops named by the line of
their cell (`cell[3]:1`), the ops of a loop told apart by their iteration."""

import pathlib
import re

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


def test_there_are_teaching_notebooks():
    names = {path.stem for path in NOTEBOOKS}
    assert {"intro", "conflicts", "random", "memory"} <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs_without_error_and_ends_in_final_displays(path):
    notebook = nbformat.read(path, as_version=4)
    assert notebook.metadata.kernelspec.name == "dep"
    # nbclient raises CellExecutionError at the first cell that ends in an error. It applies
    # each update_display_data to the output it updates: what is left is the final display.
    NotebookClient(notebook, timeout=300, kernel_name="dep").execute()
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
