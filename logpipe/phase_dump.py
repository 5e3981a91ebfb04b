"""Write speculative-decoding phase timings as logpipe reads them (no dependencies).

Paste this file into a worker, or ``from logpipe.phase_dump import PhaseRecorder``::

    rec = PhaseRecorder("phase_timings.jsonl", synchronize=None)   # or torch.cuda.synchronize
    for step in loop:
        with rec.phase("draft"):
            ...
        with rec.phase("verify"):
            ...
        with rec.phase("draft_extend"):
            ...
        rec.cycle(batch_size=bs, accepted_tokens=n_accepted)

To print the records into the server log instead (logpipe finds them there as
``phase_timings: {json}`` lines and gives them to that log's run), pass a logging
function and no path: ``PhaseRecorder(log=logging.getLogger(__name__).info)``.

Each ``cycle`` appends one JSON line (``schemas/phase_timings.md``): the wall time, the
batch size, the milliseconds of each phase (any names), the accepted tokens, and whether
timings were taken with device synchronisation.  Passing ``synchronize`` (a function
called at each phase boundary, such as ``torch.cuda.synchronize``) makes the timings exact
per phase but slows the server: logpipe marks such runs *profiled* and never uses them
as baselines.  Without it the timings are lightweight: host-side, overlapping the GPU.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

FORMAT_VERSION = 1
LOG_PREFIX = "phase_timings: "


class PhaseRecorder:
    def __init__(self, path: str | None = None, synchronize: Callable[[], Any] | None = None,
                 rank: int | None = None, log: Callable[[str], Any] | None = None) -> None:
        if (path is None) == (log is None):
            raise ValueError("give a path or a log function (one of them)")
        self._fh: TextIO | None = (
            open(path, "a", encoding="utf-8") if path else None)  # noqa: SIM115
        self._log = log
        self._sync = synchronize
        self._rank = rank
        self._phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._sync:
            self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._sync:
                self._sync()
            self._phases[name] = self._phases.get(name, 0.0) + (time.perf_counter() - start) * 1e3

    def cycle(self, batch_size: int, accepted_tokens: int, **extra: Any) -> None:
        record = {"v": FORMAT_VERSION, "ts": time.time(), "batch_size": batch_size,
                  "phases_ms": {k: round(v, 4) for k, v in self._phases.items()},
                  "accepted_tokens": accepted_tokens, "synchronized": self._sync is not None}
        if self._rank is not None:
            record["rank"] = self._rank
        record.update(extra)
        if self._fh is not None:
            self._fh.write(json.dumps(record) + "\n")
            self._fh.flush()
        elif self._log is not None:
            self._log(LOG_PREFIX + json.dumps(record))
        self._phases = {}

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()

    def __enter__(self) -> PhaseRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
