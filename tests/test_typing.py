"""The package type-checks: mypy over convviz/ (config in pyproject.toml), the
compiled kernels seen through their .pyi stubs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_passes_over_the_package():
    pytest.importorskip("mypy", reason="mypy is a dev dependency (pip install -e '.[dev]')")
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_every_compiled_module_has_a_stub():
    sources = sorted(ROOT.glob("convviz/**/*.pyx"))
    assert sources, "the kernels' .pyx files live beside the Python that wraps them"
    missing = [str(p.relative_to(ROOT)) for p in sources if not p.with_suffix(".pyi").exists()]
    assert not missing, f"compiled modules without a .pyi stub: {missing}"
