#!/usr/bin/env python3
"""Writes the notebooks of the simulated lessons (samples/gpipe.ipynb, priorities.ipynb,
two_gpus.ipynb, gpu_sync.ipynb, data_parallel.ipynb) from their .dep scripts: one markdown cell per comment block, one code cell per
block of statements, after a `%engine sim` cell (`%engine sim --ranks 4` for the lessons on
ranks); a comment line `#%magic` becomes a code cell
`%magic` (a script run by `dep run` skips it as a comment). A script without such lines ends with a
`%timeline` cell, which draws the last cell that ran ops. Run it again after editing a lesson script.

A lesson in ONE_CELL keeps its statements in one code cell instead (its first comment block is
the markdown before it; its other comments stay in the cell as comments): at the end of every
cell the simulated engine runs its virtual clock to the end, so a script cut into cells would
run each cell's ops only after the cell before had ended, and what the lesson shows overlapping
(two GPUs' steps, copies under backward) would run one part after another."""
import json
import pathlib

SAMPLES = pathlib.Path(__file__).resolve().parents[1] / "samples"
METADATA = {
    "kernelspec": {"display_name": "dep", "language": "dep", "name": "dep"},
    "language_info": {"name": "dep", "file_extension": ".dep", "mimetype": "text/x-dep",
                      "codemirror_mode": "python", "pygments_lexer": "python"},
}
INTRO = {
    "gpipe": "Run on **simulated devices**: the timeline is on a virtual clock, the same on every machine.",
    "priorities": "Run on **simulated devices**: watch the copy lane and gpu0 in the timeline of each iteration.",
    "two_gpus": "Run on **simulated devices**: two H100-like GPUs on PCIe links, whatever this machine has. "
                "The whole step is one cell: when a cell ends, the virtual clock runs until its ops "
                "have ended, so the ops of two cells never overlap.",
    "data_parallel_lesson": "Run on **4 simulated ranks**: each cell runs on every rank, each a session of "
                     "its own on a virtual clock, in this one kernel; only rank 0 prints, as under "
                     "`mpirun`. The timelines are rank 0's: its CPU workers and its `net` lane.",
    "gpu_sync": "Run on a **simulated GPU**: its host launch lanes (`gpu0:s0`, `gpu0:s1`) and its kernel lanes "
                "(`dev:gpu0:s0`, `dev:gpu0:s1`) on a virtual clock, whatever this machine has.",
}
# The notebook a lesson script becomes, when not its own name.
NOTEBOOK_NAME = {"data_parallel_lesson": "data_parallel"}
# The lessons whose ops must overlap across what would be several cells: one code cell each.
ONE_CELL = {"two_gpus"}
# The engine a lesson runs on, when not `%engine sim`.
ENGINE = {"data_parallel_lesson": "%engine sim --ranks 4"}
# A sentence the student can check against the last timeline.
OUTRO = {
    "gpipe": "Check it against the timeline: the five runs follow one another, 30, 40, 60, 100 and "
             "60 ms long (290 ms in all). In each, `gpu1:s0` starts 10 ms and `gpu2:s0` 20 ms after "
             "`gpu0:s0` while the pipeline fills, and `gpu0:s0` stops 20 ms before `gpu2:s0` while "
             "it drains: those idle corners are the bubble, the same 20 ms whatever m, so a smaller "
             "share of a longer run. Each GPU is busy 66% of the whole (190 of 290 ms), and the last "
             "run, pushed micro-batch by micro-batch, draws the same as the m = 4 one.",
    "two_gpus": "Check it against the timeline: the CPU makes the data and the weights and the "
                "`cpu->gpu` links carry them (fc1's 4 MB weights take 178 µs each way); then "
                "`gpu0:s0` and `gpu1:s0` run their forward and backward at the same time, from "
                "919 µs to 965 µs; `g2_0 = to(wgrad2_0, cpu)` crosses the `gpu0->cpu` link from "
                "950 µs to 961 µs while `wgrad1_0` still computes on `gpu0:s0`, and fc2's new "
                "weights go back to the GPUs at 972 µs, before fc1's update on the CPU has started "
                "(at 1.14 ms); the step takes 2.37 ms.",
    "data_parallel_lesson": "Check it against the two timelines, on one scale: in the first step the "
                            "`net` lane's allreduces run beside the CPU's backward ops (the gradient "
                            "of W2 is summed while dH and gW1 are computed); in the second the "
                            "allreduces of gW2 and gW1 run alone, the CPU idle (only the biases' "
                            "small sums still run beside dH and the updates), and the step takes "
                            "longer: 0.304 ms against 0.235 ms.",
    "priorities": "Check it against the two timelines, drawn on one scale: in the first, gpu0 idles "
                  "until the last parameter has arrived, at 16 ms, and the iteration takes 28 ms; in "
                  "the second, the link sends parameter 0 first, the forward pass starts at 4 ms "
                  "between the transfers, and the iteration takes 19 ms.",
    "gpu_sync": "Check it against the picture: in the first step every bar on `gpu0:s0` and `gpu0:s1` "
                "lasts its 5 µs launch plus its kernel (the host stalls in the synchronization), and "
                "each `dev:` lane is idle for 5 µs before every kernel; in the second step the host "
                "bars are 5 µs launches, the kernels of a `dev:` lane touch each other, and only "
                "`c[0]`, on the CPU, waits for them.",
}


def cells_of(script):
    cells, block, kind = [], [], None
    depth = 0
    for line in script.splitlines():
        if line.startswith("#%") and depth == 0:
            if block:
                cells.append((kind, block))
            cells.append(("code", [line[1:]]))
            block, kind = [], None
            continue
        is_comment = line.startswith("#") and depth == 0
        new_kind = "markdown" if is_comment else "code"
        if line.strip() == "" and depth == 0:
            if block:
                cells.append((kind, block))
            block, kind = [], None
            continue
        if kind is not None and new_kind != kind and depth == 0:
            cells.append((kind, block))
            block = []
        kind = new_kind
        block.append(line[2:] if is_comment else line)
        depth += line.count("{") - line.count("}")
    if block:
        cells.append((kind, block))
    return cells


def one_cell(script):
    """The script's first comment block as markdown, then the rest as one code cell, its comments
    and blank lines kept (a `#%magic` line would still be a cell of its own)."""
    lines = script.splitlines()
    head = 0
    while head < len(lines) and lines[head].startswith("#") and not lines[head].startswith("#%"):
        head += 1
    cells = [("markdown", [line[2:] for line in lines[:head]])] if head else []
    block = []
    for line in lines[head:] + [None]:
        if line is None or line.startswith("#%"):
            while block and not block[-1].strip():
                block.pop()
            while block and not block[0].strip():
                block.pop(0)
            if block:
                cells.append(("code", block))
            if line is not None:
                cells.append(("code", [line[1:]]))
            block = []
        else:
            block.append(line)
    return cells


def notebook(name):
    script = (SAMPLES / f"{name}.dep").read_text()
    cells = [("markdown", [INTRO[name]]), ("code", [ENGINE.get(name, "%engine sim")])]
    cells += one_cell(script) if name in ONE_CELL else cells_of(script)
    if "\n#%" not in script:
        whole = "the whole run" if name in ONE_CELL else "the cell above"
        cells.append(("markdown", [f"The timeline of {whole} (`%timeline` draws the last cell "
                                   "that ran ops), in virtual time:"]))
        cells.append(("code", ["%timeline"]))
    if name in OUTRO:
        cells.append(("markdown", [OUTRO[name]]))
    out = []
    for index, (kind, lines) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"cell-{index}", "metadata": {},
                "source": [line + "\n" for line in lines[:-1]] + [lines[-1]]}
        if kind == "code":
            cell.update({"execution_count": None, "outputs": []})
        out.append(cell)
    return {"cells": out, "metadata": METADATA, "nbformat": 4, "nbformat_minor": 5}


for name in INTRO:
    written = NOTEBOOK_NAME.get(name, name)
    (SAMPLES / f"{written}.ipynb").write_text(json.dumps(notebook(name), indent=1) + "\n")
    print(f"wrote samples/{written}.ipynb")
