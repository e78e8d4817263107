"""Whether an HTML output loads anything over the network: a text scan of its tags, CSS and
JavaScript (:func:`network_references`), used by the tests of every offline output (the
explorer page, the animation player, the gallery) and offered to course authors through
:mod:`convviz.viz.checks`."""

from __future__ import annotations

import html as _html
import re


# A URL the browser would fetch over the network: http(s), ws(s), or protocol-relative
# (browsers read backslashes as slashes there, and JSON escapes "/" as "\/").
_NET = re.compile(r"^(?:(?:https?|wss?|ftp):|[\\/]{2})", re.IGNORECASE)
_NET_IN_STRING = r"(?:(?:https?|wss?|ftp):|[\\/]{2})[^'\"`\s]*"
_NET_IN_CSS = r"(?:(?:https?|wss?|ftp):|[\\/]{2})[^'\"`\s)]*"  # an unquoted url(...) ends at ")"
_TAG = re.compile(r"<([A-Za-z][\w:.-]*)((?:\"[^\"]*\"|'[^']*'|[^'\">])*)>")
_ATTR = re.compile(r"([^\s=/\"'>]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# Attributes whose URL the browser loads by itself (href only outside <a>/<area>, see below).
_FETCHING_ATTRS = {"src", "href", "xlink:href", "action", "formaction", "poster", "background", "manifest"}
_SRCSETS = {"srcset", "imagesrcset"}
_NAVIGATION_TAGS = {"a", "area"}  # their href is followed only when clicked
# <link rel=...> values that name a page and load nothing.
_INERT_RELS = {"canonical", "alternate", "author", "license", "help", "next", "prev", "bookmark", "external",
               "nofollow", "noopener", "noreferrer", "me", "tag", "search"}
_CODE_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    # CSS
    r"url\(\s*['\"]?\s*" + _NET_IN_CSS,
    r"@import\s+(?:url\(\s*)?['\"]?\s*" + _NET_IN_STRING,
    # JavaScript
    r"\b(?:fetch|importScripts|sendBeacon)\s*\(\s*['\"`]\s*" + _NET_IN_STRING,
    r"\bimport\s*\(\s*['\"`]\s*" + _NET_IN_STRING,
    r"\b(?:import|export)\b[^;'\"`()]*?\bfrom\s*['\"`]\s*" + _NET_IN_STRING,
    r"\bimport\s*['\"`]\s*" + _NET_IN_STRING,
    r"\bnew\s+(?:Worker|SharedWorker|WebSocket|EventSource)\s*\(\s*['\"`]\s*" + _NET_IN_STRING,
    r"\.open\s*\(\s*['\"`][A-Za-z]+['\"`]\s*,\s*['\"`]\s*" + _NET_IN_STRING,  # XMLHttpRequest
    r"\.src\s*=\s*['\"`]\s*" + _NET_IN_STRING,
)]


def _is_network_url(value: str) -> bool:
    # What the URL parser sees: entities decoded, surrounding blanks and inner tabs/newlines dropped.
    url = re.sub(r"[\t\n\r]", "", _html.unescape(value)).strip()
    return bool(_NET.match(url))


def _short(snippet: str, limit: int = 200) -> str:
    snippet = " ".join(snippet.split())
    return snippet if len(snippet) <= limit else snippet[:limit - 3] + "..."


def _tag_fetches(name: str, attrs: dict[str, str]) -> bool:
    name = name.lower()
    for attr, value in attrs.items():
        if attr in _SRCSETS:
            # "a.png 1x, https://x/b.png 2x": the URL is each candidate's first word.
            if any(_is_network_url(c.split()[0]) for c in _html.unescape(value).split(",") if c.split()):
                return True
        elif attr == "data" and name == "object":
            if _is_network_url(value):
                return True
        elif attr in _FETCHING_ATTRS:
            if attr in ("href", "xlink:href") and name in _NAVIGATION_TAGS:
                continue
            if name == "link" and attr == "href":
                rels = set(attrs.get("rel", "stylesheet").lower().split())
                if rels and rels <= _INERT_RELS:
                    continue
            if _is_network_url(value):
                return True
    if name == "meta" and attrs.get("http-equiv", "").strip().lower() == "refresh":
        match = re.search(r"url\s*=\s*['\"]?\s*([^'\"\s;]+)", _html.unescape(attrs.get("content", "")), re.I)
        if match and _is_network_url(match.group(1)):
            return True
    return False


def network_references(html: str) -> list[str]:
    """References in an HTML document that make a browser fetch something over the network.

    An offline output must load nothing by itself.  Found:

    * tags whose ``src``, ``srcset``/``imagesrcset``, ``href`` (``<link>``,
      ``<base>``, SVG ``<image>``/``<use>``...), ``xlink:href``, ``action``,
      ``formaction``, ``poster``, ``background``, ``manifest`` or ``<object
      data>`` is an ``http:``/``https:``/``ws:``/``wss:`` or protocol-relative
      (``//``) URL; ``<meta http-equiv="refresh">`` to such a URL;
      ``<iframe srcdoc>`` is searched too;
    * CSS ``url(...)`` and ``@import`` of such URLs;
    * JavaScript ``fetch(...)``, ``XMLHttpRequest.open(method, url)``,
      ``import(...)``, ``import ... from "..."``, ``importScripts``,
      ``new Worker/WebSocket/EventSource(...)``, ``sendBeacon`` and
      ``.src = "..."`` with such a URL.

    Not references: ``xmlns`` and other namespace names, DOCTYPE identifiers,
    URLs in plain text, ``data:`` URLs, HTML comments, ``<link>`` whose ``rel``
    loads nothing (``canonical``, ``alternate``...), and ``<a>``/``<area>``
    ``href``: a link the reader may click is navigation, not a fetch.  This is
    a text scan, not a browser: URLs built at run time are not seen, and a URL
    inside a JavaScript comment is reported.

    Parameters
    ----------
    html : str
        The document.

    Returns
    -------
    list of str
        The offending snippets (the whole tag, or the CSS/JS expression,
        whitespace collapsed, at most 200 characters), in document order.

    Examples
    --------
    >>> page = '''<svg xmlns="http://www.w3.org/2000/svg"></svg>
    ... <script src="https://cdn.example.org/d3.js"></script>
    ... <img src="data:image/png;base64,iVBORw0KGgo=">
    ... <a href="https://example.org/course">the course</a>
    ... <style>body { background: url(//example.org/bg.png) }</style>'''
    >>> for snippet in network_references(page):
    ...     print(snippet)
    <script src="https://cdn.example.org/d3.js">
    url(//example.org/bg.png
    """
    # Comments load nothing; blank them out keeping offsets, so results stay in document order.
    text = _COMMENT.sub(lambda m: " " * len(m.group(0)), html)
    found: list[tuple[int, int, str]] = []
    for tag in _TAG.finditer(text):
        attrs: dict[str, str] = {}
        for attr in _ATTR.finditer(tag.group(2)):
            value = next(v for v in attr.groups()[1:] if v is not None)
            attrs.setdefault(attr.group(1).lower(), value)
        if _tag_fetches(tag.group(1), attrs):
            found.append((tag.start(), tag.end(), _short(tag.group(0))))
        if "srcdoc" in attrs:  # an inline document of its own
            found.extend((tag.start(), tag.end(), f"srcdoc: {ref}")
                         for ref in network_references(_html.unescape(attrs["srcdoc"])))
    for pattern in _CODE_PATTERNS:
        found.extend((m.start(), m.end(), _short(m.group(0))) for m in pattern.finditer(text))
    found.sort(key=lambda item: (item[0], -item[1]))
    result: list[str] = []
    covered_to = -1
    for start, end, snippet in found:
        if end <= covered_to and not snippet.startswith("srcdoc: "):
            continue  # inside a tag or expression already reported (e.g. url() within @import)
        covered_to = max(covered_to, end)
        result.append(snippet)
    return result
