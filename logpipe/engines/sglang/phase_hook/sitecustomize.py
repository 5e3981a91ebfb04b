"""logpipe's phase timer for SGLang, injected by ``logpipe launch --phases``.

This folder is put first on the server's ``PYTHONPATH``, so Python runs this file at the
start of every process of the server (the HTTP server, its scheduler and detokenizer).
It changes nothing in the SGLang install: an import hook wraps, as SGLang's modules are
imported, the methods of a speculative cycle and its phases, and the model worker's
forward step, with host-side timers (``time.perf_counter``) on a CPU engine; on a GPU,
CUDA events recorded on the stream at the same boundaries (a replayed CUDA graph returns
to the host before the device is done: host timers would measure its launch, not its
work), read once the device has passed them, never waited for; with
``LOGPIPE_PHASES=sync``, host timers and ``torch.cuda.synchronize()`` at every phase
boundary (exact per phase, slower, and the records say ``synchronized``).  Each record
says which in ``clock`` (``host``, ``cuda_events``, ``sync``).  After each speculative
decode cycle (and each decode step of a non-speculative server) it logs one record
through SGLang's logger:

    phase_timings: {"v": 1, "ts": ..., "batch_size": 4, "phases_ms": {"draft": 0.4,
    "verify": 11.2, "other": 0.3}, "accepted_tokens": 6, "synchronized": false,
    "kind": "cycle", "hook_ms": 0.02, "period_ms": 13.1}

one per cycle (not aggregated: logpipe's phase statistics are per cycle), with
``hook_ms``, the time the hook itself spent on that cycle, so that its overhead is
measured, not assumed, and ``period_ms``, the time from the start of the previous decode
iteration to this one's where nothing but the scheduler ran between them (no prefill):
the whole iteration, scheduler included, of either arm, measured rather than assumed
the same for both.  Prefill forwards are not recorded.  The method names were read from
the released sources of SGLang 0.5.16 to 0.5.23; on another release the hook logs once
that it does nothing.

Standard library only; a ``sitecustomize`` further down the path is run after this one.
It composes with other site hooks: it runs once per interpreter even when another
``sitecustomize`` chains by executing this file again, puts one finder on ``sys.meta_path``,
and never asks a finder of its own kind (nor itself, re-entered) for a module.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import threading
import time
from typing import Any

MODE = os.environ.get("LOGPIPE_PHASES", "")
HERE = os.path.dirname(os.path.abspath(__file__))
RELEASES = ((0, 5, 16), (0, 5, 23))
"""The SGLang releases whose method names below were read from their sources."""

# module -> (class, method, role): "cycle" is one speculative decode cycle, "step" the
# model worker's forward (a decode step of a plain server; inside a cycle that no phase
# covers, the verify forward), anything else a phase of the cycle
TARGETS: dict[str, list[tuple[str, str, str]]] = {
    "sglang.srt.speculative.ngram_worker": [
        ("NGRAMWorker", "forward_batch_generation", "cycle"),
        ("NGRAMWorker", "_prepare_for_speculative_decoding", "draft")],
    "sglang.srt.speculative.eagle_worker_v2": [
        ("EAGLEWorkerV2", "forward_batch_generation", "cycle"),
        ("EagleDraftWorker", "draft", "draft"),
        ("EAGLEWorkerV2", "verify", "verify"),
        ("EagleDraftWorker", "_draft_extend_for_decode", "draft_extend")],
    "sglang.srt.managers.tp_worker": [
        ("TpModelWorker", "forward_batch_generation", "step")],
}

_log = logging.getLogger("sglang.srt.logpipe_phases")
_state = threading.local()


def _release() -> tuple[int, ...] | None:
    try:
        from importlib.metadata import version

        return tuple(int(x) for x in version("sglang").split(".")[:3])
    except Exception:  # noqa: BLE001 - no sglang, or an odd version string
        return None


def _sync() -> None:
    if MODE == "sync":
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.synchronize()


_CLOCK: list[str] = []


def _clock() -> str:
    """How phases are timed, decided once: ``sync`` (host timers with the device
    synchronised at each boundary), ``cuda_events`` (a GPU in ``host`` mode: CUDA events
    recorded on the stream, read once complete, so that a replayed CUDA graph is timed on
    the device without serialising the stream) or ``host`` (host timers: a CPU engine)."""
    if not _CLOCK:
        torch = sys.modules.get("torch")
        on_gpu = False
        if MODE == "host" and torch is not None:
            try:
                on_gpu = bool(torch.cuda.is_available())
            except Exception:  # noqa: BLE001 - a torch without CUDA
                on_gpu = False
        _CLOCK.append("sync" if MODE == "sync" else "cuda_events" if on_gpu else "host")
    return _CLOCK[0]


def _event() -> Any:
    torch = sys.modules["torch"]
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


_pending: list[tuple[Any, ...]] = []
"""Cycles timed with CUDA events whose end event the device has not reached yet: emitted,
in order, once it has (queried, never waited for, while the server runs)."""


def _flush(wait: bool = False) -> None:
    while _pending:
        kind, batch, spans, start, end, accepted, hook, period = _pending[0]
        if not wait and not end.query():
            return
        if wait:
            end.synchronize()
        _pending.pop(0)
        phases = {name: sum(a.elapsed_time(b) for a, b in pairs)
                  for name, pairs in spans.items()}
        _emit(kind, batch, phases, start.elapsed_time(end), accepted, hook, period)


atexit.register(lambda: _flush(wait=True) if _pending else None)


def _mode_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    for obj in (*args, kwargs.get("batch"), kwargs.get("forward_batch")):
        mode = getattr(obj, "forward_mode", None)
        if mode is not None:
            return obj, mode
    return None, None


def _batch_size(batch: Any) -> int | None:
    reqs = getattr(batch, "reqs", None)
    if reqs is not None:
        return len(reqs)
    size = getattr(batch, "batch_size", None)
    return size if isinstance(size, int) else None


def _accepted(result: Any) -> int | None:
    lens = getattr(result, "accept_lens", None)
    # read it only where reading costs no device synchronisation
    if lens is None or getattr(getattr(lens, "device", None), "type", "cpu") != "cpu":
        return None
    try:
        return int(lens.sum())
    except Exception:  # noqa: BLE001
        return None


def _decode_like(mode: Any) -> bool:
    """A decode iteration (or a speculative one's verify), not a prefill."""
    for name in ("is_decode", "is_target_verify"):
        check = getattr(mode, name, None)
        if check is not None and check():
            return True
    return False


def _period(st: Any, t0: float, decode: bool) -> float | None:
    """Milliseconds since the previous decode iteration began, when this one is a decode
    iteration too and no other forward (a prefill) ran between them."""
    last = getattr(st, "last_decode", None)
    st.last_decode = t0 if decode else None
    return (t0 - last) * 1000 if decode and last is not None else None


def _emit(kind: str, batch: Any, phases: dict[str, float], total: float,
          accepted: int | None, hook_ms: float, period: float | None) -> None:
    t0 = time.perf_counter()
    rest = total - sum(phases.values())
    if kind == "cycle" and rest > 0:
        phases["other"] = rest
    record = {"v": 1, "ts": round(time.time(), 6), "batch_size": _batch_size(batch),
              "phases_ms": {k: round(v, 4) for k, v in phases.items()},
              "accepted_tokens": accepted, "synchronized": MODE == "sync", "kind": kind,
              "clock": _clock()}
    if period is not None:
        record["period_ms"] = round(period, 4)
    record["hook_ms"] = round(hook_ms + (time.perf_counter() - t0) * 1000, 4)
    _log.info("phase_timings: %s", json.dumps(record, separators=(", ", ": ")))


def _wrap(func: Any, role: str) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        st = _state
        if role == "cycle":
            if getattr(st, "cycle", None) is not None:  # nested: time the outer one
                return func(*args, **kwargs)
            h0 = time.perf_counter()
            batch, mode = _mode_of(args[1:], kwargs)
            decode = batch is not None and _decode_like(mode)
            st.cycle, st.in_phase = {}, False
            events = _clock() == "cuda_events"
            if events:
                _flush()
            _sync()
            t0 = time.perf_counter()
            start = _event() if events else None
            st.hook = (t0 - h0) * 1000
            period = _period(st, t0, decode)
            try:
                result = func(*args, **kwargs)
                _sync()
                end = _event() if events else None
                total = (time.perf_counter() - t0) * 1000
            finally:
                phases, hook = st.cycle, st.hook
                st.cycle = None
            if decode and "verify" in phases:
                if events:
                    _pending.append(("cycle", batch, phases, start, end, _accepted(result),
                                     hook, period))
                else:
                    _emit("cycle", batch, phases, total, _accepted(result), hook, period)
            return result
        cycle = getattr(st, "cycle", None)
        if role == "step" and cycle is None:  # a plain server's forward
            h0 = time.perf_counter()
            batch, mode = _mode_of(args[1:], kwargs)
            is_decode = getattr(mode, "is_decode", None)
            if batch is None or is_decode is None or not is_decode():
                _period(st, h0, False)  # a prefill between two decode steps
                return func(*args, **kwargs)
            events = _clock() == "cuda_events"
            if events:
                _flush()
            _sync()
            t0 = time.perf_counter()
            start = _event() if events else None
            period = _period(st, t0, True)
            result = func(*args, **kwargs)
            size = _batch_size(batch)
            if events:
                end = _event()
                _pending.append(("step", batch, {"decode": [(start, end)]}, start, end, size,
                                 (t0 - h0) * 1000, period))
                return result
            _sync()
            ms = (time.perf_counter() - t0) * 1000
            _emit("step", batch, {"decode": ms}, ms, size, (t0 - h0) * 1000, period)
            return result
        if cycle is None or getattr(st, "in_phase", False):
            return func(*args, **kwargs)  # outside a cycle, or inside another phase
        name = "verify" if role == "step" else role
        h0 = time.perf_counter()
        _sync()
        st.in_phase = True
        events = _clock() == "cuda_events"
        t0 = time.perf_counter()
        e0 = _event() if events else None
        try:
            return func(*args, **kwargs)
        finally:
            e1 = _event() if events else None
            _sync()
            t1 = time.perf_counter()
            st.in_phase = False
            if events:
                cycle.setdefault(name, []).append((e0, e1))
            else:
                cycle[name] = cycle.get(name, 0.0) + (t1 - t0) * 1000
            st.hook += ((t0 - h0) + (time.perf_counter() - t1)) * 1000

    timed.__wrapped__ = func  # type: ignore[attr-defined]
    timed.__name__ = getattr(func, "__name__", "timed")
    return timed


def _patch(module: Any, targets: list[tuple[str, str, str]]) -> None:
    for cls_name, method, role in targets:
        cls = getattr(module, cls_name, None)
        func = getattr(cls, method, None) if cls is not None else None
        if func is None:
            _log.warning("logpipe phases: %s.%s.%s not found: not timed", module.__name__,
                         cls_name, method)
            continue
        setattr(cls, method, _wrap(func, role))


MARK = "_logpipe_phase_hook"
"""The attribute that marks this hook's finder and, on ``sys``, that the hook already ran in
this interpreter: another ``sitecustomize`` that chains by executing every
``sitecustomize.py`` it finds on the path may execute this file a second time, under another
module object whose ``_Finder`` is another class."""


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the target modules' methods right after they are imported."""

    _logpipe_phase_hook = True

    def __init__(self) -> None:
        self._resolving: set[str] = set()

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in TARGETS or name in self._resolving:
            return None
        # ask the other finders, never one of this hook's kind (a second copy of this file
        # would otherwise ask this one back) nor this one again while it asks (a finder
        # of someone else's that re-enters the import system finds none here)
        self._resolving.add(name)
        try:
            for finder in list(sys.meta_path):
                if getattr(finder, MARK, False) or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    loader = spec.loader
                    run = loader.exec_module

                    def exec_module(module: Any, run: Any = run) -> None:
                        run(module)
                        _patch(module, TARGETS[name])

                    loader.exec_module = exec_module  # type: ignore[method-assign]
                    return spec
            return None
        finally:
            self._resolving.discard(name)


def _install() -> None:
    if MODE not in ("host", "sync"):
        return
    release = _release()
    if release is None:
        return  # not an SGLang interpreter (a bench, a compiler): nothing to time
    if not RELEASES[0] <= release <= RELEASES[1]:
        _log.warning("logpipe phases: SGLang %s is not a release whose phase methods are "
                     "known (0.5.16 to 0.5.23): no phase timings",
                     ".".join(map(str, release)))
        return
    if not any(getattr(finder, MARK, False) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path, as if this one were not there."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if not getattr(sys, MARK, False):  # once per interpreter, however often this file runs
    setattr(sys, MARK, True)
    _install()
    _chain()
