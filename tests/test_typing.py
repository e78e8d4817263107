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


def _stub_text():
    sys.path.insert(0, str(ROOT / "_ext"))
    try:
        from pyx_stubs import stub_text
    finally:
        sys.path.pop(0)
    return stub_text


def test_the_build_writes_each_op_kernel_stub_from_its_pyx():
    """An op has no stub to keep by hand: the one beside its kernel is what
    _ext/pyx_stubs.py makes of the .pyx (the build wrote it)."""
    stub_text = _stub_text()
    for pyx in sorted(ROOT.glob("convviz/ops/_*.pyx")):
        module = str(pyx.relative_to(ROOT).with_suffix("")).replace("/", ".")
        assert pyx.with_suffix(".pyi").read_text() == stub_text(pyx.read_text(), module, str(ROOT / "_ext")), pyx.name


@pytest.mark.parametrize("source, complaint", [
    ("def f(cnp.ndarray a):\n    pass\n", "needs a return annotation"),
    ("def f(a) -> int:\n    pass\n", "has no Cython type"),
    ("def f(float[:] a) -> int:\n    pass\n", "no stub type for Cython type 'float[:]'"),
])
def test_the_stub_writer_refuses_what_it_cannot_type(source, complaint):
    with pytest.raises(ValueError, match=complaint.replace("[", r"\[").replace("]", r"\]")):
        _stub_text()(source, "m")
