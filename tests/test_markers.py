"""The markers of tests/conftest.py name files and tests that exist, and the fast loop they
define leaves out what it says it leaves out."""

from __future__ import annotations

import ast
from pathlib import Path

import conftest

TESTS = Path(__file__).parent


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_marked_file_and_test_exists():
    for name in conftest.FILE_MARKERS:
        assert (TESTS / name).is_file(), f"conftest.FILE_MARKERS names {name}, which is not in tests/"
    for (name, test), _ in conftest.TEST_MARKERS.items():
        assert test in _test_functions(TESTS / name), f"conftest.TEST_MARKERS: no {test} in tests/{name} (renamed?)"
    for name in conftest.LONGEST_FIRST:  # the order xdist hands files out in
        assert (TESTS / name).is_file(), f"conftest.LONGEST_FIRST names {name}, which is not in tests/"
    assert len(set(conftest.LONGEST_FIRST)) == len(conftest.LONGEST_FIRST)


def test_the_longest_files_come_first(request):
    """Collected in LONGEST_FIRST's order, the rest after them: under `-n auto` no long file
    starts last."""
    files = list(dict.fromkeys(item.path.name for item in request.session.items))
    ranked = [name for name in files if name in conftest.LONGEST_FIRST]
    assert files[:len(ranked)] == ranked
    assert ranked == [name for name in conftest.LONGEST_FIRST if name in ranked]


def test_markers_are_the_registered_ones(pytestconfig):
    registered = {line.split(":")[0].strip() for line in pytestconfig.getini("markers")}
    used = {m for marks in conftest.FILE_MARKERS.values() for m in marks}
    used |= {m for marks in conftest.TEST_MARKERS.values() for m in marks}
    assert used <= registered, used - registered
    assert {"slow", "build", "browser", "docs", "notebooks", "gpu"} <= registered


def test_the_fast_loop_leaves_out_the_browser_and_build_suites():
    # Every test file that launches Chromium or a compiler run is marked (by file or by test).
    for path in TESTS.glob("test_*.py"):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        if "sync_playwright" in text and path.name not in conftest.FILE_MARKERS:
            browser_tests = {t for (f, t), marks in conftest.TEST_MARKERS.items() if f == path.name and "browser" in marks}
            assert browser_tests, f"{path.name} drives Chromium but carries no browser marker"
