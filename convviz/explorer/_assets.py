"""The explorer's ES module and stylesheet, as one inline module.

``explorer.js`` imports ``core.js``; a notebook front end loads anywidget's module
from a string and a ``file://`` page cannot import a sibling file, so the import
line is replaced by core.js itself, inside a function, with its ``export``
keywords dropped, returning a ``core`` namespace object of its exported names.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMPORT_LINE = 'import * as core from "./core.js";'
_EXPORT = re.compile(r"^export (function|const|class) (\w+)", re.MULTILINE)


def read(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def inline_module() -> str:
    """explorer.js with core.js inlined: a single ES module with no imports.

    Examples
    --------
    >>> import re
    >>> source = inline_module()
    >>> bool(re.search(r"^\\s*import\\b", source, re.M)), "export default" in source
    (False, True)
    """
    core_source = read("core.js")
    names = [m.group(2) for m in _EXPORT.finditer(core_source)]
    body = _EXPORT.sub(lambda m: f"{m.group(1)} {m.group(2)}", core_source)
    # A function scope keeps core's private names out of explorer.js's module scope.
    core_block = f"const core = (() => {{\n{body}\nreturn Object.freeze({{ {', '.join(names)} }});\n}})();\n"
    explorer = read("explorer.js")
    if IMPORT_LINE not in explorer:
        raise RuntimeError(f"explorer.js must import core with the line {IMPORT_LINE!r}")
    return explorer.replace(IMPORT_LINE, core_block, 1)


@lru_cache(maxsize=1)
def stylesheet() -> str:
    """The explorer's CSS."""
    return read("explorer.css")
