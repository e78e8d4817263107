"""The CUDA kernels compile (with nvcc, when this machine has it) for every dtype they serve.

CuPy compiles the same source with NVRTC on a GPU machine; this catches a broken
kernel on machines without a GPU.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

def _source_and_instantiations() -> tuple[str, str]:
    from convviz._backends import cuda
    from cupy_emulator import instantiation, kernel_signatures

    code = cuda.source()
    signatures = kernel_signatures(code)
    lines = []
    for expression in cuda.kernel_names():
        kernel, type_code = expression[:-3], int(expression[-2])
        name, types = instantiation(kernel, signatures[kernel], type_code)
        concrete = ", ".join(t.replace(f"typename IO<{type_code}>::", f"IO<{type_code}>::") for t in types)
        lines.append(f"template __global__ void {name}({concrete});")
    return code, "\n".join(lines)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_cuda_kernels_compile(tmp_path):
    code, instantiations = _source_and_instantiations()
    wrapper = tmp_path / "check.cu"
    wrapper.write_text(f"{code}\n{instantiations}")
    result = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_80", "-c", str(wrapper), "-o", str(tmp_path / "k.o")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_source_is_installed_with_the_package():
    from convviz._backends import cuda
    from convviz.ops import OPS

    assert cuda.COMMON.exists()
    code = cuda.source()
    for op in OPS:  # every op's kernels are declared, and their source is in the module
        assert any(name.split("<")[0] in code for name in cuda.kernel_names())


def test_every_declared_kernel_is_in_the_source_with_an_instantiation_per_name():
    code, instantiations = _source_and_instantiations()
    from convviz._backends import cuda

    names = cuda.kernel_names()
    assert len(instantiations.splitlines()) == len(names) == len(set(names)) > 0
    assert "template __global__ void input_grad<2>(const IO<2>::storage*, const IO<2>::storage*, " \
           "IO<2>::storage*, const i64*, i64);" in instantiations
