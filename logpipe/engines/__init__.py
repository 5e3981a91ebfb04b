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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from logpipe.sources import Source, load, register

ENTRY_POINT_GROUP = "logpipe.engines"
BUILTIN = ("logpipe.engines.sglang:ENGINE", "logpipe.engines.vllm:ENGINE")
"""The engines that ship with logpipe, loaded by name like an entry point."""


@dataclass(frozen=True)
class CapacityRules:
    """How an engine's limits are judged against the load (:mod:`logpipe.analysis.pairing`)."""

    measures: Mapping[str, str] = field(default_factory=dict)
    """Capacity argument → what the load is measured by: ``running``, ``queued``,
    ``batch``, ``prefill`` or ``kv``."""
    effective: Mapping[str, str] = field(default_factory=dict)
    """Capacity argument → the ``effective.*`` fact its log prints when the argument was
    left to the engine."""
    derived_by_speculation: frozenset[str] = frozenset()
    """Arguments the engine sets itself when speculative decoding is on: a difference
    from the baseline follows from the treatment unless the user set them."""
    forced_variables: tuple[tuple[str, str, str | None, str], ...] = ()
    """``(variable, first release, last release or None, value)``: environment variables
    the engine sets itself at launch, by release of its first package."""


@dataclass(frozen=True)
class ServerRules:
    """What ``launch`` watches for in a running server's output and asks of its API."""

    decode_line: str | None = None
    """Text of a decode batch line (``--profile`` waits for busy steps)."""
    running: str | None = None
    """Regular expression whose group 1 is the running requests of a decode line."""
    profile_endpoint: str | None = None
    """``POST`` path that profiles a number of steps (``--profile``)."""
    profile_done_line: str | None = None
    """Text of the line that says the profile's trace was written."""
    info_endpoints: tuple[str, ...] = ()
    """``GET`` paths that describe the server (tried in order; kept as
    ``server_info.json``)."""
    metrics_endpoint: str | None = "/metrics"
    """``GET`` path of its Prometheus counters, scraped before and after each bench."""
    metrics_hint: str | None = None
    """What to do when the server does not serve them (SGLang: ``--enable-metrics``)."""


@dataclass(frozen=True)
class CounterRules:
    """What the engine's Prometheus counters (``GET /metrics``) mean
    (:mod:`logpipe.engines.counters`)."""

    prefix: str | None = None
    """The prefix of its metric names (``vllm:``): a snapshot's samples with it are its."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Metric family name, as the text format's parser names it (a counter without
    ``_total``) → the engine-neutral name (:data:`logpipe.engines.counters.NEUTRAL`)."""
    accept_length: str | None = None
    """How its counters give the mean acceptance length (tokens a request gains per
    verify step): ``accepted`` (1 + accepted draft tokens ÷ drafts, vLLM's definition)
    or ``generated`` (generated tokens ÷ verify steps, SGLang's per-request definition)."""


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
    log_files_parser: str | None = None
    """``module:function`` parsing several new logs at once, each one block of complete
    lines from its first line: ``(blocks, fallback_date, keep_text) ->`` a list of
    ``(parser, chunk)``, each what its :attr:`log_parser` would be after its block and
    the block's rows (a folder of small logs: the per-call cost of a parse paid once for
    many).  Raises ValueError where they cannot be parsed together.  None: one by one."""
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
    record_tables: tuple[str, ...] = ()
    """Those of its tables with one row per record line (``line_no``): a run taken back
    sends these lines to ``rejects``."""
    migrations: str | None = None
    """``module:folder`` of its numbered ``*.sql`` migrations, applied after the core's and
    recorded per engine in ``logpipe_internal.engine_migrations``."""
    samples_sql: str | None = None
    """``module:file`` of its fragment of the neutral ``run_samples_in(rid, ids)`` macro:
    a ``SELECT`` of :data:`logpipe.store.SAMPLE_COLUMNS` from its tables, for run ``rid``
    or the runs of the list ``ids`` (both NULL: every run), those its rows pass
    ``in_runs(run_id, rid, ids)`` for."""
    coded_samples_sql: str | None = None
    """``module:file`` of a faster read of its samples for ingest's judged counts
    (:func:`logpipe.classify.read`): a ``SELECT`` of the rows its :attr:`samples_sql`
    gives for ``in_runs(run_id, ?, ?)``, as ``run_id, line_no, us`` (``epoch_us(ts)``),
    ``kind_code, rank_tag_code`` (the ``label_id`` of the text in
    ``logpipe_internal.labels``, NULL where it is NULL), ``running_req, gen_throughput,
    input_throughput, accept_len, accept_rate, token_usage, cuda_graph``.  None: read
    through ``run_samples_in``."""
    capacity: CapacityRules = field(default_factory=CapacityRules)
    """Its limits, the settings its speculation derives, the variables it forces."""
    server: ServerRules = field(default_factory=ServerRules)
    """Its decode lines, profile endpoint and server-info endpoints, for ``launch``."""
    counters: CounterRules = field(default_factory=CounterRules)
    """Its ``/metrics`` names and what they mean."""


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


def capacity_rules(name: str | None) -> CapacityRules:
    """The capacity rules of engine ``name``; of every engine at once where the engine is
    not known (a run without a log: its keys are judged by whichever engine names them)."""
    engine = engine_named(name) if name else None
    if engine is not None:
        return engine.capacity
    every = [e.capacity for e in engines()]
    return CapacityRules(
        measures={k: v for r in reversed(every) for k, v in r.measures.items()},
        effective={k: v for r in reversed(every) for k, v in r.effective.items()},
        derived_by_speculation=frozenset().union(*(r.derived_by_speculation for r in every)),
        forced_variables=tuple(v for r in every for v in r.forced_variables))


def server_rules(engine: Engine | None) -> list[ServerRules]:
    """What ``launch`` watches for: the engine's rules, or every engine's where the command
    names none (a wrapper script)."""
    return [engine.server] if engine is not None else [e.server for e in engines()]


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
