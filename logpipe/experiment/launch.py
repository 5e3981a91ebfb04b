"""``logpipe launch``: one launch (manifest first, then server, bench, stop) and its ingest."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logpipe.env import capture, redact_command
from logpipe.errors import InputError
from logpipe.experiment.plan import level_command, split_env
from logpipe.experiment.supervise import (
    STOP_WAIT_S,
    Echo,
    LaunchError,
    Server,
    bench_concurrency,
    fetch,
    fill,
    http_get,
    http_post,
    port_in_use,
    run_bench,
    server_address,
)
from logpipe.interrupts import catch_signals

PROFILE_AFTER_DECODE_LINES = 1
"""``--profile``: the profiler is started once the bench has made the server print this
many decode batch lines (the engine's :class:`logpipe.engines.ServerRules`), so that it
records busy decode steps, not the first prefills or an idle loop (an idle profile
recorded the idle loop: tens of MB, minutes of export).  One is enough: SGLang prints
one every ``--decode-log-interval`` steps (40 by default), so the first means the server
has been decoding that long."""


PROFILE_EXPORT_WAIT_S = 120.0
"""Seconds the server is given, after the bench, to finish writing its trace."""


# ---------------------------------------------------------------------------- launch

@dataclass
class LaunchOptions:
    name: str | None = None
    out: Path | None = None
    ready_timeout: float = 600.0
    bench: str | None = None
    bench_timeout: float | None = None
    """Seconds after which the bench is killed (and the launch reported failed)."""
    db: Path = Path("logpipe.duckdb")
    env: dict[str, str] = field(default_factory=dict)
    """Variables set for the server (and the bench) on top of this process's."""
    launch_info: dict[str, Any] = field(default_factory=dict)
    """Recorded in the manifest's ``launch`` section (plan, arm, round)."""
    stop_waits: tuple[float, float] = STOP_WAIT_S
    echo: Echo | None = None
    """Receives every server and bench line, and logpipe's own progress lines."""
    record_only: bool = False
    """Write the run folder and ingest nothing (standard library only: a bare GPU box)."""
    profile_steps: int | None = None
    """Profile this many busy scheduler steps during the bench (the engine's profile
    endpoint: SGLang's ``POST /start_profile`` with ``num_steps``, never open-ended); the
    trace goes to ``profile/`` in the run folder, and only that window of the run is
    marked profiled."""
    phases: str | None = None
    """``host`` or ``sync``: time the server's speculative phases (and a plain server's
    decode steps) with the engine's phase hook; ``sync`` synchronises the device at
    every phase boundary (exact, slower: the run is profiled)."""
    levels: tuple[float, ...] = ()
    """Run the bench once per load level, in order, with ``--<level_by> LEVEL`` set (none:
    once, as given)."""
    level_by: str = "max_concurrency"
    store: Any = None
    """The database ``ab`` holds open for writing through its whole campaign: the launch
    is ingested into it, and a reader that waits for the file meanwhile is let in
    (:meth:`logpipe.store.Store.lent`).  None: ``db`` is opened for the ingest."""


@dataclass
class LaunchResult:
    name: str
    out: Path
    status: str
    """ok | bench failed | failed | timeout | interrupted"""
    server_exit: int | None = None
    bench_exit: int | None = None
    run_ids: list[str] = field(default_factory=list)
    steady_tps: float | None = None
    steady_stratum: int | None = None
    """The running-request level ``steady_tps`` is the median at (``run_summary``)."""
    server_info: dict[str, Any] | None = None
    tail: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "ok" else 130 if self.status == "interrupted" else 2


def _run_dir(options: LaunchOptions) -> tuple[str, Path]:
    name = options.name or time.strftime("run-%Y%m%d-%H%M%S")
    out = options.out if options.out is not None else Path("runs") / name
    if options.out is not None and options.name is None:
        name = out.name
    out.mkdir(parents=True, exist_ok=True)
    if (out / "server.log").exists() and (out / "server.log").stat().st_size:
        raise InputError("the run folder already holds a server log", path=out,
                         hint="give another --name or --out (a run folder is one launch)")
    return name, out


def _server_info(server: Server, host: str, port: int) -> dict[str, Any] | None:
    """What the server says it is, from the first of its engine's info endpoints that
    answers."""
    paths = dict.fromkeys(p for r in server.rules for p in r.info_endpoints)
    for path in paths:
        status, body = http_get(f"http://{host}:{port}{path}", timeout=10)
        if status == 200:
            try:
                data = json.loads(body)
            except ValueError:
                continue
            return data if isinstance(data, dict) else {"value": data}
    return None


class _Profiler:
    """``--profile STEPS``: a thread, started with the bench, that waits until the server
    is decoding (:data:`PROFILE_AFTER_DECODE_LINES` decode lines since the bench began),
    then asks it for a profile of ``steps`` scheduler steps.  SGLang stops the profiler
    by itself after them and writes the trace (``Profiling done``); :meth:`finish` waits
    for that, bounded, and returns what happened, for the manifest."""

    def __init__(self, server: Server, host: str, port: int, out: Path, steps: int,
                 say: Echo, target: int | None = None) -> None:
        endpoint = next((r.profile_endpoint for r in server.rules if r.profile_endpoint), None)
        self.server, self.steps, self.say = server, steps, say
        self.url = f"http://{host}:{port}{endpoint}" if endpoint else None
        self.dir = out / "profile"
        self.bench_done = threading.Event()
        self.record: dict[str, Any] = {"steps": steps, "output_dir": "profile",
                                       "status": "not started"}
        self.target = target
        """The running batch to profile at: the bench's concurrency, where it says one (a
        profile at the bench's head or tail is of batch 1, and explains nothing of batch
        32)."""
        self._start = server.decode_lines
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _steady(self) -> bool:
        if self.server.decode_lines - self._start < PROFILE_AFTER_DECODE_LINES:
            return False
        return self.target is None or self.server.running >= self.target

    def _run(self) -> None:
        if self.url is None:
            self.record["status"] = "not taken"
            self.record["message"] = "the server's engine has no profile endpoint logpipe knows"
            return
        peak = 0
        while not self._steady():
            if self.server.decode_lines > self._start:
                peak = max(peak, self.server.running)
            if self.bench_done.is_set() or not self.server.alive():
                self.record["status"] = "not taken"
                self.record["message"] = (
                    "the bench ended before the server was decoding" if self.target is None
                    or self.server.decode_lines == self._start else
                    f"the bench ended before the server ran {self.target} requests at once "
                    f"(its concurrency; {peak} at most)")
                return
            time.sleep(0.02)
        self.record["batch_size"] = self.server.running
        if self.target is not None:
            self.record["target_batch"] = self.target
        self.dir.mkdir(exist_ok=True)
        activities = ["CPU", "GPU"] if _has_gpu() else ["CPU"]
        # SGLang records Python stacks unless told not to (with_stack defaults to on):
        # five busy steps of a GPU server were then 2.3 M python_function events, 27 MB
        body = {"num_steps": self.steps, "activities": activities,
                "output_dir": str(self.dir.resolve()), "with_stack": False,
                "record_shapes": False}
        self.record.update(activities=activities, after_decode_lines=PROFILE_AFTER_DECODE_LINES,
                           with_stack=False, requested_at=time.time())
        self.say(f"logpipe: profiling {self.steps} steps ({', '.join(activities)})")
        status, text = http_post(self.url, body, timeout=60)
        self.record["response"] = f"{status} {text[:200]}".strip()
        self.record["status"] = "requested" if status == 200 else "refused"

    def finish(self) -> dict[str, Any]:
        self.bench_done.set()
        self._thread.join(timeout=70)
        if self.record["status"] == "requested":
            if self.server.profile_done.wait(PROFILE_EXPORT_WAIT_S):
                self.record["status"] = "done"
                self.record["traces"] = sorted(
                    str(p.relative_to(self.dir.parent)) for p in self.dir.rglob("*")
                    if p.is_file())
            else:
                self.record["status"] = "unfinished"
                self.record["message"] = (f"no 'Profiling done' within "
                                          f"{PROFILE_EXPORT_WAIT_S:g} s after the bench")
        if self.record["status"] != "done":
            self.say(f"logpipe: profile {self.record['status']}"
                     + (f": {self.record['message']}" if self.record.get("message") else ""))
        return self.record


SCRAPE_ATTEMPTS = 3
SCRAPE_TIMEOUT_S = 5.0
"""A snapshot of the engine's counters is asked for this many times, each waiting this
long, before the level goes without one (a server busy with its bench may not answer
at once)."""


class _Counters:
    """The engine's Prometheus counters, scraped before and after each bench (each load
    level) into ``metrics/`` of the run folder, each snapshot headed by a comment line that
    says when and at which level it was taken (:data:`logpipe.engines.counters.HEADER`).
    A server that does not serve them is asked once; the manifest says why none were
    taken and what would make it serve them."""

    def __init__(self, server: Server, host: str, port: int, out: Path, say: Echo) -> None:
        path = next((r.metrics_endpoint for r in server.rules if r.metrics_endpoint), None)
        self.hint = next((r.metrics_hint for r in server.rules if r.metrics_hint), None)
        self.url = f"http://{host}:{port}{path}" if path else None
        self.dir, self.say = out / "metrics", say
        self.record: dict[str, Any] = {"endpoint": path, "snapshots": 0,
                                       "status": "not taken" if path is None else "taken"}

    def take(self, phase: str, level: float | None, level_by: str) -> None:
        from datetime import UTC, datetime

        from logpipe.engines.counters import HEADER

        if self.url is None or self.record["status"] != "taken":
            return
        errors = []
        for attempt in range(SCRAPE_ATTEMPTS):  # a busy server may drop one connection
            taken_at = datetime.now(UTC)
            status, body, error = fetch(self.url, SCRAPE_TIMEOUT_S)
            if status:
                break
            errors.append(error)
            time.sleep(0.5 * (attempt + 1))
        if status != 200 or not body:
            where = f"{phase} {level_by} {level:g}" if level is not None else phase
            if status and status != 200:  # the server says it has none: not asked again
                self.record["status"] = "not served"
                self.record["message"] = (f"GET {self.record['endpoint']} answered {status}"
                                          + (f" ({self.hint})" if self.hint else ""))
                self.say(f"logpipe: no engine counters: {self.record['message']}")
            else:
                self.record.setdefault("missed", []).append(where)
                self.say(f"logpipe: no engine counters {where}: GET "
                         f"{self.record['endpoint']} answered nothing in {SCRAPE_ATTEMPTS} "
                         f"tries ({'; '.join(dict.fromkeys(errors))})")
            return
        head = {"taken_at": taken_at.isoformat(), "phase": phase,
                "url": self.record["endpoint"]}
        if level is not None:
            head.update(level=level, level_by=level_by)
        name = (f"{level_by}-{level:g}-{phase}.prom" if level is not None
                else f"bench-{phase}.prom")
        self.dir.mkdir(exist_ok=True)
        (self.dir / name).write_bytes((HEADER + json.dumps(head) + "\n").encode() + body)
        self.record["snapshots"] += 1


def _has_gpu() -> bool:
    """An NVIDIA device is visible here (the profiler then records GPU activity too)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia").exists()


def _write_manifest(out: Path, command: list[str], env: Mapping[str, str],
                    info: dict[str, Any]) -> None:
    manifest = capture(command, environ=env)
    manifest["launch"] = info
    (out / "env.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")


def _phase_env(command: list[str], mode: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables that load the engine's phase hook into the server's interpreter."""
    from logpipe import engines

    if mode not in ("host", "sync"):
        raise InputError(f"unknown phases mode {mode!r}", hint="use host or sync")
    engine = engines.engine_of_command(command)
    hook = engines.phase_hook_dir(engine) if engine is not None else None
    if hook is None:
        raise InputError("no phase hook for this server command",
                         hint="--phases times an engine logpipe knows ("
                         + ", ".join(e.display for e in engines.engines() if e.phase_hook)
                         + "): start it with its own launch module")
    path = env.get("PYTHONPATH")
    return {"PYTHONPATH": hook + (os.pathsep + path if path else ""), "LOGPIPE_PHASES": mode}


def _update_launch(out: Path, **values: Any) -> None:
    path = out / "env.json"
    manifest = json.loads(path.read_text())
    manifest.setdefault("launch", {}).update(values)
    path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")


def launch(command: list[str], options: LaunchOptions | None = None) -> LaunchResult:
    """Launch ``command`` (a server), benchmark it, stop it and ingest its folder."""
    options = options or LaunchOptions()
    set_here, command = split_env(command)
    if set_here:  # `env A=1 python ...`: A is the server's environment, python its program
        options = dataclasses.replace(options, env={**options.env, **set_here})
    if not command:
        raise InputError("no server command", hint="put it after `--`: logpipe launch -- "
                         "python -m sglang.launch_server ...")
    host, port = server_address(command)
    if port_in_use(host, port):
        raise LaunchError(f"port {port} on {host} is already in use",
                          hint="stop what listens there, or pass another --port to the server")
    name, out = _run_dir(options)
    command = fill(shlex.join(command), out=out, port=port, name=name, host=host)
    env = {**os.environ, **options.env}
    info = {"name": name, **options.launch_info, "status": "starting"}
    if options.phases:
        env.update(_phase_env(command, options.phases, env))
        info["phases"] = options.phases
    if options.bench:
        # how the bench was asked for (as given: `{out}` and `$VARS` unfilled, secrets
        # redacted) is part of the launch's workload: two launches whose records look
        # alike but whose prompts differ (another --seed) are not repeats of one another
        info["bench"] = shlex.join(redact_command(shlex.split(options.bench)))
    if options.levels:
        info.update(levels=",".join(f"{v:g}" for v in options.levels),
                    level_by=options.level_by)
    _write_manifest(out, command, env, info)
    result = LaunchResult(name, out, "failed")
    with catch_signals(), options.store.lent() if options.store is not None \
            else contextlib.nullcontext():
        _supervise(command, options, out, name, host, port, env, result)
    _update_launch(out, status=result.status, server_exit=result.server_exit,
                   bench_exit=result.bench_exit)
    if not options.record_only:
        _ingest(out, options.store or options.db, result)
    return result


def _supervise(command: list[str], options: LaunchOptions, out: Path, name: str, host: str,
               port: int, env: Mapping[str, str], result: LaunchResult) -> None:
    """Start the server, wait for it, bench it, stop it: fills ``result``."""
    echo = options.echo
    say = echo or (lambda _line: None)
    server = Server(command, out / "server.log", env, echo)
    try:
        state = server.wait_ready(host, port, options.ready_timeout)
        if state != "ready":
            result.status = "failed" if state == "exited" else "timeout"
            result.tail = list(server.tail)
            result.message = (f"the server exited before it was ready (exit {server.proc.poll()})"
                              if state == "exited" else
                              f"the server was not ready after {options.ready_timeout:g} s")
        else:
            say(f"logpipe: {name} is ready on {host}:{port}")
            result.server_info = _server_info(server, host, port)
            if result.server_info is not None:
                (out / "server_info.json").write_text(
                    json.dumps(result.server_info, indent=2, default=str) + "\n")
            if options.bench:
                why = _run_benches(options, server, out, name, host, port, env, result)
                result.status = "ok" if result.bench_exit == 0 and why is None \
                    else "bench failed"
                if why is not None:
                    result.message = why
                    result.tail = list(server.tail)
                elif result.bench_exit != 0:
                    result.message = f"the bench exited with {result.bench_exit}"
            else:
                say("logpipe: the server is up; benchmark it, then press Ctrl-C to stop it")
                while server.alive():
                    time.sleep(0.5)
                result.status = "failed"
                result.message = f"the server exited by itself (exit {server.proc.poll()})"
                result.tail = list(server.tail)
    except KeyboardInterrupt:
        result.status = "ok" if not options.bench and server.ready_seen.is_set() \
            else "interrupted"
        result.message = "stopped by Ctrl-C or SIGTERM"
    finally:
        say(f"logpipe: stopping {name}")
        result.server_exit = server.stop(options.stop_waits)


def _run_benches(options: LaunchOptions, server: Server, out: Path, name: str, host: str,
                 port: int, env: Mapping[str, str], result: LaunchResult) -> str | None:
    """The bench, once or once per load level (lightest first as given); a level that
    fails ends the launch's benching.  The profiler, where asked, runs in the first.
    Returns why a bench was stopped, if one was."""
    assert options.bench is not None
    say = options.echo or (lambda _line: None)
    template = fill(options.bench, out=out, port=port, name=name, host=host)
    levels: list[float | None] = list(options.levels) or [None]
    counters = _Counters(server, host, port, out, say)
    why = None
    try:
        for i, level in enumerate(levels):
            why = _bench_level(options, server, out, host, port, env, result, template,
                               counters, i, level)
            if result.bench_exit != 0 or why is not None:
                break
    finally:
        _update_launch(out, counters=counters.record)
    return why


def _bench_level(options: LaunchOptions, server: Server, out: Path, host: str, port: int,
                 env: Mapping[str, str], result: LaunchResult, template: list[str],
                 counters: _Counters, i: int, level: float | None) -> str | None:
    """One bench (one load level), between two snapshots of the engine's counters."""
    say = options.echo or (lambda _line: None)
    # `{level}` in the bench command is the level (`--seed {level}`: other prompts at
    # every level, so that no cache learns them at the first)
    bench = template if level is None else level_command(
        [w.replace("{level}", f"{level:g}") for w in template], options.level_by, level)
    at = "" if level is None else f" [{options.level_by} {level:g}]"
    say(f"logpipe: bench{at}: {shlex.join(bench)}")
    profiler = None
    if options.profile_steps and i == 0:
        profiler = _Profiler(server, host, port, out, options.profile_steps, say,
                             bench_concurrency(shlex.join(bench)))
    console = "bench_console.txt" if level is None else \
        f"bench_console-{options.level_by}-{level:g}.txt"
    counters.take("before", level, options.level_by)
    result.bench_exit, why = run_bench(bench, out, env, options.echo, server,
                                       options.bench_timeout, console=console)
    if server.alive():
        counters.take("after", level, options.level_by)
    if profiler is not None:
        _update_launch(out, profile=profiler.finish())
    return why


def _ingest(out: Path, db: Any, result: LaunchResult) -> None:
    """Ingest the launch folder ``out`` into ``db`` (a store held open, or a path opened
    here once) and read back its runs and steady throughput."""
    from logpipe.db import using
    from logpipe.ingest import ingest_paths

    with using(db) as store:
        failed = ingest_paths([out], store).failed
        if failed:
            result.message = (result.message + "; " if result.message else "") + \
                "ingest failed for " + ", ".join(f"{f.path}: {f.detail}" for f in failed)
        log = str((out / "server.log").resolve())
        rows = store.all("SELECT r.run_id, s.steady_gen_throughput, s.steady_stratum "
                         "FROM runs r LEFT JOIN run_summary s USING (run_id) "
                         "WHERE r.source_path = ? ORDER BY r.run_seq", [log])
    result.run_ids = [r[0] for r in rows]
    if rows:
        result.steady_tps, result.steady_stratum = rows[-1][1], rows[-1][2]
