"""A server as a process group: started with its output to a log, watched for its ready,
decode and profile lines (its engine's :class:`logpipe.engines.ServerRules`), stopped by
SIGINT, then SIGTERM, then SIGKILL of the whole group; a watchdog stops it if logpipe
dies.  The bench runs beside it the same way."""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from logpipe.env import launch_args
from logpipe.errors import InputError, LogpipeError

DEFAULT_PORT = 30000
"""The port of a server command that names none and no engine (SGLang's default)."""
STOP_WAIT_S = (30.0, 10.0)
"""Seconds to wait after SIGINT, then after SIGTERM, before the next signal."""
TAIL_LINES = 20
CONCURRENCY_RE = re.compile(r"--max-concurrency[ =](\d+)")


def bench_concurrency(bench: str | None) -> int | None:
    """The concurrency a bench command holds the server at (``--max-concurrency N``)."""
    found = CONCURRENCY_RE.search(bench or "")
    return int(found.group(1)) if found else None

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
fd, said = int(sys.argv[1]), b""
try:
    while True:
        got = os.read(fd, 64)
        if not got:
            break
        said += got
except OSError:
    pass
try:  # the group, named on the pipe by what was started (none named: none started)
    group = int(said.split(b"\\n", 1)[0])
except ValueError:
    sys.exit(0)
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


def watchdog() -> int:
    """A lifeline for a process group: a small process, in a session of its own, that
    kills the group named by the first line written on the returned pipe end
    (:func:`start_watched`), SIGTERM then SIGKILL, as soon as that end is closed by every
    process holding it, which the kernel does when logpipe dies, even by SIGKILL.  Close
    it (``os.close``) once the group is stopped."""
    read_end, write_end = os.pipe()
    try:
        subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(read_end)],
                         pass_fds=(read_end,), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    except OSError:  # no watchdog: the group is still stopped on every other exit path
        os.close(write_end)
        write_end = -1
    finally:
        os.close(read_end)
    return write_end


_NAMES_ITS_GROUP = """
import os, sys
fd = int(sys.argv[1])
os.write(fd, b"%d\\n" % os.getpgid(0))
os.close(fd)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def start_watched(command: list[str], env: Mapping[str, str], **popen: Any
                  ) -> tuple[subprocess.Popen[bytes], int]:
    """``command`` started in a process group of its own, and the lifeline of the
    :func:`watchdog` that stops the group if logpipe dies.  The watchdog is started first
    and the command through a few lines of Python that write their group on the lifeline,
    then become the command (``exec``: the same process, its pid and its command line):
    the watchdog sees the lifeline close only once the group is named, so that logpipe
    killed at any moment leaves nothing running (named by logpipe after the start, a
    SIGKILL in between left the bench running: seen under a loaded test run).  Raises
    OSError where the command cannot be started."""
    lifeline = watchdog()
    argv = list(command)
    if lifeline >= 0:
        if not argv or shutil.which(argv[0], path=env.get("PATH", os.defpath)) is None:
            _close(lifeline)
            name = argv[0] if argv else ""
            raise FileNotFoundError(errno.ENOENT, "no such executable", name)
        # (-I: the command's environment, PYTHONPATH and all, is not the trampoline's)
        argv = [sys.executable, "-I", "-c", _NAMES_ITS_GROUP, str(lifeline), *argv]
    try:
        proc = subprocess.Popen(argv, env=dict(env), start_new_session=True,
                                pass_fds=(lifeline,) if lifeline >= 0 else (), **popen)
    except OSError:
        _close(lifeline)
        raise
    return proc, lifeline


def _close(fd: int) -> None:
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass

def fetch(url: str, timeout: float = 2.0) -> tuple[int, bytes, str]:
    """``GET url``: status (0: no answer), body and, where the body is empty, why."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - localhost
            return int(resp.status), resp.read(), ""
    except urllib.error.HTTPError as exc:
        return int(exc.code), b"", str(exc)
    except (OSError, ValueError) as exc:
        return 0, b"", f"{type(exc).__name__}: {exc}"


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    status, body, _ = fetch(url, timeout)
    return status, body


class Server:
    """A server process group whose output goes to a log file (and to ``echo``)."""

    def __init__(self, command: list[str], log_path: Path, env: Mapping[str, str],
                 echo: Echo | None = None) -> None:
        from logpipe.engines import engine_of_command, engines, server_rules

        engine = engine_of_command(command)
        self.ready_lines = ((engine.ready_line,) if engine is not None and engine.ready_line
                            # a command no engine claims (a wrapper script): any engine's
                            else tuple(e.ready_line for e in engines() if e.ready_line))
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
            self.proc, self._lifeline = start_watched(
                command, env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        except OSError as exc:
            self._log.close()
            raise LaunchError(f"cannot start the server: {exc}",
                              hint="check the command after `--`") from exc
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
            if port_in_use(host, port) and http_get(f"http://{host}:{port}/health")[0] == 200:
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


def run_bench(command: list[str], out: Path, env: Mapping[str, str], echo: Echo | None,
              server: Server, timeout: float | None,
              console: str = "bench_console.txt") -> tuple[int, str | None]:
    """Run the bench; its output goes to ``console`` in ``out`` (and to ``echo``).  Returns
    its exit code and why it was stopped, if it was: the server died under it, or it ran
    past ``timeout`` seconds (it is then killed, with its process group)."""
    with open(out / console, "wb") as log:
        try:
            proc, lifeline = start_watched(command, env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as exc:
            log.write(f"cannot start the bench: {exc}\n".encode())
            return 127, None

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


def http_post(url: str, body: Mapping[str, Any], timeout: float) -> tuple[int, str]:
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
