"""Serving engines behind one seam.

An :class:`Engine` is what logpipe needs to know about a server it reads: its name (the
``runs.engine`` value), the input kinds of its server logs, the function that reads such a
log into the store, the packages and environment-variable prefixes that identify its
install, and the words its file names use.  ``ingest``, ``env``, ``walk`` and the linking
rules ask the registry, never an engine by name.

Built-in engines live in ``logpipe/engines/<name>/`` (one folder each) and register the
way a third-party engine does: an entry point in the ``logpipe.engines`` group whose
object is an :class:`Engine` (``[project.entry-points."logpipe.engines"] toy =
"toy_engine:ENGINE"``).  Loading an engine registers its input kinds.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from logpipe.sources import Source, load, register

ENTRY_POINT_GROUP = "logpipe.engines"
BUILTIN = ("logpipe.engines.sglang:ENGINE", "logpipe.engines.vllm:ENGINE")
"""The engines that ship with logpipe, loaded by name like an entry point."""


@dataclass(frozen=True)
class Engine:
    name: str
    """``runs.engine`` of the runs its logs make."""
    display: str
    log_kinds: tuple[Source, ...]
    """The input kinds that are this engine's server logs."""
    log_parser: str
    """``module:function`` making the parser of one such log:
    ``(state_json | None, fallback_date, keep_text) ->`` a
    :class:`logpipe.engines.parsing.LogParser`.  The ingest owns the file protocol and
    the store; the parser turns blocks of lines into rows.  Imported only when a log
    needs reading."""
    packages: tuple[str, ...] = ()
    """Python distributions whose versions identify the engine's install."""
    env_prefixes: tuple[str, ...] = ()
    """Prefixes of the environment variables the engine reads (``SGLANG_``)."""
    phase_hook: str | None = None
    """``module:folder`` of a ``sitecustomize`` folder that times the server's
    speculative phases when put first on its ``PYTHONPATH`` (``launch --phases``)."""
    launch_words: tuple[str, ...] = ()
    """Words of a server command that say it starts this engine (``sglang.launch_server``)."""
    name_words: frozenset[str] = field(default_factory=frozenset)
    """Words of file and folder names that say "a log of this engine", not which
    experiment (``sglang`` in ``sglang-server.log``)."""
    ready_line: str | None = None
    """Text of the log line that says the server serves (``launch`` waits for it or for
    ``/health`` answering 200)."""
    default_port: int | None = None
    """The port the server listens on without ``--port``."""
    diagnose: str | None = None
    """``module:function`` that parses one of its logs for ``logpipe doctor``: ``(path) ->
    {lines, counts, events, rejects, rejects_total, unread, unread_total}`` (None: the
    doctor's own reading of SGLang's lines)."""
    accept_rate: str | None = None
    """What the ``accept_rate`` of its samples means, where one definition holds for every
    release (None: it depends on the release, and compare says which)."""

    accept_rate_by_release: str | None = None
    """``module:function`` ``(version, era_mask) -> str``: what ``accept_rate`` means for
    a run of this release or format era, where that changed between releases."""
    about: str | None = None
    """``module:function`` ``() -> str``: what ``logpipe --version`` says of its parser
    (the C fast lane built or not)."""
    tables: tuple[str, ...] = ()
    """The stored tables of its own (in ``logpipe_internal``, with ``run_id`` and
    ``source_id``; shown in ``main`` with ``source_path``), beside the core's."""
    migrations: str | None = None
    """``module:folder`` of its numbered ``*.sql`` migrations, applied after the core's and
    recorded per engine in ``logpipe_internal.engine_migrations``."""
    samples_sql: str | None = None
    """``module:file`` of its fragment of the neutral ``run_samples(rid)`` macro: a
    ``SELECT`` of :data:`logpipe.store.SAMPLE_COLUMNS` from its tables, for run ``rid``
    (NULL: every run)."""


@functools.cache
def engines() -> tuple[Engine, ...]:
    """Every engine: the built-in ones, then those of installed entry points."""
    found: dict[str, Engine] = {}
    specs: list[Callable[[], Any]] = [functools.partial(load, s) for s in BUILTIN]
    specs += [ep.load for ep in entry_points(group=ENTRY_POINT_GROUP)]
    for get in specs:
        engine = get()
        if not isinstance(engine, Engine):
            raise TypeError(f"a {ENTRY_POINT_GROUP} entry point must name an Engine, "
                            f"not {type(engine).__name__}")
        for kind in engine.log_kinds:
            register(kind)
        found.setdefault(engine.name, engine)
    return tuple(found.values())


def engine_for_kind(kind: str) -> Engine | None:
    """The engine whose server log ``kind`` is, or None (a record file, a trace)."""
    for engine in engines():
        if any(k.name == kind for k in engine.log_kinds):
            return engine
    return None


def engine_of_command(command: list[str]) -> Engine | None:
    """The engine a server command starts, by its launch words."""
    text = " ".join(command)
    return next((e for e in engines() if any(w in text for w in e.launch_words)), None)


def resource(spec: str) -> Path:
    """The file or folder ``module:name`` names: ``name`` beside the module's source."""
    module, _, name = spec.partition(":")
    return Path(os.path.dirname(load(module).__file__)) / name


def phase_hook_dir(engine: Engine) -> str | None:
    """The folder of the engine's phase hook, or None."""
    if engine.phase_hook is None:
        return None
    return str(resource(engine.phase_hook))


def engine_named(name: str) -> Engine | None:
    return next((e for e in engines() if e.name == name), None)


def name_words() -> frozenset[str]:
    """Every engine's name words (file-name words that name no experiment)."""
    return frozenset().union(*(e.name_words for e in engines()))


def packages() -> tuple[str, ...]:
    return tuple(p for e in engines() for p in e.packages)


def env_prefixes() -> tuple[str, ...]:
    return tuple(p for e in engines() for p in e.env_prefixes)


ENGINE_KEY_PREFIXES = ("arg.", "adjusted.", "effective.", "startup.", "pkg.", "command.")
"""Environment keys that describe an engine's own install and settings: its arguments, what
it adjusted and sized itself, its startup, its packages (each engine brings its torch)."""


def engine_specific(key: str) -> bool:
    """True for a key that belongs to the engine (its arguments, packages, variables, log
    format): across engines these are the treatment, not the environment."""
    if key.startswith(ENGINE_KEY_PREFIXES) or key.endswith(".format_era"):
        return True
    return key.startswith(env_prefixes())
