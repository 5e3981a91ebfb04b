"""Worker processes (:mod:`logpipe.workers`) with requests and replies bigger than
a pipe holds, given from several threads at once: every reply comes back to its request,
none waits on another (a request written under the lock the replies are taken with
deadlocked here: the worker wrote a reply nobody could take while the request waited for
it to read)."""

from __future__ import annotations

import threading
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
