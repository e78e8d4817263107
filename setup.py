"""Build the convviz Cython kernels.

OpenMP is probed at build time: when the compiler can build and link a small
OpenMP program, the kernels are compiled with ``-fopenmp`` and run their
``prange`` loops in parallel with the GIL released.  Otherwise the build goes on
serially and says so with a warning; ``convviz.show_versions()`` reports which
build is installed.  Set ``CONVVIZ_DISABLE_OPENMP=1`` to force the serial build.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
import warnings

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

EXT_DIR = "_ext"

# One extension module per .pyx file, with explicit dotted names.
EXTENSIONS = {
    "convviz._openmp_info": "_openmp_info.pyx",
    "convviz._input_grad": "_input_grad.pyx",
    "convviz._depthwise_filter_grad": "_depthwise_filter_grad.pyx",
}

HEADERS = ["cvz_common.hpp", "cvz_body.hpp", "cvz_kernels.hpp", "_cvz.pxd", "_openmp.pxd"]

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


def _openmp_flags(compiler) -> list[str] | None:
    """Return the OpenMP flags that compile and link here, or None."""
    if os.environ.get("CONVVIZ_DISABLE_OPENMP", "").strip() not in ("", "0"):
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


class BuildExtWithOpenMP(build_ext):
    """build_ext that adds OpenMP flags when the compiler supports them."""

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
        # variants of their own (cvz_kernels.hpp) and pick one at run time.
        optimise = ["/O2", "/std:c++17"] if self.compiler.compiler_type == "msvc" else ["-O3", "-std=c++17"]
        for ext in self.extensions:
            ext.extra_compile_args = list(ext.extra_compile_args) + optimise + (flags or [])
            ext.extra_link_args = list(ext.extra_link_args) + (flags or [])
        super().build_extensions()


def _extensions() -> list[Extension]:
    modules = [
        Extension(
            name,
            [os.path.join(EXT_DIR, source)],
            language="c++",
            include_dirs=[np.get_include(), EXT_DIR],
            depends=[os.path.join(EXT_DIR, header) for header in HEADERS],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        )
        for name, source in EXTENSIONS.items()
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
        },
    )


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExtWithOpenMP})
