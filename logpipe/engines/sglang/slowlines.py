"""A block's slow lines of an SGLang log read one by one in Python: request records and
event lines.  The ingest's own process reads them while it finishes a block
(:func:`logpipe.engines.sglang.parser.finish_chunk`); for a big log of many, a worker
process reads them ahead (:func:`read_slow_lines`,
:class:`logpipe.engines.sglang.logparser.SGLangLogParser`).  This module imports neither
numpy nor the C lane, so that the worker stays small (~45 MB before its data)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from logpipe.engines.sglang.events import event_attrs
from logpipe.engines.sglang.records import request_row
from logpipe.engines.sglang.server_args import parse_server_args, redact_text
from logpipe.redaction import redact

MESSAGE_LIMIT = 100_000
"""Characters of an event's message kept."""


@lru_cache(maxsize=8192)
def _attrs_json(kind: str, message: str) -> str:
    """Event attrs as JSON; the same startup and lifecycle lines recur, so cache them."""
    return json.dumps(event_attrs(kind, message), default=str)


EventRead = tuple[str, dict[str, Any] | None, str | None, str | None]
"""An event line as :func:`~logpipe.engines.sglang.parser.finish_chunk` reads it (but an
error's traceback): its attrs as JSON and, for a ``server_args`` line, its arguments, its
text redacted (whole: the event's message is its first :data:`MESSAGE_LIMIT` characters)
and its arguments redacted as JSON (the ``runs`` row's ``server_args``; None without
arguments).  A launch's texts are made here, where a big log's worker reads its line
(~0.5 ms of the 550 arguments of a 0.5 release), not while the blocks are finished in
order."""


def read_event(kind: str, msg: str) -> EventRead:
    if kind != "server_args":
        return _attrs_json(kind, msg), None, None, None
    args = parse_server_args(msg)
    if args is None:
        return _attrs_json(kind, msg), None, msg, None
    # the attrs are {"server_args": the arguments redacted}, the run's arguments the same
    # JSON: redacted and encoded once (~0.2 ms of a launch's ~1 ms here)
    args_json = json.dumps(redact(args), default=str)
    return ('{"server_args": ' + args_json + "}", args, redact_text(msg, args),
            args_json if args else None)


def read_slow_lines(setup: object, requests: list[str], events: list[tuple[str, str]],
                    keep_text: bool) -> tuple[list[tuple[dict[str, Any] | None, str | None]],
                                              list[EventRead]]:
    """A block's request records and event lines read (:func:`records.request_row`,
    :func:`read_event`): what a worker process does for a block of many
    (``setup`` unused)."""
    return ([request_row(msg, keep_text) for msg in requests],
            [read_event(kind, msg) for kind, msg in events])
