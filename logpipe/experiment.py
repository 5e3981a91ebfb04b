"""Own the experiment: launch a server, benchmark it, stop it, ingest what it wrote.

:func:`launch` is ``logpipe launch``: it writes the run's manifest before anything starts
(so the environment is captured by construction, with the packages of the interpreter
that runs the server), supervises the server as a process group, waits until it is
ready, asks it what it is (``/server_info``), runs the bench command, stops everything
(SIGINT, then SIGTERM, then SIGKILL of the whole group) and calls the same
:func:`logpipe.ingest.ingest_paths` the CLI uses.  :func:`run_plan` is ``logpipe ab``:
the arms of a plan launched in turn (ABBA or seeded random order), in one session, then
judged by :mod:`logpipe.analysis.compare` with the rounds of an arm pooled.

Invariants: no child process outlives :func:`launch` (Ctrl-C included); what the server
and the bench wrote is kept on disk whatever happens; the database is only written by
ingest, one transaction per file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from logpipe.analysis.client_metrics import metric_label, parse_primary
from logpipe.env import Tiers, capture, launch_args
from logpipe.errors import InputError, LogpipeError
from logpipe.interrupts import catch_signals

READY_LINES_ANY = ("The server is fired up and ready to roll", "Application startup complete.")
"""Ready lines of a server command no engine claims (a wrapper script): any engine's."""
DEFAULT_PORT = 30000
"""The port of a server command that names none and no engine (SGLang's default)."""
STOP_WAIT_S = (30.0, 10.0)
"""Seconds to wait after SIGINT, then after SIGTERM, before the next signal."""
TAIL_LINES = 20
PROFILE_AFTER_DECODE_LINES = 1
"""``--profile``: the profiler is started once the bench has made the server print this
many decode batch lines (the engine's :class:`logpipe.engines.ServerRules`), so that it
records busy decode steps, not the first prefills or an idle loop (an idle profile
recorded the idle loop: tens of MB, minutes of export).  One is enough: SGLang prints
one every ``--decode-log-interval`` steps (40 by default), so the first means the server
has been decoding that long."""
CONCURRENCY_RE = re.compile(r"--max-concurrency[ =](\d+)")


def bench_concurrency(bench: str | None) -> int | None:
    """The concurrency a bench command holds the server at (``--max-concurrency N``)."""
    found = CONCURRENCY_RE.search(bench or "")
    return int(found.group(1)) if found else None


PROFILE_EXPORT_WAIT_S = 120.0
"""Seconds the server is given, after the bench, to finish writing its trace."""

Echo = Callable[[str], None]


class LaunchError(LogpipeError):
    """The server could not be brought up (or a plan cannot be run)."""

    exit_code = 2


# ------------------------------------------------------------------------ the command

def server_address(command: list[str]) -> tuple[str, int]:
    """``(host to connect to, port)`` from the server command (its engine's default port
    without ``--port``; a server bound to every interface is reached on 127.0.0.1)."""
    from logpipe.engines import engine_of_command

    args = launch_args(command)
    engine = engine_of_command(command)
    default = engine.default_port if engine is not None and engine.default_port else \
        DEFAULT_PORT
    host = str(args.get("host") or "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    try:
        port = int(args.get("port") or default)
    except (TypeError, ValueError) as exc:
        raise InputError(f"--port is not a number: {args.get('port')!r}") from exc
    return host, port


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def fill(template: str, *, out: Path, port: int, name: str, host: str) -> list[str]:
    """A command template (bench or server) split like a shell would, with ``{out}``,
    ``{port}``, ``{name}`` and ``{host}`` filled in (environment variables expanded)."""
    text = os.path.expandvars(template)
    return [w.replace("{out}", str(out)).replace("{port}", str(port))
             .replace("{name}", name).replace("{host}", host) for w in shlex.split(text)]


# ----------------------------------------------------------------------- the process

_WATCHDOG = """
import os, signal, sys, time
fd, group = int(sys.argv[1]), int(sys.argv[2])
try:
    while os.read(fd, 1):
        pass
except OSError:
    pass
for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(group, sig)
    except OSError:
        sys.exit(0)
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            os.killpg(group, 0)
        except OSError:
            sys.exit(0)
        time.sleep(0.2)
"""


def watchdog(group: int) -> int:
    """A lifeline for process group ``group``: a small process, in a session of its own,
    that kills the group (SIGTERM, then SIGKILL) as soon as the returned pipe end is
    closed, which the kernel does when logpipe dies, even by SIGKILL.  Close it (``os.close``)
    once the group is stopped."""
    read_end, write_end = os.pipe()
    try:
        subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(read_end), str(group)],
                         pass_fds=(read_end,), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    except OSError:  # no watchdog: the group is still stopped on every other exit path
        os.close(write_end)
        write_end = -1
    finally:
        os.close(read_end)
    return write_end


def _close(fd: int) -> None:
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass

def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - localhost
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""
    except (OSError, ValueError):
        return 0, b""


class Server:
    """A server process group whose output goes to a log file (and to ``echo``)."""

    def __init__(self, command: list[str], log_path: Path, env: Mapping[str, str],
                 echo: Echo | None = None) -> None:
        from logpipe.engines import engine_of_command, server_rules

        engine = engine_of_command(command)
        self.ready_lines = ((engine.ready_line,) if engine is not None and engine.ready_line
                            else READY_LINES_ANY)
        self.rules = server_rules(engine)
        """The engine's (or, for a command naming none, every engine's) decode line,
        profile endpoint and server-info endpoints."""
        self._decode = [(r.decode_line, re.compile(r.running) if r.running else None)
                        for r in self.rules if r.decode_line]
        self._profile_done = [r.profile_done_line for r in self.rules if r.profile_done_line]
        self.log_path = log_path
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.ready_seen = threading.Event()
        self.decode_lines = 0
        """Decode batch lines printed so far (``--profile`` waits for busy steps)."""
        self.running = 0
        """Running requests of the last decode line (``--profile`` waits for the bench's
        concurrency)."""
        self.profile_done = threading.Event()
        self._echo = echo
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed by stop()
        try:
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=dict(env), start_new_session=True)
        except OSError as exc:
            self._log.close()
            raise LaunchError(f"cannot start the server: {exc}",
                              hint="check the command after `--`") from exc
        self._lifeline = watchdog(self.proc.pid)
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self._log.write(raw)
            self._log.flush()
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            self.tail.append(line)
            if any(ready in line for ready in self.ready_lines):
                self.ready_seen.set()
            elif decode := next((d for d in self._decode if d[0] in line), None):
                self.decode_lines += 1
                found = decode[1].search(line) if decode[1] is not None else None
                if found:
                    self.running = int(found.group(1))
            elif any(done in line for done in self._profile_done):
                self.profile_done.set()
            if self._echo is not None:
                self._echo(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, host: str, port: int, timeout: float) -> str:
        """Wait for the ready line or ``/health`` answering 200.  Returns ``ready``,
        ``exited`` or ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_seen.wait(0.5):
                return "ready"
            if not self.alive():
                self._reader.join(timeout=5)
                return "ready" if self.ready_seen.is_set() else "exited"
            if port_in_use(host, port) and _get(f"http://{host}:{port}/health")[0] == 200:
                # /health answers before SGLang's warm-up request: give the ready line a
                # moment, then go on
                self.ready_seen.wait(5.0)
                return "ready"
        return "timeout"

    def stop(self, waits: tuple[float, float] = STOP_WAIT_S) -> int | None:
        """SIGINT to the server (it shuts its own children down, as on Ctrl-C in its
        terminal but without a KeyboardInterrupt traceback from each child), then SIGTERM
        and SIGKILL to the whole process group, each after its wait; returns the server's
        exit code."""
        try:
            if self.alive():
                for sig, wait, group in ((signal.SIGINT, waits[0], False),
                                         (signal.SIGTERM, waits[1], True)):
                    self._signal(sig, group)
                    try:
                        self.proc.wait(timeout=wait)
                        break
                    except subprocess.TimeoutExpired:
                        continue
                else:
                    self._signal(signal.SIGKILL)
                    self.proc.wait(timeout=10)
            self._signal(signal.SIGKILL)  # children that outlived their parent
            self._reader.join(timeout=5)
        finally:
            self._log.close()
            _close(self._lifeline)
        return self.proc.returncode

    def _signal(self, sig: int, group: bool = True) -> None:
        try:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                os.kill(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


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
        status, body = _get(f"http://{host}:{port}{path}", timeout=10)
        if status == 200:
            try:
                data = json.loads(body)
            except ValueError:
                continue
            return data if isinstance(data, dict) else {"value": data}
    return None


def _bench(command: list[str], out: Path, env: Mapping[str, str], echo: Echo | None,
           server: Server, timeout: float | None) -> tuple[int, str | None]:
    """Run the bench; its output goes to ``bench_console.txt`` (and to ``echo``).  Returns
    its exit code and why it was stopped, if it was: the server died under it, or it ran
    past ``timeout`` seconds (it is then killed, with its process group)."""
    with open(out / "bench_console.txt", "wb") as log:
        try:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=dict(env),
                                    start_new_session=True)
        except OSError as exc:
            log.write(f"cannot start the bench: {exc}\n".encode())
            return 127, None
        lifeline = watchdog(proc.pid)

        def pump() -> None:
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                log.write(raw)
                log.flush()
                if echo is not None:
                    echo(raw.decode("utf-8", errors="replace").rstrip("\r\n"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout if timeout else None
        why = None
        try:
            while proc.poll() is None:
                if not server.alive():
                    why = f"the server exited during the bench (exit {server.proc.poll()})"
                elif deadline is not None and time.monotonic() > deadline:
                    why = f"the bench ran past --bench-timeout {timeout:g} s"
                if why:
                    _kill_group(proc)
                    break
                time.sleep(0.2)
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            reader.join(timeout=5)
        code = proc.wait()
        _kill_group(proc)  # what the bench left behind in its group
        _close(lifeline)
        if why is None and not server.alive():  # the bench failed because the server died
            time.sleep(0.2)
            why = f"the server exited during the bench (exit {server.proc.poll()})"
        return code, why


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
        status, text = _post(self.url, body, timeout=60)
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


def _has_gpu() -> bool:
    """An NVIDIA device is visible here (the profiler then records GPU activity too)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia").exists()


def _post(url: str, body: Mapping[str, Any], timeout: float) -> tuple[int, str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - localhost
            return int(resp.status), resp.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", errors="replace")
    except (OSError, ValueError) as exc:
        return 0, str(exc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


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
                bench = fill(options.bench, out=out, port=port, name=name, host=host)
                say(f"logpipe: bench: {shlex.join(bench)}")
                profiler = None
                if options.profile_steps:
                    profiler = _Profiler(server, host, port, out, options.profile_steps, say,
                                         bench_concurrency(options.bench))
                result.bench_exit, why = _bench(bench, out, env, echo, server,
                                                options.bench_timeout)
                if profiler is not None:
                    _update_launch(out, profile=profiler.finish())
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


# ------------------------------------------------------------------------------ plans

@dataclass
class Arm:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    name: str
    baseline: Arm
    candidates: list[Arm]
    bench: str
    rounds: int = 2
    order: str = "abba"
    seed: int = 0
    ready_timeout: float = 600.0
    out: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    allow_env_diff: frozenset[str] = frozenset()
    bench_timeout: float | None = None
    sweep_key: str | None = None
    """The server argument a ``[sweep]`` varies across the candidates."""
    fail_fast: bool = True
    """Stop the campaign when an arm's first launch fails (``--keep-going``: go on)."""
    profile: int | None = None
    """Profile this many busy steps in the first launch of every arm (``launch --profile``)."""
    phases: str | None = None
    """Time every launch's phases (``launch --phases``): ``host`` or ``sync``."""
    primary: str | None = None
    """The deciding metric, declared before the data (``--primary``; None: the default)."""
    declared: frozenset[str] = frozenset()
    """Identity keys the arms differ in because the plan's own commands or ``[env]`` set
    them differently: the declared treatment (filled by :func:`check_plan`)."""
    warmup_launch: bool | None = None
    """An unjudged launch of the baseline before round 1; None: the default (on when the
    plan profiles or the engine compiles kernels at first use)."""

    @property
    def arms(self) -> list[Arm]:
        return [self.baseline, *self.candidates]

    def schedule(self) -> list[tuple[int, Arm]]:
        """``(round, arm)`` in launch order: ABBA alternates the order every round (so a
        drift over the session hits the arms alike); random shuffles each round with the
        seed."""
        rng = random.Random(self.seed)
        out = []
        for r in range(1, self.rounds + 1):
            arms = list(self.arms)
            if self.order == "random":
                rng.shuffle(arms)
            elif r % 2 == 0:
                arms.reverse()
            out += [(r, a) for a in arms]
        return out

    def run_name(self, arm: Arm, round_: int) -> str:
        return f"{self.name}-{arm.name}-r{round_}"


def _words(value: Any, where: str) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        return shlex.split(os.path.expandvars(value))
    raise InputError(f"{where} must be a command string or a list of words")


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def split_env(command: list[str]) -> tuple[dict[str, str], list[str]]:
    """``env A=1 B=2 python -m ...`` or ``A=1 python -m ...`` (the shell's ways to set a
    variable for one command) as ``({"A": "1", "B": "2"}, ["python", "-m", ...])``: the
    variables belong to the environment, the program is ``python``."""
    words = list(command)
    env: dict[str, str] = {}
    if words and Path(words[0]).name == "env":
        words = words[1:]
        while words and words[0] in ("-", "--"):
            words = words[1:]
    while words and _ASSIGNMENT.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def _arm(name: str, command: Any, env: Mapping[str, Any] | None, where: str) -> Arm:
    set_here, words = split_env(_words(command, where))
    if not words:
        raise InputError(f"{where} has no program after its variables")
    return Arm(name, words, {**set_here, **{k: str(v) for k, v in (env or {}).items()}})


def phases_key(value: Any) -> str | None:
    """The plan's ``phases``: true (host timers), "sync", or false/absent."""
    if value in (None, False):
        return None
    if value is True or value == "host":
        return "host"
    if value == "sync":
        return "sync"
    raise InputError(f"phases = {value!r} in the plan", hint='use true, "sync" or false')


PLAN_KEYS = ("name", "rounds", "order", "seed", "ready_timeout", "bench_timeout", "out",
             "allow_env_diff", "bench", "env", "baseline", "candidates", "sweep",
             "fail_fast", "profile", "phases", "primary", "warmup_launch")
ARM_KEYS = ("name", "command", "env")


def _known_keys(data: Mapping[str, Any], known: tuple[str, ...], where: str,
                path: Path) -> None:
    """Refuse a key the plan format does not have (``round = 3`` ran 2 rounds, silently)."""
    import difflib

    for key in data:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            raise InputError(f"unknown key {key!r} in {where}" + (
                f": did you mean {near[0]!r}?" if near else ""), path=path,
                hint="the keys are listed in schemas/plan.md: " + ", ".join(known))


def _with_flag(command: list[str], key: str, value: Any) -> list[str]:
    """``command`` with ``--key-as-flag value`` set (replaced when present)."""
    flag = "--" + key.replace("_", "-")
    out, skip = [], False
    for i, word in enumerate(command):
        if skip:
            skip = False
            continue
        if word == flag:
            skip = i + 1 < len(command) and not command[i + 1].startswith("--")
            continue
        if word.startswith(flag + "="):
            continue
        out.append(word)
    return [*out, flag, str(value)]


def load_plan(path: Path, check: bool = True) -> Plan:
    """A plan file (``schemas/plan.md``); ``check``: refuse it now when its arms differ in
    an identity key that is not the treatment (:func:`check_plan`)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot read plan: {exc}", path=path,
                         hint="see schemas/plan.md for the format") from exc
    _known_keys(data, PLAN_KEYS, "the plan", path)
    for where, arm_data in [("[baseline]", data.get("baseline") or {})] + [
            (f"[[candidates]] #{i + 1}", c) for i, c in enumerate(data.get("candidates", []))]:
        if isinstance(arm_data, dict):
            _known_keys(arm_data, ARM_KEYS, where, path)
    try:
        base = data["baseline"]
        candidates = [_arm(str(c.get("name") or f"candidate{i + 1}"), c["command"],
                           c.get("env"), "candidates.command")
                      for i, c in enumerate(data.get("candidates", []))]
        plan = Plan(
            name=str(data.get("name") or path.stem),
            baseline=_arm(str(base.get("name") or "baseline"), base["command"],
                          base.get("env"), "baseline.command"),
            candidates=candidates, bench=str(data["bench"]),
            fail_fast=bool(data.get("fail_fast", True)),
            profile=int(data["profile"]) if data.get("profile") else None,
            phases=phases_key(data.get("phases")),
            primary=parse_primary(data.get("primary")),
            warmup_launch=(bool(data["warmup_launch"]) if "warmup_launch" in data else None),
            rounds=int(data.get("rounds", 2)), order=str(data.get("order", "abba")),
            seed=int(data.get("seed", 0)),
            ready_timeout=float(data.get("ready_timeout", 600)),
            out=Path(os.path.expandvars(data["out"])) if data.get("out") else None,
            env={k: str(v) for k, v in (data.get("env") or {}).items()},
            allow_env_diff=frozenset(data.get("allow_env_diff", [])),
            bench_timeout=float(data["bench_timeout"]) if data.get("bench_timeout") else None)
    except KeyError as exc:
        raise InputError(f"plan is missing {exc.args[0]!r}", path=path,
                         hint="a plan needs baseline.command, bench and at least one "
                         "[[candidates]]") from exc
    sweep = data.get("sweep") or {}
    if sweep:
        expanded = []
        for cand in plan.candidates:
            for key, values in sweep.items():
                for v in values:
                    short = key.removeprefix("speculative_")
                    expanded.append(Arm(f"{cand.name}-{short}{v}",
                                        _with_flag(cand.command, key, v), dict(cand.env)))
        plan.candidates = expanded
        plan.sweep_key = next(iter(sweep))
    if check:
        check_plan(plan)
    return plan


def check_plan(plan: Plan) -> None:
    """Refuse a plan whose arms differ in an identity key that is not the treatment: the
    experiment would not measure what it says it does."""
    if not plan.candidates:
        raise InputError("a plan needs at least one candidate")
    if plan.order not in ("abba", "random"):
        raise InputError(f"order must be abba or random, not {plan.order!r}")
    if plan.rounds < 1:
        raise InputError("rounds must be at least 1")
    names = [a.name for a in plan.arms]
    if len(set(names)) != len(names):
        raise InputError("arm names must be unique: " + ", ".join(names))
    tiers = Tiers.load()

    def keys(arm: Arm) -> dict[str, Any]:
        found = {f"arg.{k}": v for k, v in launch_args(arm.command).items()}
        found.update({k: v for k, v in {**plan.env, **arm.env}.items()})
        found["command.program"] = " ".join(arm.command[:3])
        return found

    from logpipe.engines import engine_of_command, engine_specific

    base = keys(plan.baseline)
    base_engine = engine_of_command(plan.baseline.command)
    for cand in plan.candidates:
        other = keys(cand)
        # arms of two engines: the engine is the treatment, with its arguments, packages
        # and variables; the machine, the model and the other variables must match
        cross = engine_of_command(cand.command) is not base_engine
        differing = sorted(k for k in set(base) | set(other)
                           if base.get(k) != other.get(k) and k not in plan.allow_env_diff
                           and not (cross and engine_specific(k))
                           and (k == "command.program" or tiers.tier(k) == "identity"))
        # a key the plan's own commands or [env] set differently is what the plan varies:
        # the declared treatment (a CUDA-graph or NCCL experiment), recorded in every
        # launch's manifest so that the campaign is judged with it wherever it is ingested
        plan.declared = plan.declared | {k for k in differing if k != "command.program"}
        bad = [k for k in differing if k == "command.program"]
        if bad:
            raise InputError(
                f"arm {cand.name!r} differs from {plan.baseline.name!r} in identity key(s) "
                + ", ".join(f"{k} ({base.get(k, '(unset)')!r} vs {other.get(k, '(unset)')!r})"
                            for k in bad)
                + ": that is not the treatment, so the comparison would be refused",
                hint="make the arms differ only in the treatment (speculative_*), or list the "
                "keys in the plan's allow_env_diff")


def warmup_default(plan: Plan) -> tuple[bool, str]:
    """Whether ``plan`` runs an unjudged warm-up launch of each arm before round 1, and
    why: as the plan says; by default when it profiles (the first launch's caches and the profiler's
    own start-up) or when an arm's engine compiles kernels at first use (SGLang and vLLM
    on a GPU: Triton, FlashInfer and torch.compile caches; a first launch on a fresh
    machine ran its bench at 0.56x the next one's)."""
    if plan.warmup_launch is not None:
        return plan.warmup_launch, ("the plan's warmup_launch" if plan.warmup_launch else "")
    if plan.profile:
        return True, "default: the plan profiles"
    from logpipe.engines import engine_of_command

    for arm in plan.arms:
        engine = engine_of_command(arm.command)
        words = " ".join(arm.command)
        if engine is not None and "--device cpu" not in words and "--device=cpu" not in words:
            return True, (f"default: {engine.name} compiles kernels at first use on a GPU "
                          "(cold caches)")
    return False, ""


@dataclass
class PlanResult:
    plan: Plan
    launches: list[tuple[int, Arm, LaunchResult]]
    comparisons: list[Any] = field(default_factory=list)
    rounds: dict[str, dict[int, float | None]] = field(default_factory=dict)
    """Per arm: each round's steady decode throughput (median; at ``rounds_stratum`` once
    judged)."""
    rounds_stratum: int | None = None
    sweep: Any = None
    """The sweep over the plan's ``[sweep]`` key, among its runs (:mod:`logpipe.analysis.sweep`)."""
    checks: list[tuple[str, str, list[dict[str, Any]]]] = field(default_factory=list)
    """The pairing and regression checks: (check, status, its failing rows that name a run
    of this plan)."""
    notes: list[str] = field(default_factory=list)
    exit_code: int = 0


def _launch_status(folder: Path) -> str | None:
    """The status a launch folder's manifest recorded (``ok``, ``failed``, ``starting`` for
    one killed before it finished...); None when it has no manifest."""
    try:
        return str(json.loads((folder / "env.json").read_text()).get("launch", {})
                   .get("status"))
    except (OSError, ValueError, AttributeError):
        return None


def _ingested(db: Any, name: str) -> list[str]:
    """The run ids a launch of this name has in the database ``db`` (a store held open,
    or a path: none without a file)."""
    if isinstance(db, Path) and not db.exists():
        return []
    try:
        from logpipe.db import using
    except ImportError:  # a bare machine (record-only): nothing was ingested here
        return []
    with using(db, read_only=True) as store:
        return [r for (r,) in store.all("SELECT run_id FROM runs WHERE name = ? "
                                        "ORDER BY run_seq", [name])]


def resume_plan(plan: Plan, out: Path, db: Any, resume: bool, notes: list[str],
                record_only: bool = False) -> dict[str, LaunchResult]:
    """The launches of ``plan`` already in ``out``: with ``resume``, every complete one
    (kept, not launched again) by name, and each partial one (a launch killed part-way)
    moved aside, said in ``notes``; without it, a campaign folder that already holds
    launches is refused, saying which are complete, partial and ingested."""
    done: dict[str, LaunchResult] = {}
    found = [(plan.run_name(arm, r), out / plan.run_name(arm, r)) for r, arm in plan.schedule()]
    found = [(n, f) for n, f in found if f.is_dir() and any(f.iterdir())]
    if not found:
        return done
    if not resume:
        said = []
        for name, folder in found:
            status = _launch_status(folder)
            said.append(f"{name} ({'complete' if status == 'ok' else 'partial: ' + str(status)}"
                        f"{', ingested' if _ingested(db, name) else ', never ingested'})")
        raise InputError(f"the campaign folder {out} already holds launches of this plan: "
                         + "; ".join(said),
                         hint="`logpipe ab PLAN --resume` continues it (complete launches "
                         "kept, a partial one moved aside), or give another --out")
    for name, folder in found:
        status = _launch_status(folder)
        if status == "ok":
            ids = _ingested(db, name)
            if not ids and not record_only:
                from logpipe.ingest import ingest_paths

                ingest_paths([folder], db)  # a campaign killed before it ingested it
                ids = _ingested(db, name)
                notes.append(f"{name}: complete but never ingested: ingested now")
            done[name] = LaunchResult(name, folder, "ok", run_ids=ids)
            continue
        aside = folder.with_name(f"{name}.partial-{time.strftime('%Y%m%d-%H%M%S')}")
        folder.rename(aside)
        notes.append(f"{name}: a partial launch (status {status}) moved aside to "
                     f"{aside.name}; launched again")
    if done:
        notes.append(f"resumed: {len(done)} complete launch(es) kept: " + ", ".join(done))
    return done


def run_plan(plan: Plan, db: Path, *, echo: Echo | None = None,
             stop_waits: tuple[float, float] = STOP_WAIT_S,
             options: Any = None, record_only: bool = False,
             resume: bool = False) -> PlanResult:
    """Launch every arm of ``plan`` in turn, then compare each candidate (its rounds
    pooled) with the baseline (its rounds pooled).  ``resume``: keep the complete
    launches a killed campaign left in its folder and run the rest.  The database is
    opened once, for writing, for the whole campaign (none when ``record_only``)."""
    check_plan(plan)
    if record_only:
        return _run_plan(plan, db, None, echo, stop_waits, options, record_only, resume)
    from logpipe.store import Store

    with Store.open(db) as store:
        return _run_plan(plan, db, store, echo, stop_waits, options, record_only, resume)


def _run_plan(plan: Plan, db: Path, store: Any, echo: Echo | None,
              stop_waits: tuple[float, float], options: Any, record_only: bool,
              resume: bool) -> PlanResult:
    out = plan.out if plan.out is not None else Path("runs") / plan.name
    resumed_notes: list[str] = []
    done = resume_plan(plan, out, store or db, resume, resumed_notes, record_only)
    launches: list[tuple[int, Arm, LaunchResult]] = []
    say = echo or (lambda _line: None)
    schedule = plan.schedule()
    stopped = ""
    # how the campaign is to be judged travels in every launch's manifest: `compare
    # --campaign` on the recorded folders, ingested anywhere, judges it as `ab` does
    judging = {"primary": plan.primary or "",
               "allow_env_diff": ",".join(sorted(plan.allow_env_diff)),
               "treatment": ",".join(sorted(plan.declared))}
    def run(arm: Arm, name: str, info: dict[str, Any], profile: int | None = None
            ) -> LaunchResult:
        return launch(arm.command, LaunchOptions(
            name=name, out=out / name, ready_timeout=plan.ready_timeout, bench=plan.bench,
            bench_timeout=plan.bench_timeout, db=db, env={**plan.env, **arm.env},
            stop_waits=stop_waits, echo=echo, record_only=record_only, phases=plan.phases,
            profile_steps=profile, store=store,
            launch_info={"plan": plan.name, "arm": arm.name, **info, **judging}))

    warm, why = warmup_default(plan)
    # every arm once: each compiles its own kernels at first use (a GPU campaign's first
    # NGRAM launch, after a warm-up of the baseline alone, still ran its bench cold)
    for arm in plan.arms if warm and not done else ():
        name = f"{plan.name}-warmup-{arm.name}"
        say(f"logpipe: [warm-up] {name} ({why}; not judged)")
        res = run(arm, name, {"arm": f"warmup-{arm.name}", "round": 0, "role": "warmup"})
        if res.status == "interrupted":
            return PlanResult(plan, [], notes=[f"interrupted during the warm-up launch {name}"],
                              exit_code=130)
    for i, (round_, arm) in enumerate(schedule, 1):
        name = plan.run_name(arm, round_)
        if name in done:
            say(f"logpipe: [{i}/{len(schedule)}] {name} (complete: kept)")
            launches.append((round_, arm, done[name]))
            continue
        say(f"logpipe: [{i}/{len(schedule)}] {name}")
        res = run(arm, name, {"round": round_,
                              "role": "baseline" if arm is plan.baseline else "candidate"},
                  plan.profile if all(a is not arm for _, a, _ in launches) else None)
        launches.append((round_, arm, res))
        if res.status == "interrupted":
            break
        first = sum(1 for _, a, _ in launches if a is arm) == 1
        if plan.fail_fast and first and res.status in ("failed", "timeout"):
            stopped = (f"stopped after {name}: the first launch of arm {arm.name!r} "
                       f"{'failed' if res.status == 'failed' else 'timed out'}"
                       + (f" ({res.message})" if res.message else "")
                       + f"; {len(schedule) - i} launch(es) not run (--keep-going runs them)")
            say(f"logpipe: {stopped}")
            break
    result = PlanResult(plan, launches, notes=list(resumed_notes))
    if warm and not done:
        result.notes.append(f"a warm-up launch of each arm ran before round 1 ({why}); "
                            "they are not judged")
    if stopped:
        result.notes.append(stopped)
    if record_only:
        for round_, arm, res in launches:
            result.rounds.setdefault(arm.name, {})[round_] = None
            if res.status != "ok":
                result.notes.append(f"{res.name}: {res.status}"
                                    + (f" ({res.message})" if res.message else ""))
        result.notes.append(f"recorded only: ingest {out} and judge it with `logpipe compare "
                            f"--campaign {plan.name}` (anywhere logpipe is installed)")
        failed = any(res.status != "ok" for _, _, res in launches) or bool(stopped)
        result.exit_code = 2 if failed else 0
        return result
    _judge_plan(result, store, options)
    return result


def _judge_plan(result: PlanResult, store: Any, options: Any) -> None:
    from logpipe.analysis.compare import judge_campaign, overall_exit
    from logpipe.analysis.results import EXIT_ERROR, Options

    plan = result.plan
    options = options or Options(allow_env_diff=plan.allow_env_diff, primary=plan.primary)
    by_arm: dict[str, list[str]] = {}
    for round_, arm, res in result.launches:
        result.rounds.setdefault(arm.name, {})[round_] = res.steady_tps
        if res.status != "ok":
            result.notes.append(f"{res.name}: {res.status}" + (f" ({res.message})"
                                                               if res.message else ""))
        if res.run_ids:
            by_arm.setdefault(arm.name, []).append(res.run_ids[-1])
    judged = [cand for cand in plan.candidates if cand.name in by_arm]
    for cand in plan.candidates:
        if plan.baseline.name not in by_arm or cand.name not in by_arm:
            result.notes.append(
                f"{cand.name}: no ingested run of "
                f"{'the baseline' if plan.baseline.name not in by_arm else cand.name} "
                "to judge")
            result.exit_code = EXIT_ERROR
    if plan.baseline.name in by_arm and judged:
        result.comparisons = judge_campaign(
            store, plan.name, options,
            launches={plan.baseline.name: by_arm[plan.baseline.name],
                      **{c.name: by_arm[c.name] for c in judged}},
            baseline=plan.baseline.name)
    _rounds_at_stratum(result)
    _plan_checks(result, store)
    if plan.sweep_key is not None:
        from logpipe.analysis.sweep import sweep

        try:
            result.sweep = sweep(store, plan.sweep_key,
                                 run_ids=[r for _, _, res in result.launches
                                          for r in res.run_ids])
        except LogpipeError as exc:
            result.notes.append(f"no sweep over {plan.sweep_key}: {exc}")
    if result.comparisons:
        code = overall_exit(result.comparisons)
        result.exit_code = result.exit_code or code
    if any(res.status in ("bench failed", "failed", "timeout")
           for _, _, res in result.launches) and result.exit_code == 0:
        result.exit_code = EXIT_ERROR


def _plan_checks(result: PlanResult, store: Any) -> None:
    """The pairing and regression suites, with their failing rows cut to this plan's runs
    (the database may hold other campaigns)."""
    from logpipe.checks import load_suites, run_checks

    names = {res.name for _, _, res in result.launches}
    # a campaign's arms are judged arm against arm: their rows are named PLAN-ARM
    names |= {f"{result.plan.name}-{arm.name}" for arm in result.plan.arms}
    try:
        report = run_checks(store, load_suites(["pairing", "regressions"]))
    except LogpipeError as exc:
        result.notes.append(f"checks not run: {exc}")
        return
    allowed = _allowed_pairings(result, store) if result.plan.allow_env_diff else set()
    for r in report.results:
        mine = [row for row in r.failing if names & {str(v) for v in row.values()}]
        if r.check.suite == "pairing":
            # a spec run whose nearest baseline differs only in keys the plan allows is
            # paired, as the judgement pairs it
            mine = [row for row in mine if str(row.get("run")) not in allowed]
        status = r.status if (mine or r.status in ("ERROR", "PASS", "SKIP")) else "PASS"
        result.checks.append((f"{r.check.suite}: {r.check.name}", status, mine))


def _allowed_pairings(result: PlanResult, store: Any) -> set[str]:
    """This plan's speculative runs that have a complete-environment, unprofiled,
    workload-overlapping baseline of this plan differing only in the allowed keys."""
    names = sorted({res.name for _, _, res in result.launches})
    allowed = sorted(result.plan.allow_env_diff)
    rows = store.con.execute(
        "SELECT DISTINCT spec_name FROM run_pairs WHERE spec_env_complete "
        "AND baseline_env_complete AND workload_overlap "
        "AND NOT coalesce(baseline_profiled, false) "
        "AND list_has_all(?::VARCHAR[], differing_keys) "
        "AND list_contains(?::VARCHAR[], spec_name) "
        "AND list_contains(?::VARCHAR[], baseline_name)",
        [allowed, names, names]).fetchall()
    return {r[0] for r in rows}


def _rounds_at_stratum(result: PlanResult) -> None:
    """Each arm's rounds as the judgement sees them (:func:`campaign_rounds`)."""
    from logpipe.analysis.compare import campaign_rounds

    plan = result.plan
    stratum, rounds = campaign_rounds(result.comparisons, plan.name, plan.baseline.name)
    if stratum is not None:
        result.rounds_stratum = stratum
    for arm, values in rounds.items():
        result.rounds.setdefault(arm, {}).update(values)


def plan_from_flags(*, baseline: str, candidates: list[str], bench: str, rounds: int,
                    order: str, seed: int, name: str | None, out: Path | None,
                    ready_timeout: float, check: bool = True) -> Plan:
    plan = Plan(name=name or "ab", baseline=_arm("baseline", baseline, None, "--baseline"),
                candidates=[_arm("candidate" if len(candidates) == 1 else f"candidate{i + 1}",
                                 c, None, "--candidate") for i, c in enumerate(candidates)],
                bench=bench, rounds=rounds, order=order, seed=seed, out=out,
                ready_timeout=ready_timeout)
    if check:
        check_plan(plan)
    return plan


def schedule_text(plan: Plan) -> str:
    """What ``ab --dry-run`` prints: the launches in order, each arm's command and
    variables, and that the identity check passed (it raises before otherwise)."""
    lines = [f"Plan {plan.name}: {len(plan.schedule())} launch(es), {plan.rounds} round(s), "
             f"order {plan.order}" + (", stops when an arm's first launch fails"
                                      if plan.fail_fast else ", keeps going on failures")]
    warm, why = warmup_default(plan)
    for arm in plan.arms if warm else ():
        lines.append(f"  [0] {plan.name}-warmup-{arm.name} (not judged: {why})")
    seen: set[str] = set()
    for i, (round_, arm) in enumerate(plan.schedule(), 1):
        profiled = plan.profile and arm.name not in seen
        seen.add(arm.name)
        lines.append(f"  [{i}] {plan.run_name(arm, round_)}"
                     + (f" (profiles {plan.profile} busy steps)" if profiled else ""))
    for arm in plan.arms:
        env = {**plan.env, **arm.env}
        lines.append(f"{arm.name}: {shlex.join(arm.command)}")
        if env:
            lines.append("  env: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())))
    lines.append(f"bench: {plan.bench}")
    lines.append("Deciding metric: " + (metric_label(plan.primary) + " (declared)"
                                         if plan.primary else "the default (compare --help)"))
    lines.append("Identity check: the arms differ only in the treatment"
                 + (" (declared by the plan's commands: " + ", ".join(sorted(plan.declared))
                    + ")" if plan.declared else "")
                 + (" and the allowed keys " + ", ".join(sorted(plan.allow_env_diff))
                    if plan.allow_env_diff else "")
                 + " (nothing was launched: --dry-run)")
    return "\n".join(lines) + "\n"
