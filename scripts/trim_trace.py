"""Shrink a PyTorch profiler trace to what logpipe reads about the GPU: kernels, memory
copies and sets, CUDA runtime/driver calls (the launches), user annotations on both sides
(``step[DECODE bs=N]``, ``ProfilerStep#N``) and the process/thread names; every other CPU
event (``cpu_op``, ``python_function``, ...) is dropped and counted.

Standard library only, so it runs on a bare GPU machine next to ``ab --record-only``:

    python3 scripts/trim_trace.py TRACE.json.gz [...]   # rewrites each file in place

The trimmed trace says what was taken out: the top-level key ``logpipeTrimmed`` holds the
number of events dropped per category, and the events kept.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections import Counter
from pathlib import Path

KEPT_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
                   "user_annotation", "gpu_user_annotation", "ac2g"}


def trim(path: Path) -> tuple[int, Counter[str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    kept, dropped = [], Counter()
    for ev in trace.get("traceEvents", []):
        cat = ev.get("cat") if isinstance(ev, dict) else None
        if isinstance(ev, dict) and (ev.get("ph") == "M" or cat in KEPT_CATEGORIES):
            kept.append(ev)
        else:
            dropped[str(cat)] += 1
    trace["traceEvents"] = kept
    trace["logpipeTrimmed"] = {"kept_events": len(kept), "dropped_events": dict(dropped),
                               "kept_categories": sorted(KEPT_CATEGORIES)}
    tmp = path.with_name(path.name + ".tmp")
    with (gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) if path.suffix == ".gz"
          else open(tmp, "w", encoding="utf-8")) as out:
        json.dump(trace, out, separators=(",", ":"))
    os.replace(tmp, path)
    return len(kept), dropped


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name in argv:
        n, dropped = trim(Path(name))
        print(f"{name}: kept {n} events, dropped "
              + ", ".join(f"{k} {v}" for k, v in dropped.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
