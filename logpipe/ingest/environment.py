"""The environment and clock of the runs read from a file."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from logpipe import clock
from logpipe.env import (
    LaunchLayers,
    Rendered,
    RunEnv,
    Tiers,
    launch_layers,
    load_manifest,
    log_facts,
    render,
    with_run_facts,
)
from logpipe.errors import InputError
from logpipe.ingest.base import PARSER_VERSION, EnvOptions
from logpipe.store import Store
from logpipe.store.runs import env_rows
from logpipe.timings import ENVIRONMENTS, phase


def environment_key(manifests: list[Path], options: EnvOptions) -> str:
    """What :func:`attach_env` computes from besides the file itself: the manifests (path,
    size, modification time), the tier rules and the command line's environment.  An
    unchanged file with an unchanged key keeps its runs' environments as they are."""
    parts: list[Any] = [PARSER_VERSION, repr(options.tiers or Tiers.load()),
                        sorted(options.env.items()), sorted(options.tags.items()), options.tz]
    for p in manifests:
        stat = p.stat()
        parts.append((str(p.resolve()), stat.st_size, stat.st_mtime_ns))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


T = TypeVar("T")

ENV_RUNS_PER_WRITE = 100
"""Runs whose environments are written together (a run's holds ~1,000 entries)."""


SWITCH_S = 0.0001
"""The interpreter's thread switch interval while environments are rendered beside the
store's thread (:class:`_StoreUse`): a DuckDB statement takes the GIL back several times,
and each time waited the default 5 ms for the rendering thread to give it up (a query of
0.3 ms took 21 ms; 1.1 ms at 0.1 ms).  A file of 1,586 launches: environments 2.45 s one
after the other, 2.3 s beside it at 5 ms, 1.6-1.7 s at 0.1 ms."""

_switch_lock = threading.Lock()
_switch_users = 0
_switch_before = 0.0


@contextmanager
def _quick_switch() -> Iterator[None]:
    """:data:`SWITCH_S` while inside (the interval before restored when the last of
    several concurrent users leaves)."""
    global _switch_users, _switch_before
    with _switch_lock:
        if _switch_users == 0:
            _switch_before = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_S, _switch_before))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_before)


class _StoreUse:
    """The store's use while environments are rendered: every read and write of it in
    order on one thread of its own, while the caller renders the next runs (a file of
    1,586 launches spent 1.4 of its 2.5 s of environments in DuckDB's writes, ~900,000
    entries and 85 MB of JSON, with the other core idle).  At most the write of one group
    is in flight while the next is rendered.  A file of one group uses no thread."""

    def __init__(self, store: Store, threaded: bool) -> None:
        self.store = store
        self._threaded = threaded
        self._pool: ThreadPoolExecutor | None = None
        self._writes: list[Future[None]] = []
        self._switch = ExitStack()

    def __enter__(self) -> _StoreUse:
        if self._threaded:
            self._switch.enter_context(_quick_switch())
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="logpipe-env")
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        """Every write waited for, raising what one raised (unless the caller is failing
        already: then only waited for, as the store is not given back while the thread
        still uses it); the thread ended."""
        try:
            if kind is None:
                for done in self._writes:
                    done.result()
        finally:
            if self._pool is not None:  # (what has not started yet is not started)
                self._pool.shutdown(wait=True, cancel_futures=kind is not None)
            self._switch.close()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """``fn(*args)`` after everything submitted before (at once without a thread)."""
        if self._pool is None:
            done: Future[T] = Future()
            done.set_result(fn(*args))
            return done
        return self._pool.submit(fn, *args)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        return self.submit(fn, *args).result()

    def write(self, rewritten: list[tuple[str, Rendered, dict[str, Any]]]) -> None:
        rows = env_rows(rewritten)  # (built here, beside the write before it)
        if rows is None:
            return
        for done in self._writes:  # (a failed write fails the file now)
            done.result()
        self._writes = [self.submit(self.store.write_run_envs, rows)]


def _here(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on this thread (what needs no store)."""
    return fn(*args)


def attach_env(store: Store, key: str, manifests: list[Path], options: EnvOptions) -> None:
    """(Re)compute the environment of every run read from ``key``.  (Whether a run was
    profiled follows from it and from the run's records: :meth:`Store.derive_profiled`.)

    Runs are recomputed on every ingest, so a manifest added later takes effect; values
    given on an earlier command line are kept unless given again.
    """
    attach_envs(store, [(key, manifests)], options)


def attach_envs(store: Store, files: list[tuple[str, list[Path]]],
                options: EnvOptions) -> None:
    """:func:`attach_env` of several files (``(key, manifests)`` each) in a few queries:
    a group of small files costs the queries of one."""
    if not files:
        return
    with phase(ENVIRONMENTS):
        _attach_envs(store, files, options)


def _attach_envs(store: Store, files: list[tuple[str, list[Path]]],
                 options: EnvOptions) -> None:
    cache: dict[Path, Any] = {}

    def manifest(p: Path) -> Any:
        if p not in cache:
            cache[p] = load_manifest(p)
        return cache[p]

    loaded_of = {key: [(str(p), manifest(p)) for p in manifests] for key, manifests in files}
    keys = list(loaded_of)
    tiers = options.tiers or Tiers.load()
    listed = store.all("SELECT run_id, source_path FROM runs "
                       "WHERE source_path IN (SELECT unnest(?::VARCHAR[]))", [keys])
    # the files' facts in a few queries, not a few per run (a file may hold 450 launches)
    # (the stored tables by the files' ids: the public views join every row to its path,
    # a scan of the whole database per file)
    sids = [store.source_id(k) for k in keys]
    events: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for run_id, kind, attrs in store.all(
            "SELECT run_id, kind, attrs FROM logpipe_internal.events WHERE source_id IN "
            "(SELECT unnest(?::INTEGER[])) AND kind IN ('nccl_env', 'nccl_version', "
            "'setting_adjusted', 'attention_backend', 'capacity', 'load_weight', "
            "'kv_cache', 'graph_capture', 'startup_timings') ORDER BY line_no", [sids]):
        events.setdefault(str(run_id), []).append((kind, json.loads(attrs) if attrs else {}))
    inferred = _dates_inferred(store, sids, [(str(r), str(k)) for r, k in listed])
    outer = {str(r) for (r,) in store.all(
        "SELECT DISTINCT run_id FROM logpipe_internal.line_prefixes WHERE outer_ts_utc AND "
        "source_id IN (SELECT unnest(?::INTEGER[]))", [sids])}
    clocks: list[tuple[str, int | None, str | None]] = []
    launches: dict[tuple[Any, ...], tuple[str | None, LaunchLayers]] = {}
    last: dict[str, Rendered] = {}  # a file's launch before, rendered (:func:`render`)
    with _StoreUse(store, threaded=len(listed) > ENV_RUNS_PER_WRITE) as use:
        _render_envs(store, listed, options, tiers, loaded_of, events, inferred, outer,
                     clocks, launches, last, use)
    store.set_run_clocks(clocks)


def _render_envs(store: Store, listed: list[tuple[Any, Any]], options: EnvOptions,
                 tiers: Tiers, loaded_of: dict[str, Any],
                 events: dict[str, list[tuple[str, dict[str, Any]]]],
                 inferred: dict[str, bool], outer: set[str],
                 clocks: list[tuple[str, int | None, str | None]],
                 launches: dict[tuple[Any, ...], tuple[str | None, LaunchLayers]],
                 last: dict[str, Rendered], use: _StoreUse) -> None:
    """Each run's environment rendered and written (a group at a time), and its clock
    added to ``clocks``; the store used through ``use`` alone."""
    rewritten: list[tuple[str, Rendered, dict[str, Any]]] = []
    for (run_id, server_args, era_label, old_env, old_fp, old_complete, old_version,
         old_tags, started_at, engine_name, key) in _runs_read(store, listed, use):
        previous = RunEnv.from_json(old_env)
        cli = {k: e.value for k, e in previous.entries.items()
               if e.source == "command line" and not k.startswith("tag.")}
        tags = {k[4:]: e.value for k, e in previous.entries.items()
                if e.source == "command line" and k.startswith("tag.")}
        cli.update(options.env)
        tags.update(options.tags)
        # the launches of a file mostly repeat a few configurations, a seed apart: each
        # launch's layers built from the launch before of its manifests, era and engine,
        # and rendered from the launch before (~600 entries a launch, a few differing)
        config = (str(key), era_label, engine_name)
        before = launches.get(config)
        if before is not None and before[0] == server_args:
            launch = before[1]
        else:
            launch = launch_layers(
                tiers=tiers, manifests=loaded_of[str(key)],
                server_args=json.loads(server_args) if server_args else None,
                format_era=era_label, engine=engine_name,
                like=before[1] if before is not None else None)
            launches[config] = (server_args, launch)
        said = log_facts(events.get(run_id, []))
        env = last[str(key)] = render(
            with_run_facts(launch.env, tiers=tiers, log_facts=said, cli_env=cli, tags=tags),
            like=last.get(str(key)))
        env_json, fp = env.json, env.fingerprint
        version = _engine_version(env, engine_name)
        has_outer = run_id in outer  # (then its clock may be read from the store)
        clocks.append((run_id, *(use.call if has_outer else _here)(
            clock_of, store, run_id, env, options.tz, started_at, has_outer,
            inferred.get(run_id, False))))
        tags_json = json.dumps(tags, default=str)
        unchanged = (env_json == old_env and fp == old_fp
                     and env.complete == old_complete and tags_json == old_tags
                     and (version is None or str(version.value) == old_version))
        if unchanged:
            continue  # an unchanged file and no new manifest: nothing to rewrite
        columns: dict[str, Any] = {"env_complete": env.complete, "tags": tags_json}
        if version is not None:
            columns["engine_version"] = str(version.value)
        rewritten.append((run_id, env, columns))
        # a run's environment holds ~1,000 entries: those of a file of 1,500 launches are
        # over a gigabyte held at once, so they are written a group at a time
        if len(rewritten) >= ENV_RUNS_PER_WRITE:
            use.write(rewritten)
            rewritten = []
    use.write(rewritten)


def _runs_read(store: Store, listed: list[tuple[Any, Any]], use: _StoreUse
               ) -> Iterator[tuple[Any, ...]]:
    """What :func:`attach_envs` reads of the runs ``listed`` (``(run_id, source_path)``),
    in their order, :data:`ENV_RUNS_PER_WRITE` at a time: a file of 3,000 launches holds
    ~60 MB of arguments and, read again, ~170 MB of environments.  The next group is read
    (through ``use``, after the write before it) while this one is rendered."""
    groups = [[str(r) for r, _ in listed[at:at + ENV_RUNS_PER_WRITE]]
              for at in range(0, len(listed), ENV_RUNS_PER_WRITE)]

    def read(ids: list[str]) -> dict[str, tuple[Any, ...]]:
        return {str(row[0]): row for row in store.all(
            "SELECT run_id, server_args, format_era, env, env_fingerprint, env_complete, "
            "engine_version, tags::VARCHAR, started_at, engine, source_path FROM runs "
            "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids])}

    ahead = use.submit(read, groups[0]) if groups else None
    for g, ids in enumerate(groups):
        assert ahead is not None
        rows = ahead.result()
        ahead = use.submit(read, groups[g + 1]) if g + 1 < len(groups) else None
        yield from (rows[r] for r in ids)


_OUTER_OFFSET_SQL = """
WITH p AS (SELECT line_no, outer_ts FROM logpipe_internal.line_prefixes
           WHERE run_id = $1 AND outer_ts_utc)
SELECT median(epoch(x.ts) - epoch(p.outer_ts)), count(*)
FROM p
JOIN (SELECT line_no, ts FROM logpipe_internal.batches
      WHERE run_id = $1 AND line_no IN (SELECT line_no FROM p)
      UNION ALL SELECT line_no, ts FROM logpipe_internal.events
      WHERE run_id = $1 AND line_no IN (SELECT line_no FROM p)) x
  USING (line_no)
WHERE x.ts IS NOT NULL
"""
"""The median of SGLang's stamp minus a host logger's UTC stamp on the same lines."""


def clock_of(store: Store, run_id: str, env: Rendered, tz: str | None, at: Any,
             has_outer: bool, date_inferred: bool) -> tuple[int | None, str | None]:
    """The offset of the run's stamps from UTC, and where it came from: ``--tz``, the
    manifest (the host's zone at capture), or a host logger's zoned stamps beside
    SGLang's; else unknown (NULL).  ``date inferred from the file's mtime`` is added when
    every stamp of the run was printed without a date."""
    offset: int | None = None
    source: str | None = None
    declared = env.entries.get("host.utc_offset_s")
    if tz is not None:
        offset, source = clock.offset_of(tz, at), f"--tz {tz}"
    elif declared is not None and declared.value is not None:
        zone = env.entries.get("host.timezone")
        name = str(zone.value) if zone is not None and zone.value else None
        try:  # the zone's offset at the run's start (daylight saving), else as captured
            offset = clock.offset_of(name, at) if name and "/" in name else int(declared.value)
        except (InputError, TypeError, ValueError):
            offset = int(declared.value)
        source = "manifest"
    elif has_outer:  # (most logs have no host logger's stamps)
        row = store.one(_OUTER_OFFSET_SQL, [run_id])
        if row and row[1]:
            offset = clock.rounded(float(row[0]))
            source = "outer stamps" if offset is not None else None
    if date_inferred:
        source = (source + "; " if source else "") + "date inferred from the file's mtime"
    return offset, source


def _dates_inferred(store: Store, source_ids: list[int],
                    runs: list[tuple[str, str]]) -> dict[str, bool]:
    """Per run (``(run_id, source_path)`` of the files ``source_ids``): every stamp was
    printed without a date (``HH:MM:SS``) and no wrapper gave one, so its date is the
    file's modification date, a guess.  A run without batch lines is dated like its file's
    other time-only stamps."""
    per_run: dict[str, bool] = {}
    per_file: dict[int, list[bool]] = {}
    for sid, r, n, t in store.all(
            "SELECT source_id, run_id, count(*), count(*) FILTER (WHERE ts_raw IS NOT NULL) "
            "FROM logpipe_internal.batches WHERE source_id IN (SELECT unnest(?::INTEGER[])) "
            "AND ts IS NOT NULL GROUP BY source_id, run_id", [source_ids]):
        per_run[str(r)] = bool(n and n == t)
        per_file.setdefault(int(sid), []).append(per_run[str(r)])
    whole = {sid: bool(v) and all(v) for sid, v in per_file.items()}
    return {r: per_run.get(r, whole.get(store.source_id(key), False)) for r, key in runs}


def _engine_version(env: Rendered, engine_name: str | None) -> Any:
    """The entry of the run's engine package (``pkg.<its first package installed>``)."""
    from logpipe.engines import engine_named

    engine = engine_named(engine_name) if engine_name else None
    for package in engine.packages if engine is not None else ():
        entry = env.entries.get(f"pkg.{package}")
        if entry is not None:
            return entry
    return None
