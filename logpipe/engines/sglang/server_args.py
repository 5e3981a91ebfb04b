"""Parse SGLang's ``server_args`` log line with :mod:`ast`, never ``eval``.

Two styles exist (reference §3.1): the dataclass repr ``server_args=ServerArgs(a=1, …)``
(≤0.5.21) and a dict repr ``server_args={'a': 1, …}`` (0.5.22+).  Values are Python
literals; a value that is not a literal (an enum repr, a lambda, a truncated line) is kept
as its source text, so nothing is lost and nothing is executed.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import Any

from logpipe.redaction import is_secret_key, redact  # noqa: F401  (re-exported)
from logpipe.reprs import plain_kwargs, read_plain

SERVER_ARGS_RE = re.compile(r"server_args\s*=\s*(?P<body>(?:ServerArgs\(|\{).*)$")


def _literal(node: ast.AST, source: str) -> Any:
    if type(node) is ast.Constant:  # most of a launch's ~500 arguments: no walk needed
        return node.value
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.get_source_segment(source, node)


def parse_server_args(text: str) -> dict[str, Any] | None:
    """Return the arguments in a ``server_args=…`` message, or None when it is not one.

    >>> parse_server_args("server_args=ServerArgs(model_path='m', tp_size=8)")
    {'model_path': 'm', 'tp_size': 8}
    >>> parse_server_args("server_args={'model_path': 'm', 'dp_size': 2}")
    {'model_path': 'm', 'dp_size': 2}
    """
    parsed = _parse(text)
    return None if parsed is None else dict(parsed)


@lru_cache(maxsize=4)  # a launch's line is read for its event and for its run
def _parse(text: str) -> dict[str, Any] | None:
    m = SERVER_ARGS_RE.search(text)
    if m is None:
        return None
    body = m.group("body").rstrip()
    plain = _plain(body)
    if plain is not None:
        return plain
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    node = tree.body
    out: dict[str, Any] = {}
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg is not None:
                out[kw.arg] = _literal(kw.value, body)
        return out
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                out[k.value] = _literal(v, body)
        return out
    return None


def _plain(body: str) -> dict[str, Any] | None:
    """The arguments when every value is plain (:mod:`logpipe.reprs`: what ``ast`` gives,
    ~10x faster on a launch's ~500 arguments); None: read with ``ast``."""
    if body.startswith("{"):
        plain, value = read_plain(body)
        return value if plain and isinstance(value, dict) else None
    if body.startswith("ServerArgs(") and body.endswith(")"):
        return plain_kwargs(body[len("ServerArgs("):-1])
    return None


def redact_text(raw: str, args: dict[str, Any]) -> str:
    """``raw`` (the printed server_args) with the repr of every secret value replaced."""
    for key, value in args.items():
        if is_secret_key(key) and value not in (None, "", False):
            raw = raw.replace(repr(value), "'<redacted>'")
    return raw
