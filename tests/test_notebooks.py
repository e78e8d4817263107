"""The course notebooks: each one's MyST source, its paired .ipynb, the course conventions, and a clean run.

Every notebook is one text file ``notebooks/NN_slug.md`` (jupytext's MyST format) paired with a
committed ``notebooks/NN_slug.ipynb`` without outputs.  The tests hold the conventions a teacher
relies on (objectives first, the install cell, exercises with auto-checks and folded solutions,
references last), run every notebook in a fresh kernel in a temporary directory, and check the
exercise checkers of the lessons: the right answer passes, a typical wrong one is explained.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from convviz import exercises

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupytext = pytest.importorskip("jupytext")

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks").glob("*.md"))
NAME = re.compile(r"^(\d\d)_[a-z0-9]+(?:_[a-z0-9]+)*\.md$")
COMPAT = "10_from_tensorflow_mindspore_pytorch"   # the one notebook allowed to draw nothing
EXPLORER = "11_explorer_worksheet"                 # shows widgets and writes explorer.html

INSTALL_CELL = """\
# Set-up: install convviz into this kernel when it is missing (a fresh Colab, Jupyter or VS Code).
# In a clone of the repository it installs that checkout; elsewhere set CONVVIZ to a pip
# requirement, e.g. "convviz" or "git+https://<where the repository lives>".
import importlib.util, pathlib, subprocess, sys
CONVVIZ = "convviz"
if importlib.util.find_spec("convviz") is None:
    here = pathlib.Path.cwd().resolve()
    checkout = next((p for p in (here, *here.parents) if (p / "convviz" / "__init__.py").exists()), None)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", str(checkout or CONVVIZ)])"""

CHECK = re.compile(r"""exercises\.check\(\s*["']([^"']+)["']""")
EXERCISE = re.compile(r"^\*\*Exercise (\d+)\.\*\* \S")
SOLUTION_OPEN = "<details>\n<summary>Solution</summary>\n\n"
SOLUTION_CLOSE = "\n\n</details>"
HIDING_TAGS = {"hide-input", "hide-cell", "remove-input", "remove-cell", "hide-output", "solution"}

ids = [path.stem for path in SOURCES]


def _committed(source: Path):
    """The committed .ipynb paired with ``source``."""
    paired = source.with_suffix(".ipynb")
    assert paired.exists(), f"{paired.name} is missing: jupytext --to ipynb notebooks/{source.name}"
    return nbformat.read(paired, as_version=4)


def _exercises(nb) -> list[tuple[int, str]]:
    """(cell index, exercise name) of every code cell that calls ``exercises.check``."""
    return [(i, name) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for name in CHECK.findall(cell.source)]


# -- the sequence -------------------------------------------------------------------------------

def test_numbers_are_unique_and_consecutive():
    assert SOURCES, "no notebooks/*.md"
    for path in SOURCES:
        assert NAME.match(path.name), f"{path.name}: expected NN_slug.md (two digits, lower-case words)"
    numbers = [int(NAME.match(path.name).group(1)) for path in SOURCES]
    assert len(set(numbers)) == len(numbers), f"a number used twice: {[p.name for p in SOURCES]}"
    assert numbers == list(range(1, len(numbers) + 1)), f"numbers must run 01..{len(numbers):02d}: {numbers}"


def test_every_ipynb_has_its_source():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert path.with_suffix(".md").exists(), f"{path.name} has no MyST source (was it left over?)"


# -- each notebook's form -----------------------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES, ids=ids)
def test_ipynb_is_the_jupytext_conversion_without_outputs(source):
    text = source.read_text(encoding="utf-8")
    assert text.startswith("---\njupytext:\n") and "format_name: myst" in text and "formats: ipynb,md:myst" in text
    fresh = jupytext.reads(text, fmt="md:myst")
    committed = _committed(source)
    shape = lambda nb: [(c.cell_type, c.source) for c in nb.cells]  # noqa: E731
    assert shape(committed) == shape(fresh), \
        f"{source.with_suffix('.ipynb').name} differs from its source: jupytext --to ipynb {source.name}"
    for cell in committed.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "committed with outputs"


@pytest.mark.parametrize("source", SOURCES, ids=ids)
def test_first_cell_has_title_objectives_and_duration(source):
    first = _committed(source).cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert "**You will learn to**" in first.source
    after = first.source.split("**You will learn to**", 1)[1]
    bullets = [line for line in after.splitlines() if line.startswith("- ")]
    assert 2 <= len(bullets) <= 4, f"2-4 learning objectives, got {len(bullets)}"
    assert re.search(r"^\*About \d+ minutes\.\*$", first.source, re.M), "say how long it takes: *About N minutes.*"


@pytest.mark.parametrize("source", SOURCES, ids=ids)
def test_first_code_cell_is_the_install_cell(source):
    code = [c for c in _committed(source).cells if c.cell_type == "code"]
    assert code and code[0].source == INSTALL_CELL


@pytest.mark.parametrize("source", SOURCES, ids=ids)
def test_last_cell_is_references_with_links(source):
    last = _committed(source).cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("## References")
    assert re.search(r"\]\(https?://[^)\s]+\)", last.source), "references need at least one link"


@pytest.mark.parametrize("source", SOURCES, ids=ids)
def test_exercises_are_checked_and_their_solutions_folded(source):
    nb = _committed(source)
    found = _exercises(nb)
    assert len(found) >= 2, "every notebook has at least 2 exercises"
    registered = set(exercises.names())
    numbers = []
    for index, name in found:
        assert name in registered, f"exercises.check({name!r}): no such exercise is registered"
        cell = nb.cells[index]
        assert re.search(r"^answer = None\b", cell.source, re.M), f"{name}: the cell starts from answer = None"
        question = nb.cells[index - 1]
        match = EXERCISE.match(question.source) if question.cell_type == "markdown" else None
        assert match, f"{name}: the cell before is the question, **Exercise N.** ..."
        numbers.append(int(match.group(1)))
        solution = nb.cells[index + 1] if index + 1 < len(nb.cells) else None
        assert solution is not None and solution.cell_type == "markdown", f"{name}: no solution after it"
        assert solution.source.startswith(SOLUTION_OPEN) and solution.source.endswith(SOLUTION_CLOSE), \
            f"{name}: the solution is one <details> block with a blank line after <summary> and before </details>"
        assert "```python\n" in solution.source, f"{name}: the solution shows its code"
    assert numbers == list(range(1, len(numbers) + 1)), f"exercises numbered 1..n in order: {numbers}"


@pytest.mark.parametrize("source", SOURCES, ids=ids)
def test_nothing_hidden_and_no_solution_outside_details(source):
    for cell in _committed(source).cells:
        jupyter = cell.metadata.get("jupyter", {})
        assert not jupyter.get("source_hidden") and not jupyter.get("outputs_hidden"), "a cell hidden by metadata"
        assert not HIDING_TAGS & set(cell.metadata.get("tags", [])), "a cell hidden by a tag"
        if cell.cell_type == "code":
            for line in cell.source.splitlines():
                if re.match(r"\s*answer\s*=", line):
                    assert re.match(r"answer = None\b", line), f"solution code in a code cell: {line!r}"
        elif "```python" in cell.source or re.search(r"^answer\s*=", cell.source, re.M):
            assert cell.source.startswith("<details>"), "solution code outside a <details> block"


# -- each notebook runs -------------------------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES, ids=ids)
def test_notebook_runs(source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # notebooks write nothing into the repository
    nb = _committed(source)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first error
    seconds = time.perf_counter() - start
    assert seconds < 180, f"{source.stem} took {seconds:.0f} s (aim for under 60 s)"
    outputs = [(c, o) for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for _, o in outputs if o.output_type == "error"]
    for index, name in _exercises(nb):  # the placeholder answer is a gentle "Not yet", never an error
        printed = "".join(o.get("text", "") for o in nb.cells[index].outputs)
        assert "Not yet: write your prediction" in printed, f"{name}: {printed!r}"
    images = sum("image/png" in o.get("data", {}) for _, o in outputs)
    if source.stem != COMPAT:
        assert images >= 1, "a lesson that draws nothing"
    if source.stem == EXPLORER:
        explorers = [c for c in nb.cells if c.cell_type == "code" and "convviz.explore(" in c.source]
        for cell in explorers:
            assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs), \
                f"an explorer cell shows no widget: {cell.source!r}"
        assert len(explorers) >= 4
        assert (tmp_path / "explorer.html").stat().st_size > 20_000


# -- the checkers of every lesson -----------------------------------------------------------------

# (exercise, the right answer as a learner types it, a typical wrong answer, words of its explanation)
CHECKER_CASES = [
    ("l01-output-size", (2, 3), (3, 3), "VALID: windows start"),
    ("l01-worked-sum", 16, 4, "flipped"),
    ("l01-no-gradient", {3, 7, 8, 9}, {3, 7}, "also get no gradient"),
    ("l01-2d-shape", (4, 3), (3, 3), "VALID's shape"),
    ("l02-shape", (9, 25), (25, 9), "transposed"),
    ("l02-nonzeros", (4, 9), (9, 9), "padding"),
    ("l02-zero-columns", {3, 7, 11, 12, 13, 14, 15}, {12, 13, 14, 15}, "column 3"),
    ("l03-same-output-size", 3, 2, "VALID's count"),
    ("l03-lost-rows", {6}, set(), "left over"),
    ("l03-depthwise-tap", 108, 54, "tap (0, 0)"),
    ("l04-corner-taps", 4, 9, "land in the padding"),
    ("l04-max-coverage", 4, 2, "2 x 2"),
    ("l04-even-kernels", {3, 6, 9}, {1, 3, 6, 9}, "kernel 1"),
    ("l05-same-pads", (0, 1), (1, 0), "at the bottom"),
    ("l05-asymmetric-sizes", {4, 6, 8, 10, 12}, {5, 7, 9, 11}, "the other way round"),
    ("l05-lost-rows-stride5", {3, 4, 8, 9}, {8, 9}, "between two windows"),
    ("l06-dilated-span", 7, 9, "taps are 3 apart"),
    ("l06-lossy-pairs", {(2, 2), (2, 4), (3, 3), (4, 1), (4, 2), (4, 3), (4, 4)},
     {(2, 2), (2, 4), (3, 3), (4, 2), (4, 4)}, "stride 4 loses rows"),
    ("l06-covering-stacks", {(1, 2, 3), (1, 2, 4), (1, 3, 9)}, {(1, 2, 3), (1, 2, 4), (1, 3, 9), (1, 4, 7)},
     "the gap at 3"),
    ("l08-cells-per-tap", 16, 9, "taps in one window"),
    ("l08-tap-rows", [1, 3, 5, 7], [0, 2, 4, 6], "tap row 0"),
    ("l08-dw-shape", (3, 3, 3, 2), (3, 3, 3, 6), "dense conv2d filter"),
    ("l10-ms-weight-shape", (8, 4, 3, 3), (3, 3, 4, 8), "HWIO"),
    ("l10-same-as-pairs", [[0, 0], [0, 1], [0, 1], [0, 0]], [[0, 0], [1, 1], [1, 1], [0, 0]], "shifts every window"),
    ("l10-ambiguous-sizes", {9, 10}, {10}, "output_padding"),
    ("l11-lit-cells", 4, 1, "2 x 2"),
    ("l11-padding-sides", (0, 1, 0, 1), (1, 1, 1, 1), "symmetric padding"),
    ("l11-no-gradient-rows", {6, 7}, {7}, "row 6 is not read"),
    ("l11-tap-lattice", 16, 25, "read padding"),
    ("l07-shapes", ((2, 6, 6, 3), (3, 3, 3, 4)), ((2, 3, 3, 4), (3, 3, 3, 4)), "shape of y"),
    ("l07-one-tap", 2, 14, "rotated by 180"),
    ("l07-terms", 8, 18, "SAME pads"),
    ("l09-output-size", 13, 12, "forgets output_padding"),
    ("l09-tf-sizes", {7, 8}, {8}, "so does 7"),
    ("l09-checkerboard", {(2, 3), (3, 2), (4, 3), (5, 2)}, {(3, 2), (4, 3), (5, 2)}, "shorter than the stride"),
    ("l12-shape-after-stride2", (32, 4, 4, 16), (32, 8, 8, 16), "stride 2 moves"),
    ("l12-parameter-count", 3818, 2810, "one 3 x 3 slice per input channel"),
    ("l12-initial-loss", 2.30, 0.1, "a probability"),
    ("l12-receptive-field", 25, 9, "what conv1 alone sees"),
]
LESSONS = tuple(f"l{n:02d}-" for n in range(1, 13))


def test_every_exercise_of_these_lessons_has_a_checker_case():
    ours = {name for name in exercises.names() if name.startswith(LESSONS)}
    assert ours == {case[0] for case in CHECKER_CASES}


@pytest.mark.parametrize(("name", "right", "wrong", "because"), CHECKER_CASES, ids=[c[0] for c in CHECKER_CASES])
def test_checker_says_right_and_explains_a_typical_mistake(name, right, wrong, because, capsys):
    assert exercises.check(name, right) is True
    assert capsys.readouterr().out.startswith("Right: ")
    assert exercises.check(name, wrong) is False
    out = capsys.readouterr().out
    assert out.startswith("Not yet: ") and because in out, out
    assert exercises.check(name, None) is False
    assert capsys.readouterr().out.startswith("Not yet: write your prediction")
