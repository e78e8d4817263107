"""Every tutorial notebook runs top to bottom, and the committed notebooks carry no stale outputs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _generator():
    spec = importlib.util.spec_from_file_location("make_notebooks", ROOT / "scripts" / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_enough_tutorials():
    assert len(NOTEBOOKS) >= 6
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


def test_committed_notebooks_are_the_generators_output_without_outputs(tmp_path):
    written = _generator().build(tmp_path)
    assert sorted(p.name for p in written) == [p.name for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        committed = json.loads(path.read_text())
        fresh = json.loads((tmp_path / path.name).read_text())
        strip = lambda nb: [{k: v for k, v in c.items() if k != "id"} for c in nb["cells"]]  # noqa: E731
        assert strip(committed) == strip(fresh), f"{path.name} differs from scripts/make_notebooks.py"
        for cell in committed["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None


def test_exercises_have_hidden_solutions():
    with_exercises = 0
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
        for cell in solutions:
            assert cell.metadata["jupyter"]["source_hidden"] is True
        with_exercises += bool(solutions)
    assert with_exercises >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # notebooks write nothing into the repository
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    if path.name not in ("06_from_tensorflow_and_mindspore.ipynb", "07_speed.ipynb", "08_explorer.ipynb"):
        assert images >= 1, "a tutorial that draws nothing"
    if path.name == "08_explorer.ipynb":
        widgets = sum("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                      for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert widgets == 4, "every explorer cell shows the anywidget"
        assert (tmp_path / "explorer.html").stat().st_size > 20_000
