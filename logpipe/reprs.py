"""Python reprs printed in logs, read without executing them, fast where they are plain.

A repr made only of dicts, lists, plain single-quoted strings (no quote, backslash or
control character inside), JSON-shaped numbers, ``None``, ``True`` and ``False`` means in
JSON what it means in Python once its quotes and words are swapped, and ``json.loads``
reads it several times faster than ``ast`` compiles it (a request's ``meta_info``: ~30
such tokens, 17 µs against 46 µs; a launch's ``server_args``: ~500 arguments).  Anything
else (a tuple, ``inf``, an int key JSON refuses, an escape, a cut value) is left to
:func:`ast.literal_eval`, so the values are those ``ast`` gives (pinned by a test over
random reprs).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_TOKENS = (r"'[^'\"\\\x00-\x1f]*+'|-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?"
           r"|None|True|False|[{}\[\]:,]| ++")
_PLAIN_KWARGS_RE = re.compile(rf"(?:[A-Za-z_]\w*+=|{_TOKENS})*+")
_SWAP_RE = re.compile(r"'[^']*'|([A-Za-z_]\w*)=|None|True|False")
_WORDS = {"None": "null", "True": "true", "False": "false"}


def _swap(m: re.Match[str]) -> str:
    token = m.group()
    if token[0] == "'":
        return '"' + token[1:-1] + '"'
    if m.group(1) is not None:
        return '"' + m.group(1) + '":'
    return _WORDS[token]


def _refuse(word: str) -> Any:
    raise ValueError(f"{word} is JSON's, not a Python literal")


_DECODE = json.JSONDecoder(parse_constant=_refuse).decode
"""``json.loads`` refusing ``NaN`` and ``Infinity``, which JSON reads and a repr never
prints (Python prints ``nan`` and ``inf``, names ``ast`` refuses)."""


def read_plain(text: str) -> tuple[bool, Any]:
    """``(True, value)`` where ``text`` is a plain repr JSON reads, else ``(False, None)``
    (an int key, a trailing comma, anything not plain: for :mod:`ast` to decide)."""
    if '"' in text or "\\" in text or "\x00" in text:
        return False, None
    # a plain string holds no double quote nor backslash (Python prints a string with a
    # single quote between double ones, and escapes differ from JSON's), so the strings
    # are every other part between single quotes; what lies between them is numbers,
    # punctuation, whitespace and Python's three words, swapped for JSON's in one pass
    # over those parts joined with NUL (a JSON word there is a name Python refuses: not
    # plain).  For the rest JSON's grammar is the repr's, or stricter: a number JSON
    # refuses, a tuple, an int key or a trailing comma goes to ast, which reads it or
    # raises.
    parts = text.split("'")
    if len(parts) % 2 == 0:  # (a quote left open)
        return False, None
    between = "\x00".join(parts[0::2])
    if "null" in between or "true" in between or "false" in between:
        return False, None
    parts[0::2] = between.replace("None", "null").replace("True", "true").replace(
        "False", "false").split("\x00")
    try:
        return True, _DECODE('"'.join(parts))
    except (ValueError, RecursionError):  # (too deep for JSON: ast raises, or reads it)
        return False, None


def literal(text: str) -> Any:
    """``ast.literal_eval(text)``, read as JSON where ``text`` is plain; raises what
    ``ast.literal_eval`` raises."""
    plain, value = read_plain(text)
    return value if plain else ast.literal_eval(text)


def plain_kwargs(body: str) -> dict[str, Any] | None:
    """The keyword arguments of a call body ``a=1, b='x', c=[2]`` whose values are all
    plain, each name once; None otherwise (the caller reads it with :mod:`ast`)."""
    if not _PLAIN_KWARGS_RE.fullmatch(body):
        return None
    names = 0

    def swap(m: re.Match[str]) -> str:
        nonlocal names
        names += m.group(1) is not None
        return _swap(m)

    try:
        value = json.loads("{" + _SWAP_RE.sub(swap, body) + "}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and len(value) == names else None
