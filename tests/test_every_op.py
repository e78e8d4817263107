"""What every op must do, run over the registry (convviz.ops.OPS): a new op gets these
tests by adding its record (``Op.example`` builds each a small valid call)."""

from __future__ import annotations

import ast
import doctest
import inspect
import pathlib

import numpy as np
import pytest

import convviz
from convviz import _openmp_info, reference
from convviz._backends import cpu
from convviz.compat.tf import raw_ops
from convviz.ops import OPS
from helpers import assert_close_to_reference

ISAS = _openmp_info.available_isas()

WINDOWS = [((1, 1), (1, 1)), ((2, 1), (1, 1)), ((1, 2), (2, 1)), ((3, 2), (2, 3))]
ops = pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)


def _dtype_name(dtype: np.dtype) -> str:
    return "bfloat16" if dtype.name == "bfloat16" else str(dtype)


def _cases():
    for op in OPS:
        for dtype in op.dtypes:
            for data_format in ("NHWC", "NCHW"):
                for padding in ("SAME", "VALID", "EXPLICIT"):
                    for strides, dilations in WINDOWS:
                        yield pytest.param(op, dtype, data_format, padding, strides, dilations,
                                           id=f"{op.name}-{_dtype_name(dtype)}-{data_format}-{padding}-s{strides}-d{dilations}")


@pytest.mark.parametrize("op, dtype, data_format, padding, strides, dilations", list(_cases()))
def test_matches_the_float64_reference(op, dtype, data_format, padding, strides, dilations, rng):
    args = op.example(rng, dtype, data_format, strides, dilations, padding)
    got = op.run(*args, None)
    exact = op.reference(*args)
    magnitudes = list(args)
    for i in op.tensor_positions:
        magnitudes[i] = np.abs(args[i].astype(np.float64))
    bound = op.reference(*magnitudes)
    assert_close_to_reference(got, exact, bound, _dtype_name(np.dtype(dtype)))


def _compare(op, args, dtype):
    got = op.run(*args, None)
    magnitudes = list(args)
    for i in op.tensor_positions:
        magnitudes[i] = np.abs(args[i].astype(np.float64))
    with np.errstate(invalid="ignore"):  # Inf - Inf in the reference's sums is the point here
        exact = op.reference(*args)
        bound = op.reference(*magnitudes)
    wide = np.asarray(got).astype(np.float64)
    for name, test in (("NaN", np.isnan), ("+Inf", np.isposinf), ("-Inf", np.isneginf)):
        mismatch = test(wide) != test(exact)
        assert not mismatch.any(), (
            f"{name} at {int(test(wide).sum())} cells, reference {int(test(exact).sum())}; "
            f"first difference at {tuple(int(i) for i in np.argwhere(mismatch)[0])}")
    finite = np.isfinite(exact)
    assert_close_to_reference(got[finite], exact[finite], bound[finite], _dtype_name(np.dtype(dtype)))


@ops
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
def test_every_simd_variant_matches_the_reference(op, data_format, padding, rng):
    for isa in ISAS:
        with cpu.use_isa(isa):
            for dtype in op.dtypes:
                for strides, dilations in WINDOWS:
                    _compare(op, op.example(rng, dtype, data_format, strides, dilations, padding), dtype)


@ops
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_nan_and_inf_land_where_the_reference_puts_them(op, data_format, padding, value, rng):
    """A NaN or +Inf in one cell of one tensor (a corner, the middle, the last cell) reaches
    exactly the cells the float64 reference says, on every SIMD variant and float dtype:
    no term is added for a tap in the padding or between dilated taps."""
    floats = [d for d in op.dtypes if np.dtype(d).kind == "f" or np.dtype(d).name == "bfloat16"]
    for isa in ISAS:
        with cpu.use_isa(isa):
            for dtype in floats:
                for strides, dilations in WINDOWS:
                    for position in op.tensor_positions:
                        args = list(op.example(rng, dtype, data_format, strides, dilations, padding))
                        tensor = args[position]
                        for flat in (0, tensor.size // 2, tensor.size - 1):
                            poisoned = tensor.copy()
                            poisoned.flat[flat] = value
                            args[position] = poisoned
                            _compare(op, args, dtype)


@ops
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_bitwise_the_same_for_any_thread_count(op, dtype, rng):
    args = op.example(rng, dtype, "NHWC", (1, 1), (1, 1), "SAME")
    results = [op.run(*args, n) for n in (1, 2, 3)]
    for other in results[1:]:
        assert other.tobytes() == results[0].tobytes()


@ops
def test_the_record_is_complete_and_public(op):
    function = getattr(convviz, op.name)
    assert function.__module__.startswith("convviz.ops.") and op.kernel.__name__.startswith("convviz.ops._")
    assert "Examples" in function.__doc__ and "%(" not in function.__doc__, "docstring placeholders left unfilled"
    assert callable(op.reference)
    if hasattr(raw_ops, op.tf_name):  # a TensorFlow name, where the op has one, runs the same op
        assert op.tf_name in raw_ops.__all__
    assert set(op.tensors) <= set(op.args) and op.dtypes
    assert op.kernel.last_scratch_bytes() >= 0


@ops
def test_the_reference_takes_the_ops_arguments_and_runs_its_example(op):
    """``convviz.reference.<name>`` is made from the record: the op's signature, found
    under the op's module, and the Examples of its docstring pass."""
    ref = getattr(reference, op.name)
    assert ref is op.reference and ref.__name__ == op.name and ref.__module__ == getattr(convviz, op.name).__module__
    assert list(inspect.signature(ref).parameters) == list(inspect.signature(getattr(convviz, op.name)).parameters)[
        :len(op.args) + 5]
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(ref, op.name, globs={}):
        assert runner.run(test).failed == 0 and test.examples


def test_the_import_graph_has_no_circle():
    """No module of convviz imports, at its top, one that imports it back (the float64
    references are a facade above the ops, the ops' loop helpers live on the geometry)."""
    package = pathlib.Path(convviz.__file__).parent
    modules = {".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in [*package.rglob("*.py"), *package.rglob("*.pyx")]}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        if path.suffix == ".pyx":
            continue
        package_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.parse(path.read_text()).body:  # module level: a function's import runs later
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package_parts[:len(package_parts) - node.level + 1]) if node.level else ""
                source = ".".join(filter(None, [base, node.module]))
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    graph[name].add(target if target in modules else source)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names)
    graph = {name: {t for t in targets if t in modules and t != name} for name, targets in graph.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, f"import circle: {' -> '.join(path[path.index(name):] + [name])}"
        if name not in done:
            for target in graph[name]:
                visit(target, path + [name])
            done.add(name)

    for name in graph:
        visit(name, [])
    assert "convviz.ops" in graph["convviz.reference"]  # the facade imports the ops, not the other way


@ops
def test_bad_input_is_refused_before_any_work(op, rng):
    """A tensor of the wrong dtype or rank is refused with its name in the message."""
    last = op.tensor_positions[-1]
    name = op.args[last]
    args = list(op.example(rng, np.float32, "NHWC"))
    args[last] = args[last][0]
    with pytest.raises(convviz.InvalidArgumentError, match=f"^{op.name}: {name} must be 4-D"):
        op.run(*args, None)
    args = list(op.example(rng, np.float32, "NHWC"))
    args[last] = args[last].astype(np.float64)
    with pytest.raises(TypeError, match=f"^{op.name}: {name} must have the same dtype"):
        op.run(*args, None)


def _malformed_calls(op, rng):
    """Calls of ``op`` with one argument broken the ways TensorFlow's CPU kernels have crashed on
    (empty, scalar, huge or negative sizes and windows): each must raise or return, never crash."""
    base = list(op.example(rng, np.float32, "NHWC"))
    n_args = len(op.args)
    variants = []
    for i, name in enumerate(op.args):
        if i in op.tensor_positions:
            for bad in (np.ones((), np.float32), np.ones((1, 1, 1), np.float32), np.ones((0, 3, 3, 2), np.float32),
                        np.ones((1, 2**16, 2**16, 0), np.float32)):
                variants.append((name, i, bad))
        else:  # a shape list
            for bad in ([], [2**31 - 1] * 4, [-1, 3, 3, 2], [0, 0, 0, 0], [1, 2**62, 2**62, 1]):
                variants.append((name, i, bad))
    for name, offset, values in (("strides", 0, ([], [1, 2**31 - 1, 2**31 - 1, 1], [0, 0])),
                                 ("padding", 1, ("bogus", "")),
                                 ("explicit_paddings", 2, ([0, 0, -1, 1, 1, 1, 0, 0], [0] * 7)),
                                 ("dilations", 4, ([1, 2**31 - 1, 2**31 - 1, 1], [0, 1]))):
        for bad in values:
            variants.append((name, n_args + offset, bad))
    for name, position, bad in variants:
        args = list(base)
        args[position] = bad
        if name == "explicit_paddings":
            args[n_args + 1] = "EXPLICIT"
        yield name, args


def test_malformed_calls_never_crash_the_interpreter():
    """Every record, every malformed call, in a child process: it must end normally and
    each call must raise InvalidArgumentError/TypeError or return."""
    code = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_every_op import _malformed_calls
from convviz.ops import OPS
rng = np.random.default_rng(0)
count = 0
for op in OPS:
    for name, args in _malformed_calls(op, rng):
        try:
            op.run(*args, None)
        except (ValueError, TypeError):
            pass
        except MemoryError:
            raise SystemExit(f"{op.name}: {name}: MemoryError instead of a clear refusal")
        count += 1
print("survived", count)
"""
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "survived" in result.stdout and int(result.stdout.split()[-1]) > 20 * len(OPS)


@ops
def test_concurrent_calls_from_python_threads_give_the_same_bits(op, rng):
    """Calls of one op from several Python threads at once (each kernel multithreaded too):
    every result is bitwise the single call's -- no shared scratch, no racing plan cache."""
    from concurrent.futures import ThreadPoolExecutor

    args = op.example(rng, np.float32, "NHWC")
    expected = op.run(*args, 1).tobytes()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda n: op.run(*args, 1 + n % 3).tobytes(), range(48)))
    assert all(r == expected for r in results)
