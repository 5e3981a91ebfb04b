"""One registry of output formats: for every kind of result a command prints, the formats
it offers and the function that renders each.  A command checks ``--format`` here before
it does any work (:func:`check`) and renders here (:func:`render`); an unknown format is
one error, naming the formats of that command."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from logpipe import report
from logpipe.errors import LogpipeError

Renderer = Callable[..., str]


def _explain_json(ex: Any) -> str:
    return json.dumps(ex.to_dict(), indent=2, default=str) + "\n"


def _explain_text(ex: Any) -> str:
    from logpipe.analysis.explain import explain_text

    return explain_text(ex)


def _comparisons(render: Callable[[Any], str]) -> Renderer:
    return lambda comparisons, _code: "\n".join(render(c) for c in comparisons)


def _rows(fmt: str) -> Renderer:
    return lambda columns, rows: report.rows_text(columns, rows, fmt)


RENDERERS: dict[str, dict[str, Renderer]] = {
    "rows": {fmt: _rows(fmt) for fmt in report.FORMATS},
    "env show": {"table": lambda name, env: report.env_show(name, env, "table"),
                 "json": lambda name, env: report.env_show(name, env, "json")},
    "env diff": {"text": lambda d: report.env_diff(d, "text"),
                 "json": lambda d: report.env_diff(d, "json")},
    "compare": {"table": _comparisons(report.comparison_text),
                "markdown": _comparisons(report.comparison_markdown),
                "json": report.comparisons_json},
    "explain": {"text": _explain_text, "json": _explain_json},
    "check": {"text": report.check_text, "markdown": report.check_markdown,
              "json": report.check_json},
    "sweep": {"table": lambda result: report.sweep_text(result, "table"),
              "markdown": lambda result: report.sweep_text(result, "markdown"),
              "json": lambda result: report.sweep_text(result, "json")},
    "ab": {"table": report.plan_text, "json": report.plan_json},
}
"""Result kind → format → renderer (its arguments are the kind's result)."""


def formats(kind: str) -> tuple[str, ...]:
    """The formats a kind of result is printed in; the first is the default."""
    return tuple(RENDERERS[kind])


def check(kind: str, fmt: str) -> None:
    """Refuse a format the kind has no renderer for, naming those it has."""
    if fmt not in RENDERERS[kind]:
        raise LogpipeError(f"unknown format {fmt!r}",
                           hint="use one of: " + ", ".join(formats(kind)))


def render(kind: str, fmt: str, *result: Any) -> str:
    """``result`` of kind ``kind`` in format ``fmt`` (checked)."""
    check(kind, fmt)
    return RENDERERS[kind][fmt](*result)
