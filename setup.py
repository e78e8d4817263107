"""Build the convviz Cython kernels.

Each op's kernel module sits beside its Python wrapper (``convviz/ops/``); the
portable C++ kernel library it links lives in ``_ext/`` (headers, one .cpp per
op, and the shared .pxd files on Cython's include path).  The project's own C++
(``_ext/*.cpp``) is compiled with warnings as errors (``-Wall -Wextra -Werror``;
set ``CONVVIZ_WERROR=0`` to relax that with a compiler newer than the code);
the Cython-generated C++ keeps the normal flags.

OpenMP is probed at build time: when the compiler can build and link a small
OpenMP program, the kernels are compiled with ``-fopenmp`` and run their
``prange`` loops in parallel with the GIL released.  Otherwise the build goes on
serially and says so with a warning; ``convviz.show_versions()`` reports which
build is installed.  Set ``CONVVIZ_DISABLE_OPENMP=1`` to force the serial build.

The modules are compiled in parallel on every core (``CONVVIZ_BUILD_JOBS=N`` sets
how many at once), at ``-O3`` (``CONVVIZ_OPTIMIZE=-O1`` for a sanitizer build) and
without debug info unless ``build_ext --debug`` or ``CONVVIZ_DEBUG_INFO=1`` asks for it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import tempfile
import textwrap
import warnings

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.modified import newer_group
except ImportError:  # setuptools < 69
    from distutils.dep_util import newer_group

HERE = os.path.dirname(os.path.abspath(__file__))
EXT_DIR = "_ext"

sys.path.insert(0, os.path.join(HERE, EXT_DIR))
from pyx_stubs import stub_text  # noqa: E402 -- the build's own helper, beside the kernels

sys.path.pop(0)

# Extension modules: every .pyx under convviz/, named by its path
# (convviz/ops/_input_grad.pyx -> convviz.ops._input_grad).  The project's own C++
# it links is named in the .pyx itself, on a line "# C++ (in _ext/): a.cpp b.cpp".
# A new op's .pyx needs no line here.
_CPP_LINE = re.compile(r"^# C\+\+ \(in _ext/\):(.*)$", re.MULTILINE)


def _discover_extensions() -> dict[str, tuple[str, list[str]]]:
    found = {}
    for pyx in sorted(glob.glob(os.path.join("convviz", "**", "*.pyx"), recursive=True)):
        with open(pyx, encoding="utf-8") as handle:
            own = _CPP_LINE.search(handle.read())
        name = os.path.splitext(pyx)[0].replace(os.sep, ".")
        found[name] = (pyx.replace(os.sep, "/"), own.group(1).split() if own else [])
    return found


EXTENSIONS = _discover_extensions()

# Where the op modules were built before they moved beside their wrappers:
# in-place and editable builds delete copies left there, so none is imported.
STALE = ["convviz/_input_grad", "convviz/_depthwise_filter_grad"]

HEADERS = sorted(glob.glob(os.path.join(EXT_DIR, "*.hpp")) + glob.glob(os.path.join(EXT_DIR, "*.pxd"))
                 + glob.glob(os.path.join(EXT_DIR, "*.pxi")))

OPENMP_PROBE = textwrap.dedent(
    """
    #include <omp.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel reduction(+:n)
        n += 1;
        return n > 0 ? 0 : 1;
    }
    """
)


def _env_flag(name: str, default: bool) -> bool:
    """A CONVVIZ_* switch: on unless unset-and-off-by-default, empty or "0"."""
    value = os.environ.get(name)
    return default if value is None else value.strip() not in ("", "0")


def _openmp_flags(compiler) -> list[str] | None:
    """Return the OpenMP flags that compile and link here, or None."""
    if _env_flag("CONVVIZ_DISABLE_OPENMP", False):
        return None
    if compiler.compiler_type == "msvc":
        candidates = [["/openmp"]]
    else:
        candidates = [["-fopenmp"], ["-Xpreprocessor", "-fopenmp"]]
    workdir = tempfile.mkdtemp(prefix="convviz-openmp-")
    try:
        source = os.path.join(workdir, "probe.c")
        with open(source, "w") as handle:
            handle.write(OPENMP_PROBE)
        for flags in candidates:
            try:
                objects = compiler.compile([source], output_dir=workdir, extra_postargs=flags)
                libs = [] if compiler.compiler_type == "msvc" else flags
                compiler.link_executable(
                    objects, os.path.join(workdir, "probe"), extra_postargs=libs
                )
            except Exception:  # any compile or link failure means "no OpenMP with these flags"
                continue
            return flags
        return None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _strict_flags(compiler) -> list[str]:
    """Warning flags for the project's own C++ (_ext/*.cpp)."""
    werror = _env_flag("CONVVIZ_WERROR", True)
    if compiler.compiler_type == "msvc":
        return ["/W3"]  # not built with /WX here: no MSVC to keep it clean on
    return ["-Wall", "-Wextra"] + (["-Werror"] if werror else [])


class BuildExt(build_ext):
    """build_ext with OpenMP when the compiler has it, and the project's own
    C++ compiled on its own with warnings as errors, then linked in."""

    def finalize_options(self) -> None:
        super().finalize_options()
        # pip and `python -m build` pass no -j: compile the modules on every core
        # (CONVVIZ_BUILD_JOBS=1 for one at a time).
        if not self.parallel:
            jobs = os.environ.get("CONVVIZ_BUILD_JOBS", "").strip()
            if jobs and not jobs.isdigit():
                raise ValueError(f"CONVVIZ_BUILD_JOBS must be a whole number of jobs, got {jobs!r}")
            usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
            self.parallel = int(jobs) if jobs else (usable or 1)
        if self.parallel == 1:
            self.parallel = False  # build_ext's serial path

    def build_extensions(self) -> None:
        flags = _openmp_flags(self.compiler)
        if flags is None:
            warnings.warn(
                "convviz: OpenMP was not found (or CONVVIZ_DISABLE_OPENMP is set); "
                "building serial kernels. convviz.show_versions() will report "
                "'OpenMP: no'.",
                stacklevel=1,
            )
            print("convviz: building WITHOUT OpenMP (serial kernels)", file=sys.stderr)
        else:
            print(f"convviz: building with OpenMP ({' '.join(flags)})", file=sys.stderr)
        # Portable code: no -march=native.  The kernels carry AVX2 and AVX-512
        # variants of their own (_ext/cvz_per_isa.hpp) and pick one at run time.
        # CONVVIZ_OPTIMIZE=-O1: the AddressSanitizer build of the tests (sanitizers' usual
        # level: the same checks, a third of the compile time).
        level = os.environ.get("CONVVIZ_OPTIMIZE", "").strip() or "-O3"
        if not re.fullmatch(r"-O[0-3s]", level):
            raise ValueError(f"CONVVIZ_OPTIMIZE must be -O0, -O1, -O2, -O3 or -Os, got {level!r}")
        optimise = ["/O2", "/std:c++17"] if self.compiler.compiler_type == "msvc" else [level, "-std=c++17"]
        # Python's own CFLAGS often carry -g: debug info would make the modules 30 MB
        # instead of 4.3 (the machine code is the same).  `build_ext --debug` or
        # CONVVIZ_DEBUG_INFO=1 keeps it (a sanitizer's reports need the lines).
        keep_debug = self.debug or _env_flag("CONVVIZ_DEBUG_INFO", False)
        if self.compiler.compiler_type != "msvc" and not keep_debug:
            optimise.append("-g0")
        for ext in self.extensions:
            ext.extra_compile_args = list(ext.extra_compile_args) + optimise + (flags or [])
            ext.extra_link_args = list(ext.extra_link_args) + (flags or [])
        super().build_extensions()

    def run(self) -> None:
        super().run()
        self._write_stubs()
        if self.inplace or getattr(self, "editable_mode", False):
            for stem in STALE:
                pattern = os.path.join(HERE, stem)
                for path in glob.glob(pattern + ".*.so") + glob.glob(pattern + ".*.pyd"):
                    print(f"convviz: removing stale {os.path.relpath(path, HERE)}", file=sys.stderr)
                    os.remove(path)

    def _write_stubs(self) -> None:
        """Each op kernel module's type stub, written from its .pyx (``_ext/pyx_stubs.py``)
        beside the module as built, and (in-place and editable builds) beside the .pyx;
        the machine modules (``convviz/_machine``, ``_openmp_info``) keep hand-written stubs."""
        for ext in self.extensions:
            if not ext.name.startswith("convviz.ops."):
                continue
            pyx = EXTENSIONS[ext.name][0]
            with open(os.path.join(HERE, pyx), encoding="utf-8") as handle:
                text = stub_text(handle.read(), ext.name, include_dir=os.path.join(HERE, EXT_DIR))
            stub = os.path.splitext(pyx)[0] + ".pyi"
            places = [os.path.join(self.build_lib, stub)] + ([os.path.join(HERE, stub)] if self.inplace else [])
            for path in places:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(text)

    def build_extension(self, ext: Extension) -> None:
        own = [os.path.join(EXT_DIR, source) for source in EXTENSIONS[ext.name][1]]
        target = self.get_ext_fullpath(ext.name)
        if self.force or newer_group(list(ext.sources) + list(ext.depends), target, "newer"):
            objects = self.compiler.compile(
                own, output_dir=self.build_temp, macros=ext.define_macros, include_dirs=ext.include_dirs,
                debug=self.debug, extra_postargs=list(ext.extra_compile_args) + _strict_flags(self.compiler),
                depends=ext.depends)
            ext.extra_objects = [o for o in ext.extra_objects if o not in objects] + objects
        super().build_extension(ext)


def _extensions() -> list[Extension]:
    modules = [
        Extension(
            name,
            [pyx],
            language="c++",
            include_dirs=[np.get_include(), EXT_DIR],
            depends=HEADERS + [os.path.join(EXT_DIR, source) for source in own],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        )
        for name, (pyx, own) in EXTENSIONS.items()
    ]
    return cythonize(
        modules,
        include_path=[EXT_DIR],
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "autotestdict": False,  # no __test__ dict: the stubs are the whole API
        },
    )


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
