"""Worker processes (:mod:`logpipe.workers`) with requests and replies bigger than
a pipe holds, given from several threads at once: every reply comes back to its request,
none waits on another (a request written under the lock the replies are taken with
deadlocked here: the worker wrote a reply nobody could take while the request waited for
it to read)."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from logpipe.workers import Workers


def test_big_requests_and_replies_from_several_threads_all_come_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (started elsewhere than the checkout: the worker finds this logpipe and its tests by
    # the path it is given, not by its working directory)
    monkeypatch.chdir(tmp_path)
    pool = Workers(1, "tests.worker_echo:echo", None)
    sent: list[tuple[bytes, Future[object]]] = []
    lock = threading.Lock()
    done = threading.Event()

    def give(k: int) -> None:
        for i in range(6):
            value = bytes([k * 16 + i]) * (3 * 1024 * 1024)  # ~46 times a pipe's 64 KB
            future = pool.submit(value)
            with lock:
                sent.append((value, future))

    def run() -> None:
        threads = [threading.Thread(target=give, args=(k,), daemon=True) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for _, future in sent:
            future.result()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    try:
        finished = done.wait(timeout=90)
        if not finished:  # deadlocked: the worker killed, so that the writes fail and end
            for proc in pool._procs:
                proc.kill()
        assert finished
        assert len(sent) == 18
        for value, future in sent:
            assert future.result(timeout=10) == value
    finally:
        pool.shutdown()


def test_replies_interrupted_by_signals_in_an_unbuffered_worker_come_back_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # PYTHONUNBUFFERED=1 (as in the Dockerfile) makes a worker's sys.stdout.buffer a raw
    # file, whose write may write part of a reply when a signal comes while the pipe is
    # full: the ingest then waited for the rest for ever (seen under a sampling profiler)
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    pool = Workers(1, "tests.worker_echo:echo_interrupted", None)
    pid = pool._procs[0].pid
    done = threading.Event()

    def interrupt() -> None:
        for _ in range(20_000):  # (bounded: ~20 s at most)
            if done.wait(0.001):
                return
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                return

    try:
        assert pool.submit(b"handler installed").result(timeout=30) == b"handler installed"
        threading.Thread(target=interrupt, daemon=True).start()
        values = [bytes([i]) * (4 * 1024 * 1024) for i in range(8)]
        futures = [pool.submit(value) for value in values]
        deadline = time.monotonic() + 30
        got = []
        for future in futures:
            try:
                got.append(future.result(timeout=max(0.0, deadline - time.monotonic())))
            except TimeoutError:
                got.append(None)  # (a short reply: the reader waits for bytes never sent)
        assert got == values
    finally:
        done.set()
        pool._procs[0].kill()
        pool.shutdown()
