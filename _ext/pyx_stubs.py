"""Write the type stub (``.pyi``) of a Cython kernel module from its ``.pyx``.

The build (``setup.py``) calls :func:`stub_text` for each op's kernel module
(``convviz/ops/_<op>.pyx``) and writes the result beside the compiled module, so
an op has no stub file to keep by hand: the ``.pyx`` is the one source of its
entry points' signatures.  Each public module-level ``def`` becomes a stub
function: its parameters with their Cython types in Python's terms, its return
annotation (every public ``def`` of an op's ``.pyx`` carries one) and the first
line of its docstring.  Only the few Cython types the kernels take are known; any
other is an error, so a stub never silently says ``Any``.
"""

from __future__ import annotations

import re

# Cython parameter types -> the stub's types.
_TYPES = {
    "cnp.ndarray": "npt.NDArray[Any]",  # a float tensor (its type code is a separate int)
    "const unsigned int[:, :, :, :]": "npt.NDArray[np.uint32]",  # int32 data viewed as uint32
    "unsigned int[:, :, :, :]": "npt.NDArray[np.uint32]",
    "const Py_ssize_t[:, ::1]": "npt.NDArray[np.intp]",  # column ranges
    "int": "int",
    "Py_ssize_t": "int",
    "bint": "bool",
    "double": "float",
    "list": "list[Any]",
}

_DEF = re.compile(r'^def (?P<name>[A-Za-z]\w*)\((?P<params>.*?)\)\s*(?:->\s*(?P<returns>[^:]+?))?\s*:\s*\n'
                  r'(?P<indent>\s+)(?:"""(?P<doc>.*?)""")?', re.MULTILINE | re.DOTALL)
_PARAM = re.compile(r"^(?P<type>.*?)\s*\b(?P<name>\w+)\s*(?:=\s*(?P<default>.+))?$", re.DOTALL)


def _split_params(text: str) -> list[str]:
    """The parameters of a ``def``, split at the commas outside brackets."""
    params, depth, current = [], 0, ""
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            params.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        params.append(current.strip())
    return params


def _stub_param(param: str, where: str) -> str:
    match = _PARAM.match(" ".join(param.split()))
    if match is None or not match["type"]:
        raise ValueError(f"{where}: parameter {param!r} has no Cython type")
    kind = _TYPES.get(match["type"])
    if kind is None:
        raise ValueError(f"{where}: parameter {param!r}: no stub type for Cython type {match['type']!r}")
    default = f" = {match['default'].strip()}" if match["default"] else ""
    return f"{match['name']}: {kind}{default}"


_INCLUDE = re.compile(r'^include "(?P<name>[\w.]+)"\s*$', re.MULTILINE)


def stub_text(pyx_source: str, module: str, include_dir: str | None = None) -> str:
    """The ``.pyi`` text for the Cython module ``module`` whose source is ``pyx_source``
    (its ``include "x.pxi"`` lines read from ``include_dir``, ``_ext/``, first).

    Examples
    --------
    >>> text = stub_text("def f(cnp.ndarray a, int n, bint f64=False) -> int:\\n    pass\\n", "m")
    >>> print(text.splitlines()[-2])
    def f(a: npt.NDArray[Any], n: int, f64: bool = False) -> int:
    """
    if include_dir is not None:
        def included(match: re.Match[str]) -> str:
            with open(f"{include_dir}/{match['name']}", encoding="utf-8") as handle:
                return handle.read()

        pyx_source = _INCLUDE.sub(included, pyx_source)
    functions = []
    for match in _DEF.finditer(pyx_source):
        where = f"{module}.{match['name']}"
        if not match["returns"]:
            raise ValueError(f"{where}: a public def needs a return annotation for its stub")
        params = ", ".join(_stub_param(param, where) for param in _split_params(match["params"]))
        summary = (match["doc"] or "").strip().split("\n\n")[0]
        summary = " ".join(summary.split()).replace("'''", '"')
        functions.append(f"def {match['name']}({params}) -> {match['returns'].strip()}:\n    '''{summary}'''\n")
    header = (f'"Types of the compiled module ``{module}``, written from its .pyx by the build '
              '(_ext/pyx_stubs.py)."\n\nfrom typing import Any\n\nimport numpy as np\nimport numpy.typing as npt\n')
    return header + "\n" + "\n".join(functions)
