"""The build: OpenMP compiled in here, a working serial build without it, the
project's own C++ (_ext/*.cpp) warning-free under -Wall -Wextra -Werror with
g++ (the normal build) and clang++ (a second, serial build under AddressSanitizer),
and typed stubs that match the compiled modules."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap
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
    assert f"location: {os.path.dirname(convviz.__file__)}" in printed
    from convviz._info import cpu_model_and_flags

    from convviz._backends import cpu

    has_amx = any(flag.startswith("amx_") and flag != "amx_tile" for flag in cpu_model_and_flags()[1])
    assert printed.count("amx: ") == 1
    amx = convviz.show_versions(as_dict=True)["amx"]
    # "yes: ..." where bfloat16 runs on the tiles, else "no: " and why; the CPU's tiles named either way.
    assert amx.startswith("yes: the CPU has AMX" if cpu.amx_in_use() else "no: ")
    assert ("the CPU has AMX" in amx) == has_amx
    info = convviz.show_versions(as_dict=True)
    assert info["openmp"] == convviz.openmp_enabled()
    assert "cupy" in info
    from convviz._backends import cpu

    assert info["fast_bf16"].startswith("AVX512_BF16") == cpu.bf16_dot_in_use()
    assert info["fast_f16"].startswith("AVX512_FP16") == cpu.f16_fma_in_use()
    if "avx2" in convviz._openmp_info.available_isas():
        with cpu.use_isa("avx2"):  # the fast paths run only with the AVX-512 kernels
            assert convviz.show_versions(as_dict=True)["fast_bf16"].startswith("no: ")
            assert convviz.show_versions(as_dict=True)["fast_f16"].startswith("no: ")


def _asan_runtime() -> str | None:
    """Path of clang's shared AddressSanitizer runtime, or None when it has none (its
    name: -<arch> in the old layout of LLVM's runtimes, plain in the per-target one)."""
    for name in (f"libclang_rt.asan-{platform.machine()}.so", "libclang_rt.asan.so"):
        found = subprocess.run(["clang", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if os.path.isabs(found) and os.path.exists(found):
            return found
    return None


# Under convviz/, everything a build writes (Cython's C++ and HTML, modules).
BUILD_OUTPUTS = ("*.so", "*.pyd", "*.c", "*.cpp", "*.html", "__pycache__")


def _build_copy(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    """Build a copy of the sources into tmp_path/lib (extension modules beside a
    copy of the Python package); return lib and the build's output."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "_ext", source / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "convviz", source / "convviz", ignore=shutil.ignore_patterns(*BUILD_OUTPUTS))
    lib = tmp_path / "lib"
    build = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "-j", "2", "--build-lib", str(lib), "--build-temp",
         str(tmp_path / "tmp")],
        cwd=source, env=env, capture_output=True, text=True, timeout=900)
    log = build.stdout + build.stderr
    assert build.returncode == 0, log[-4000:]
    shutil.copytree(source / "convviz", lib / "convviz", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(*BUILD_OUTPUTS))
    return lib, log


def _assert_own_code_strict_and_clean(log: str, compiler: str) -> None:
    """Every _ext/*.cpp was compiled by `compiler` with -Wall -Wextra -Werror, and
    the whole build printed no warning from an _ext/ file."""
    own = [line for line in log.splitlines() if re.search(r"\s-c\s+_ext[/\\]\w+\.cpp\b", line)]
    # Every file at least once (cvz_isa.cpp is linked into several modules).
    compiled = {re.search(r"_ext[/\\](\w+)\.cpp", line).group(1) for line in own}
    assert compiled == {path.stem for path in (ROOT / "_ext").glob("*.cpp")}, "\n".join(own) or log[-3000:]
    for line in own:
        assert line.split()[0].endswith(compiler), line
        assert {"-Wall", "-Wextra", "-Werror"} <= set(line.split()), line
    warnings = re.findall(r"^.*_ext[/\\][\w.]+:\d+(?::\d+)?: warning:.*$", log, flags=re.MULTILINE)
    assert not warnings, "\n".join(warnings[:20])


BUILD_CHECK = textwrap.dedent("""
    import sys
    import numpy as np
    import convviz
    from convviz import _openmp_info, reference
    from convviz._backends import cpu
    from convviz.ops import OPS

    assert convviz.__file__.startswith(sys.argv[1]), convviz.__file__
    assert not convviz.openmp_enabled() and convviz.show_versions(as_dict=True)["max_threads"] == 1
    rng = np.random.default_rng(7)
    for isa in _openmp_info.available_isas():
        with cpu.use_isa(isa):
            w = rng.standard_normal((3, 3, 12, 20)).astype(np.float32)
            dy = rng.standard_normal((2, 5, 10, 20)).astype(np.float32)
            args = ([2, 9, 19, 12], w, dy, [1, 2, 2, 1], "SAME")
            got = convviz.conv2d_backprop_input(*args, dilations=[1, 1, 1, 1])
            exact = reference.conv2d_backprop_input(args[0], w.astype(np.float64), dy.astype(np.float64),
                                                    *args[3:], dilations=[1, 1, 1, 1])
            np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
            x = rng.standard_normal((2, 9, 19, 24)).astype(np.float32)
            dy = rng.standard_normal((2, 9, 19, 24)).astype(np.float32)
            for dilation in (1, 2):
                kwargs = dict(strides=[1, 1, 1, 1], padding="SAME", dilations=[1, dilation, dilation, 1])
                got = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 24, 1], dy, **kwargs)
                exact = reference.depthwise_conv2d_native_backprop_filter(
                    x.astype(np.float64), [3, 3, 24, 1], dy.astype(np.float64), **kwargs)
                np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
            for op in OPS:  # every op of the registry, on its small example, every padding
                for padding in ("SAME", "VALID", "EXPLICIT"):
                    args = op.example(rng, np.float32, "NHWC", (2, 1), (1, 2), padding)
                    got, exact = op.run(*args, None), op.reference(*args)
                    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
    print("build ok", _openmp_info.available_isas())
""")


# The sanitized build also runs these tests of single ops, from their own files: the
# kernels per instruction set and the op's own errors.
SANITIZED_OP_TESTS = {
    "test_conv2d.py": ("test_forward_kernels",),
    "test_conv2d_backprop_filter.py": ("test_dense_filter_gradient_kernels",),
    "test_conv2d_backprop_input.py": (
        "test_input_gradient_shapes_cover_both_kernels", "test_input_gradient_kernels",
        "test_input_gradient_reads_wide_dy_rows_in_place", "test_input_gradient_errors",
        "test_cve_2021_29525_division_by_zero_is_an_error", "test_cve_2022_35999_empty_out_backprop",
        "test_cve_2021_41209_empty_filter", "test_absurd_input_sizes_are_refused_before_allocating",
        "test_scalar_filter_is_an_error", "test_three_element_input_sizes_is_an_error"),
    "test_depthwise_conv2d_native_backprop_filter.py": (
        "test_filter_gradient_kernels", "test_filter_gradient_errors", "test_huge_filter_sizes_do_not_overflow",
        "test_empty_out_backprop_in_filter_gradient_gives_zeros_not_garbage"),
    # Rows read and written in place whatever the channel count: nothing past a pixel's channels touched.
    "test_depthwise_conv2d_native.py": ("test_both_ops_on_every_simd_variant", "test_stencil_rows_of_every_width"),
}


@pytest.mark.skipif(not (ROOT / "setup.py").exists(), reason="needs the source tree")
@pytest.mark.skipif(shutil.which("clang") is None or shutil.which("clang++") is None,
                    reason="clang/clang++ not on PATH (CI installs Debian's clang)")
def test_clang_serial_sanitized_build(tmp_path):
    """The second compiler, the serial build and AddressSanitizer in one build (the
    normal build covers g++ with OpenMP, under the same -Werror): CC=clang
    CXX=clang++ CONVVIZ_DISABLE_OPENMP=1 builds the modules with a warning, the
    project's own C++ with -Wall -Wextra -Werror and no warning; the modules report
    no OpenMP and compute every op in every SIMD variant within 1e-5 of the float64
    reference, and the kernel tests pass on them -- under AddressSanitizer (when
    clang has its runtime): no out-of-bounds read or write in any variant."""
    pytest.importorskip("Cython")
    asan = _asan_runtime()
    if asan is None and os.environ.get("CI"):  # CI's Debian clang has it: never pass there without the sanitizer
        pytest.fail("clang's AddressSanitizer runtime was not found (libclang-rt-*-dev)")
    env = dict(os.environ, CC="clang", CXX="clang++", CONVVIZ_DISABLE_OPENMP="1")
    for name in ("CFLAGS", "CXXFLAGS", "LDFLAGS", "LDSHARED", "LDCXXSHARED", "CONVVIZ_WERROR"):
        env.pop(name, None)
    if asan:
        env["CFLAGS"] = "-fsanitize=address -fno-omit-frame-pointer"
        env["LDFLAGS"] = "-fsanitize=address -shared-libasan"
        env["CONVVIZ_DEBUG_INFO"] = "1"  # file and line in its reports
        env["CONVVIZ_OPTIMIZE"] = "-O1"  # sanitizers' usual level: a third of -O3's compile time
    lib, log = _build_copy(tmp_path, env)
    assert "WITHOUT OpenMP" in log
    _assert_own_code_strict_and_clean(log, "clang++")
    run_env = dict(os.environ, PYTHONPATH=str(lib), ASAN_OPTIONS="detect_leaks=0")
    if asan:
        run_env["LD_PRELOAD"] = asan
    result = subprocess.run([sys.executable, "-c", BUILD_CHECK, str(lib)], cwd=tmp_path, env=run_env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "build ok" in result.stdout
    tests = [str(ROOT / "tests" / name) for name in
             ("test_kernels.py", "test_conversions.py", "test_oracle.py", "test_inputs.py", "test_errors.py",
              "test_nonfinite.py")]
    tests += [f"{ROOT / 'tests' / name}::{test}" for name, names in SANITIZED_OP_TESTS.items() for test in names]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=", *tests],
        cwd=tmp_path, env=dict(run_env, CONVVIZ_ALLOW_SERIAL_BUILD="1"), capture_output=True, text=True,
        timeout=900)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert "passed" in result.stdout and "ERROR: AddressSanitizer" not in result.stderr


def test_stubs_match_the_compiled_modules(tmp_path):
    """mypy --strict accepts the .pyi stubs, and stubtest finds them equal to the
    modules' real signatures."""
    pytest.importorskip("mypy", reason="mypy is a dev dependency")
    stubs = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("convviz/**/*.pyi"))
    cache = ["--cache-dir", str(tmp_path / "mypy-cache")]
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", *cache, *stubs],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nfollow_imports = silent\nignore_missing_imports = True\n")
    modules = [stub[:-4].replace("/", ".") for stub in stubs]
    result = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config), *modules],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_kernels_return_their_scratch_bytes_per_call_and_thread():
    """Each kernel call returns the scratch bytes it allocated; last_scratch_bytes()
    is the calling thread's latest, whatever other threads ran meanwhile."""
    import threading

    import numpy as np

    from convviz.ops import _depthwise_filter_grad, _forward, _input_grad

    def input_grad(out_channels):  # scratch grows with the packed filter and dy's pixel pitch
        dy = np.ones((1, 4, 8, out_channels), np.float32)
        dx = np.empty((1, 4, 8, 8), np.float32)
        return _input_grad.input_grad(dy, 2, np.ones((3, 3, 8, out_channels), np.float32), 2, dx, 2,
                                      1, 1, 1, 1, 1, 1, 1, 1, 0, False, 0.0)

    small, large = input_grad(8), input_grad(256)
    assert 0 < small < large
    seen = {}
    first_done, second_done = threading.Event(), threading.Event()

    def first():
        seen["first"] = input_grad(8)
        first_done.set()
        second_done.wait(60)
        seen["first later"] = _input_grad.last_scratch_bytes()

    def second():
        first_done.wait(60)
        seen["second"] = input_grad(256)
        seen["second later"] = _input_grad.last_scratch_bytes()
        second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert seen == {"first": small, "first later": small, "second": large, "second later": large}

    ints = np.ones((1, 4, 8, 8), np.uint32)
    col_ranges = np.array([[1, 8], [0, 8], [0, 7]], dtype=np.intp)
    assert _forward.forward_int32(ints, np.ones((3, 3, 8, 8), np.uint32), np.empty_like(ints), col_ranges,
                                  1, 1, 1, 1, 1, 1, 1, 2, 1e12) == 0
    assert _forward.last_scratch_bytes() == 0

    x = np.ones((1, 6, 9, 4), np.float32)
    used = _depthwise_filter_grad.depthwise_filter_grad(
        x, 2, np.ones((1, 6, 9, 4), np.float32), 2, np.empty((3, 3, 4, 1), np.float32), 2, col_ranges[:, :],
        1, 1, 1, 1, 1, 1, 1, 1, 0, False, 0.0)
    assert used > 0 and _depthwise_filter_grad.last_scratch_bytes() == used


def test_import_is_unambiguous_from_the_clones_parent_folder(tmp_path):
    """Run from the folder that holds the clone (named convviz, as `git clone` names it),
    `import convviz` must find the package, not the clone as an empty namespace package."""
    root = Path(convviz.__file__).resolve().parent.parent
    (tmp_path / "convviz").symlink_to(root, target_is_directory=True)
    code = "import convviz; print(convviz.__file__); print(convviz.conv2d_backprop_input.__name__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    path, name = out.stdout.split()
    assert Path(path).name == "__init__.py" and name == "conv2d_backprop_input"
