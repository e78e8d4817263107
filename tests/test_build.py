"""The build: OpenMP compiled in here, and a working serial build without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import convviz

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(os.environ.get("CONVVIZ_ALLOW_SERIAL_BUILD") == "1",
                    reason="CONVVIZ_ALLOW_SERIAL_BUILD=1: a serial build is acceptable here")
def test_openmp_was_compiled_in():
    assert convviz.openmp_enabled(), (
        "convviz was built without OpenMP; install a compiler with OpenMP support or set "
        "CONVVIZ_ALLOW_SERIAL_BUILD=1 to accept the serial build")


def test_show_versions_reports_the_build(capsys):
    convviz.show_versions()
    printed = capsys.readouterr().out
    assert "openmp: yes" in printed or "openmp: no" in printed
    assert convviz.__version__ in printed
    info = convviz.show_versions(as_dict=True)
    assert info["openmp"] == convviz.openmp_enabled()
    assert "cupy" in info


@pytest.mark.skipif(not (ROOT / "setup.py").exists() or shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="needs the source tree and a C compiler")
def test_serial_build_without_openmp_works(tmp_path):
    """CONVVIZ_DISABLE_OPENMP=1 builds serial kernels, warns, and computes the same numbers."""
    pytest.importorskip("Cython")
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(ROOT / "setup.py", source)
    shutil.copy(ROOT / "pyproject.toml", source)
    shutil.copytree(ROOT / "_ext", source / "_ext", ignore=shutil.ignore_patterns("*.c", "*.html"))
    lib = tmp_path / "lib"
    env = dict(os.environ, CONVVIZ_DISABLE_OPENMP="1")
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(lib), "--build-temp",
         str(tmp_path / "tmp")],
        cwd=source, env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "WITHOUT OpenMP" in build.stderr
    assert "-fopenmp" not in build.stdout + build.stderr
    # The Python package next to the serial extension modules.
    shutil.copytree(ROOT / "convviz", lib / "convviz", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    check = r"""
import numpy as np, convviz
from convviz import reference
assert convviz.__file__.startswith(%r), convviz.__file__
assert not convviz.openmp_enabled()
assert convviz.show_versions(as_dict=True)["max_threads"] == 1
rng = np.random.default_rng(0)
f, dy = rng.standard_normal((3, 3, 2, 4)), rng.standard_normal((2, 4, 3, 4))
kw = dict(strides=[1, 2, 2, 1], padding="SAME")
got = convviz.conv2d_backprop_input([2, 7, 5, 2], f, dy, n_threads=4, **kw)
np.testing.assert_allclose(got, reference.conv2d_backprop_input([2, 7, 5, 2], f, dy, **kw), rtol=1e-12)
x = rng.standard_normal((2, 7, 5, 2))
got = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 2, 2], dy, n_threads=4, **kw)
np.testing.assert_allclose(got, reference.depthwise_conv2d_native_backprop_filter(x, [3, 3, 2, 2], dy, **kw), rtol=1e-12)
print("serial ok")
""" % str(lib)
    env = dict(os.environ, PYTHONPATH=str(lib))
    result = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "serial ok" in result.stdout
