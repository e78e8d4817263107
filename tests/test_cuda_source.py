"""The CUDA kernels compile (with nvcc, when this machine has it) for every dtype they serve.

CuPy compiles the same source with NVRTC on a GPU machine; this catches a broken
kernel on machines without a GPU.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "convviz" / "_backends" / "cuda_kernels.cu"

INSTANTIATIONS = """
template __global__ void input_grad<0>(const __half*, const __half*, __half*, const i64*, i64);
template __global__ void input_grad<1>(const unsigned short*, const unsigned short*, unsigned short*, const i64*, i64);
template __global__ void input_grad<2>(const float*, const float*, float*, const i64*, i64);
template __global__ void input_grad<3>(const double*, const double*, double*, const i64*, i64);
template __global__ void input_grad<4>(const unsigned int*, const unsigned int*, unsigned int*, const i64*, i64);
template __global__ void depthwise_filter_grad_partial<0>(const __half*, const __half*, float*, const i64*);
template __global__ void depthwise_filter_grad_partial<1>(const unsigned short*, const unsigned short*, float*, const i64*);
template __global__ void depthwise_filter_grad_partial<2>(const float*, const float*, float*, const i64*);
template __global__ void depthwise_filter_grad_partial<3>(const double*, const double*, double*, const i64*);
template __global__ void depthwise_filter_grad_merge<0>(const float*, __half*, i64, i64);
template __global__ void depthwise_filter_grad_merge<1>(const float*, unsigned short*, i64, i64);
template __global__ void depthwise_filter_grad_merge<2>(const float*, float*, i64, i64);
template __global__ void depthwise_filter_grad_merge<3>(const double*, double*, i64, i64);
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_cuda_kernels_compile(tmp_path):
    wrapper = tmp_path / "check.cu"
    wrapper.write_text(f'#include "{SOURCE}"\n{INSTANTIATIONS}')
    result = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_80", "-c", str(wrapper), "-o", str(tmp_path / "k.o")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_source_is_installed_with_the_package():
    from convviz._backends import cuda

    assert cuda.SOURCE.exists() and "input_grad" in cuda.SOURCE.read_text()
