"""Worker processes for the ingest's Python work on the second core: small logs parsed
ahead (:mod:`logpipe.ingest.ahead`), a big log's slow lines
(:mod:`logpipe.engines.sglang.slowlines`).

Each worker is ``python -m logpipe.workers``, a process of its own (not a fork of
the ingest, which holds DuckDB's and polars' threads, nor a ``multiprocessing`` spawn,
which re-runs the caller's main script in every child).  It reads requests from its
stdin and writes results to its stdout, each a pickle behind its length; it ends when its
stdin closes, so that a worker never outlives the ingest that started it, even one killed.
"""

from __future__ import annotations

import gc
import os
import pickle
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

_LENGTH = struct.Struct("<Q")


def _send(fh: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fh, _LENGTH.pack(len(data)))
    _write_all(fh, data)
    fh.flush()


def _write_all(fh: IO[bytes], data: bytes) -> None:
    """``data`` written whole: a raw file (``sys.stdout.buffer`` under
    ``PYTHONUNBUFFERED=1``, as in our Docker image) writes part of it when a signal comes
    while the pipe is full, and says how much."""
    view = memoryview(data)
    while view:
        written = fh.write(view)
        if written is None:  # (a non-blocking file that could take nothing now)
            written = 0
        view = view[written:]


def _read_exactly(fh: IO[bytes], size: int) -> bytes:
    """``size`` bytes, or fewer only where the other end closed (a raw file reads what
    the pipe holds, maybe less than asked)."""
    data = fh.read(size)
    if data is None or len(data) == size:
        return data or b""
    parts = [data]
    got = len(data)
    while got < size:
        part = fh.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _receive(fh: IO[bytes]) -> Any:
    """The next object, or EOFError when the other end closed."""
    head = _read_exactly(fh, _LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    size = _LENGTH.unpack(head)[0]
    data = _read_exactly(fh, size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 - our own process's output


class Workers:
    """``n`` worker processes that call the function ``spec`` (``module:function``) with
    ``setup`` and each request's arguments; :meth:`submit` gives a request to the one with
    the fewest waiting."""

    def __init__(self, n: int, spec: str, setup: Any) -> None:
        root = str(Path(__file__).resolve().parents[1])  # (where this logpipe is imported
        path = os.environ.get("PYTHONPATH")               # from, for a source checkout)
        env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
        # one polars thread a worker: the workers and the ingest share the cores already,
        # and a small file's frames are too small to split (a block of 50 small logs:
        # 2.3 ms of CPU a file with a thread per core, 1.7 ms with one)
        env.setdefault("POLARS_MAX_THREADS", "1")
        self._lock = threading.Lock()
        self._writing = [threading.Lock() for _ in range(n)]
        self._next = 0
        self._procs: list[subprocess.Popen[bytes]] = []
        self._waiting: list[dict[int, Future[Any]]] = []
        self._readers: list[threading.Thread] = []
        for k in range(n):
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "logpipe.workers"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                    start_new_session=True)  # (Ctrl-C is the ingest's: it stops them)
                self._procs.append(proc)
                assert proc.stdin is not None
                _send(proc.stdin, (spec, setup))
            except OSError:
                self.shutdown(wait=False)  # (those started end with their input)
                raise
            self._waiting.append({})
            reader = threading.Thread(target=self._read, args=(k,), daemon=True,
                                      name=f"logpipe-worker-{k}")
            reader.start()
            self._readers.append(reader)

    def submit(self, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            k = min(range(len(self._procs)), key=lambda i: len(self._waiting[i]))
            self._next += 1
            ident = self._next
            self._waiting[k][ident] = future
        # written outside the lock the reader takes for each reply: a request bigger than
        # the pipe holds waits for the worker to read it, and the worker may first have to
        # write a reply bigger than the pipe holds, which the reader must be free to take
        with self._writing[k]:
            stdin = self._procs[k].stdin
            try:
                assert stdin is not None
                _send(stdin, (ident, args))
            except (OSError, ValueError) as exc:  # a worker gone: its requests fail
                with self._lock:
                    mine = self._waiting[k].pop(ident, None) is not None
                if mine:  # (else the reader has failed it: the worker ended)
                    future.set_exception(exc)
        return future

    def _read(self, k: int) -> None:
        stdout = self._procs[k].stdout
        assert stdout is not None
        try:
            while True:
                ident, ok, value = _receive(stdout)
                with self._lock:
                    future = self._waiting[k].pop(ident, None)
                if future is not None:
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(RuntimeError(value))
        except Exception:  # noqa: BLE001 - the worker ended: what it had fails
            pass
        with self._lock:
            waiting, self._waiting[k] = self._waiting[k], {}
        for future in waiting.values():
            future.set_exception(RuntimeError("the parsing worker ended"))

    def shutdown(self, wait: bool = True, cancel_futures: bool = True) -> None:
        """Close the workers' input (they end), then wait for them, killing one that
        does not end within seconds."""
        for proc in self._procs:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=10 if wait else 0.1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)


def main() -> None:
    """A worker: the function and its setup, then ``(ident, args)`` requests until the
    input ends."""
    from logpipe.sources import load

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # (nothing else may write to the results' stream)
    spec, setup = _receive(stdin)
    function = load(spec)
    while True:
        try:
            ident, args = _receive(stdin)
        except EOFError:
            # the ingest waits for this process's end: its objects are left to the
            # operating system, not traversed by the collector's passes at the exit
            # (a worker that parsed small logs ended in 0.11 s, 0.03 s so; one that read
            # a big log's slow lines in 0.06 s, 0.02 s so)
            gc.freeze()
            return
        reply: tuple[int, bool, Any]
        try:
            reply = (ident, True, function(setup, *args))
        except Exception as exc:  # noqa: BLE001 - the ingest reads the file itself
            reply = (ident, False, f"{type(exc).__name__}: {exc}")
        _send(stdout, reply)


if __name__ == "__main__":
    main()
