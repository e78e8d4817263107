"""Smoke test of convviz as users install it: a wheel in a fresh environment.

Run it with the Python of an environment where the wheel (not the checkout) is
installed, from a folder outside the checkout::

    python scripts/smoke_installed.py --source CHECKOUT --wheel dist/convviz-*.whl \
        --sdist dist/convviz-*.tar.gz

What a user needs is listed from the checkout (``git ls-files``), never from the
wheel itself, so a module or file left out of the wheel fails here:

1. the wheel and the sdist hold what they must: compiled kernels for every
   ``.pyx`` and every package file in the wheel; the Cython and C++ sources, and
   none of what a build generates, in the sdist;
2. convviz is imported from this environment, every module of the checkout
   imports, and each op computes (its small example against the float64
   reference);
3. ``convviz.show_versions()`` prints, ``convviz demo`` and ``convviz page``
   write their files;
4. one course notebook runs end to end in a fresh kernel of this environment.

Each step prints its time; the exit status is 0 only when all pass.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

# Files of convviz/ that are sources of a build, not part of the installed package.
BUILD_SOURCES = {".pyx"}


def _tracked(source: Path) -> list[str]:
    """Files of convviz/ in the checkout, as paths relative to it (git's list when
    there is one; otherwise every file that is not a build output)."""
    try:
        listed = subprocess.run(["git", "ls-files", "convviz"], cwd=source, capture_output=True, text=True,
                                check=True).stdout.split()
        if listed:
            return sorted(listed)
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = {".so", ".pyd", ".c", ".cpp", ".html", ".pyc"}
    return sorted(str(p.relative_to(source)).replace(os.sep, "/") for p in (source / "convviz").rglob("*")
                  if p.is_file() and p.suffix not in skip and "__pycache__" not in p.parts)


def _module_name(path: str) -> str:
    stem = path.rsplit(".", 1)[0].replace("/", ".")
    return stem[: -len(".__init__")] if stem.endswith(".__init__") else stem


def check_archives(tracked: list[str], wheel: Path, sdist: Path) -> None:
    """The wheel holds every package file and a compiled module per .pyx; the sdist
    holds the build's sources and nothing the build makes."""
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    assert "-py3-none-any" not in wheel.name, f"{wheel.name}: a pure-Python wheel has no kernels"
    wanted = [path for path in tracked if Path(path).suffix not in BUILD_SOURCES]
    missing = [path for path in wanted if path not in in_wheel]
    assert not missing, f"{wheel.name} lacks {len(missing)} file(s) of the checkout: {missing}"
    for pyx in (path for path in tracked if path.endswith(".pyx")):
        stem = pyx[: -len(".pyx")]
        compiled = [name for name in in_wheel if name.startswith(stem + ".") and name.endswith((".so", ".pyd"))]
        assert compiled, f"{wheel.name} has no compiled module for {pyx}"
        if pyx.startswith("convviz/ops/"):  # the build writes each op kernel's stub from its .pyx
            assert stem + ".pyi" in in_wheel, f"{wheel.name} has no type stub for {pyx}"
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        in_sdist = {name[len(top) + 1:] for name in archive.getnames()}
    missing = [path for path in tracked if path not in in_sdist]
    assert not missing, f"{sdist.name} lacks {len(missing)} file(s) of the checkout: {missing}"
    generated = sorted(name for name in in_sdist if name.startswith("convviz/")
                       and (name.endswith((".c", ".cpp", ".html", ".so", ".pyd"))
                            or name.startswith("convviz/ops/_") and name.endswith(".pyi")))
    assert not generated, f"{sdist.name} ships build outputs: {generated}"
    for needed in ("setup.py", "pyproject.toml", "MANIFEST.in", "_ext/cvz_common.hpp", "_ext/_cvz.pxd",
                   "_ext/pyx_stubs.py"):
        assert needed in in_sdist, f"{sdist.name} lacks {needed}"
    print(f"  wheel {wheel.name}: {len(in_wheel)} files, {wheel.stat().st_size / 1024:.0f} KiB; "
          f"sdist {sdist.name}: {len(in_sdist)} entries, {sdist.stat().st_size / 1024:.0f} KiB")


def check_imports(tracked: list[str], source: Path) -> None:
    """convviz comes from this environment, every module imports, every op computes."""
    import numpy as np

    import convviz

    here = Path(convviz.__file__).resolve().parent
    assert not here.is_relative_to(source.resolve()), f"convviz was imported from the checkout: {here}"
    assert Path(sys.prefix).resolve() in here.parents, f"convviz is not in this environment ({sys.prefix}): {here}"
    modules = sorted({_module_name(path) for path in tracked if path.endswith((".py", ".pyx"))})
    failed, compiled = {}, []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as err:  # every failure is reported, not just the first
            failed[name] = f"{type(err).__name__}: {err}"
            continue
        assert Path(module.__file__).resolve().is_relative_to(here), f"{name} from {module.__file__}"
        if Path(module.__file__).suffix in (".so", ".pyd"):
            compiled.append(name)
    assert not failed, "modules that do not import:\n" + "\n".join(f"  {k}: {v}" for k, v in failed.items())
    from convviz.ops import OPS

    rng = np.random.default_rng(0)
    for op in OPS:
        args = op.example(rng, np.float32, "NHWC", (2, 1), (1, 2), "SAME")
        got, exact = op.run(*args, None), op.reference(*args)
        np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max(), err_msg=op.name)
    print(f"  {len(modules)} modules import from {here} ({len(compiled)} compiled); "
          f"{len(OPS)} ops match the reference")


def check_commands(work: Path) -> None:
    """show_versions prints; `convviz demo` and `convviz page` write their files."""
    import convviz

    convviz.show_versions()
    if os.environ.get("CONVVIZ_ALLOW_SERIAL_BUILD") != "1":
        assert convviz.openmp_enabled(), "the wheel was built without OpenMP"
    command = Path(sys.executable).with_name("convviz")
    assert command.exists(), f"no `convviz` command beside {sys.executable}"
    demo = work / "demo"
    subprocess.run([str(command), "demo", "--out", str(demo)], check=True, cwd=work, timeout=600)
    for name in ("input_gradient.gif", "input_gradient.html", "coverage.png", "scatter.png", "explorer.html"):
        assert (demo / name).stat().st_size > 1000, f"convviz demo wrote no {name}"
    page = work / "page" / "explorer.html"
    subprocess.run([str(command), "page", "--out", str(page), "--input", "9", "--stride", "2"], check=True,
                   cwd=work, timeout=300)
    text = page.read_text(encoding="utf-8")
    assert "<script" in text and len(text) > 20_000, f"{page}: {len(text)} characters, no script"


def check_notebook(notebook: Path, work: Path) -> None:
    """The notebook runs end to end in a fresh kernel of this environment, in a
    folder of its own outside the checkout."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    # First, prove the kernel is this environment's and uses the installed package.
    probe = ("import sys, pathlib, convviz\n"
             f"assert pathlib.Path(sys.prefix).resolve() == pathlib.Path({sys.prefix!r}).resolve(), sys.prefix\n"
             f"assert pathlib.Path({sys.prefix!r}).resolve() in pathlib.Path(convviz.__file__).resolve().parents\n")
    nb.cells.insert(0, nbformat.v4.new_code_cell(probe))
    folder = work / "notebook"
    folder.mkdir()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    errors = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert not errors, errors
    print(f"  {notebook.name}: {sum(c.cell_type == 'code' for c in nb.cells)} code cells ran")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="the checkout the wheel was built from")
    parser.add_argument("--wheel", type=Path, required=True)
    parser.add_argument("--sdist", type=Path, required=True)
    parser.add_argument("--notebook", default="05_padding_and_lost_rows.ipynb",
                        help="the course notebook to run (in the checkout's notebooks/)")
    args = parser.parse_args()
    source = args.source.resolve()
    tracked = _tracked(source)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="convviz-smoke-") as tmp:
        work = Path(tmp)
        steps = [
            ("wheel and sdist contents", lambda: check_archives(tracked, args.wheel, args.sdist)),
            ("imports and ops", lambda: check_imports(tracked, source)),
            ("show_versions, convviz demo, convviz page", lambda: check_commands(work)),
            (f"notebook {args.notebook}", lambda: check_notebook(source / "notebooks" / args.notebook, work)),
        ]
        for title, step in steps:
            began = time.perf_counter()
            print(f"smoke: {title}", flush=True)
            step()
            print(f"smoke: {title}: ok in {time.perf_counter() - began:.1f} s", flush=True)
    print(f"smoke: the installed wheel passed in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
