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


def _asan_runtime() -> str | None:
    """Path of gcc's AddressSanitizer runtime, or None when there is none."""
    compiler = shutil.which("gcc")
    if compiler is None:
        return None
    found = subprocess.run([compiler, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    return found if os.path.isabs(found) and os.path.exists(found) else None


@pytest.mark.skipif(not (ROOT / "setup.py").exists() or shutil.which("gcc") is None,
                    reason="needs the source tree and gcc")
def test_serial_sanitized_build(tmp_path):
    """A serial build (CONVVIZ_DISABLE_OPENMP=1) warns, reports no OpenMP, and computes
    the same numbers; built with AddressSanitizer (when gcc has it), the kernel tests
    run clean: no out-of-bounds read or write in any SIMD variant."""
    pytest.importorskip("Cython")
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(ROOT / "setup.py", source)
    shutil.copy(ROOT / "pyproject.toml", source)
    shutil.copytree(ROOT / "_ext", source / "_ext", ignore=shutil.ignore_patterns("*.c", "*.cpp", "*.html"))
    lib = tmp_path / "lib"
    asan = _asan_runtime()
    env = dict(os.environ, CONVVIZ_DISABLE_OPENMP="1")
    if asan:
        env["CFLAGS"] = "-fsanitize=address -fno-omit-frame-pointer"
        env["LDFLAGS"] = "-fsanitize=address"
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(lib), "--build-temp",
         str(tmp_path / "tmp")],
        cwd=source, env=env, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "WITHOUT OpenMP" in build.stderr
    # The Python package next to the serial extension modules.
    shutil.copytree(ROOT / "convviz", lib / "convviz", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    run_env = dict(os.environ, PYTHONPATH=str(lib), ASAN_OPTIONS="detect_leaks=0")
    if asan:
        run_env["LD_PRELOAD"] = asan
    check = (
        "import convviz; assert convviz.__file__.startswith(%r), convviz.__file__;"
        "assert not convviz.openmp_enabled(); assert convviz.show_versions(as_dict=True)['max_threads'] == 1;"
        "print('serial ok')" % str(lib)
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=run_env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "serial ok" in result.stdout
    tests = [str(ROOT / "tests" / name) for name in
             ("test_kernels.py", "test_conversions.py", "test_oracle.py", "test_inputs.py", "test_errors.py")]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=", *tests],
        cwd=tmp_path, env=dict(run_env, CONVVIZ_ALLOW_SERIAL_BUILD="1"), capture_output=True, text=True,
        timeout=900)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert "passed" in result.stdout and "ERROR: AddressSanitizer" not in result.stderr
