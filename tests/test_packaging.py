"""What a normal install gets: the packages setuptools finds, the package data the
wheel carries, and an sdist with the build's sources and none of its outputs.

The whole check, a wheel built from the sdist and installed into a fresh
environment, is ``scripts/smoke_installed.py``, run by ``.ci/run`` after the tests;
these tests hold the configuration it relies on in the inner loop (the sdist's
takes some seconds: building it runs setup.py, which Cythonizes every module).
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not (ROOT / "pyproject.toml").exists() or shutil.which("git") is None
                                or not (ROOT / ".git").exists(), reason="needs the git checkout")


def _tracked(*paths: str) -> list[str]:
    return subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def _config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["tool"]["setuptools"]


def test_every_folder_of_modules_is_a_found_package():
    """setuptools' discovery, as pyproject.toml configures it, finds a package for
    every folder of convviz/ that holds a module, and nothing else."""
    from setuptools import find_packages

    find = _config()["packages"]["find"]
    found = set(find_packages(where=str(ROOT / find["where"][0]), include=find["include"]))
    folders = {str(Path(path).parent).replace("/", ".") for path in _tracked("convviz")
               if path.endswith((".py", ".pyx"))}
    assert folders - found == set(), f"folders of modules with no __init__.py (left out of the wheel): " \
                                     f"{sorted(folders - found)}"
    assert found - folders == set(), f"packages with no module of their own: {sorted(found - folders)}"
    assert "convviz.exercises" in found  # the course's checkers (issue 34: once left out by a hand-kept list)


def test_every_file_that_is_not_python_is_package_data():
    """Every tracked file of convviz/ that is not a Python module or a Cython
    source (typed stubs, py.typed, CUDA sources, the explorer's assets) matches a
    package-data pattern, so it is in the wheel."""
    patterns = _config()["package-data"]
    data = [path for path in _tracked("convviz") if not path.endswith((".py", ".pyx"))]
    assert any(path.endswith(".cu") for path in data) and any(path.endswith(".js") for path in data)
    for path in data:
        package = str(Path(path).parent).replace("/", ".")
        globs = patterns.get("*", []) + patterns.get(package, [])
        assert any(fnmatch.fnmatch(Path(path).name, glob) for glob in globs), \
            f"{path} matches no package-data pattern of {package} ({globs}): a wheel would lack it"


@pytest.mark.skipif(os.environ.get("CONVVIZ_SKIP_SDIST") == "1", reason="CONVVIZ_SKIP_SDIST=1")
def test_sdist_holds_the_sources_and_no_build_outputs(tmp_path):
    """The sdist, built from a copy of the checkout's tracked files, holds every
    tracked file of convviz/ (the .pyx too), the C++ kernel library, the tests and
    the notebooks, and nothing a build writes (Cython's C++, compiled modules)."""
    pytest.importorskip("Cython")
    pytest.importorskip("build")
    source = tmp_path / "src"
    for path in _tracked():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, source / path)
    built = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir",
                            str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,) = (tmp_path / "dist").glob("convviz-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    top = names[0].split("/")[0]
    inside = {name[len(top) + 1:] for name in names}
    wanted = _tracked("convviz", "_ext", "tests", "notebooks") + ["setup.py", "pyproject.toml", "MANIFEST.in"]
    missing = sorted(set(wanted) - inside)
    assert not missing, f"the sdist lacks {missing}"
    generated = sorted(name for name in inside if name.startswith("convviz/")
                       and name.endswith((".c", ".cpp", ".html", ".so", ".pyd", ".pyc")))
    assert not generated, f"the sdist ships build outputs: {generated}"
