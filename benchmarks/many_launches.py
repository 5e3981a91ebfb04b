"""How long does a file holding many launches take to ingest?

A driver log that restarts the server for every configuration holds hundreds of launches
in one file: the ingest's per-run work (naming, inserting, arguments, environment, clock)
must be a few statements per file, not per run.  Builds a log of N short launches (the
generator's startup section and a few batch lines each), then, in interleaved rounds, times
(a) a full `ingest` of it into a fresh database and (b) the parse alone (the same
parser over the same blocks, no database), and reports the medians and their ratio.
Target: a 450-run file in ≤ 3 s.  Run by hand:

    python benchmarks/many_launches.py [--runs 450] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logpipe.engines.sglang.parser import LogState, finish_chunk, prepare_block  # noqa: E402
from logpipe.ingest import ingest_paths  # noqa: E402
from logpipe.readers import line_blocks, open_binary  # noqa: E402
from tests.conftest import load_generator  # noqa: E402


def build(path: Path, runs: int) -> int:
    g = load_generator()
    lines: list[str] = []
    start = datetime(2026, 5, 4, 9, 0, 0)
    for i in range(runs):
        log = g.Log(g.MISSION_ERA, start + timedelta(minutes=5 * i), random.Random(i))
        g.startup(log, g.base_args(g.MISSION_MODEL, tp_size=1), "Qwen3ForCausalLM", tp=1)
        g.workload(log, requests=1, lines_per_req=4, tps=60.0, noise=0.5)
        lines += log.lines
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def parse_only(path: Path) -> float:
    t = time.perf_counter()
    state, line_no = LogState(), 1
    with open_binary(path) as fh:
        for block in line_blocks(fh):
            finish_chunk(prepare_block(block, line_no, "2026-05-04"), state)
            line_no += block.count(b"\n")
    return time.perf_counter() - t


def ingest_once(path: Path, work: Path) -> float:
    db = work / f"db-{time.monotonic_ns()}.duckdb"
    t = time.perf_counter()
    result = ingest_paths([path], db)
    elapsed = time.perf_counter() - t
    assert result.runs_created > 0 and not result.failed
    db.unlink()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=450)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log = work / "many.log"
        n = build(log, args.runs)
        ingest, parse = [], []
        for _ in range(args.rounds):  # interleaved: a slow spell hits both alike
            ingest.append(ingest_once(log, work))
            parse.append(parse_only(log))
        mi, mp = statistics.median(ingest), statistics.median(parse)
        print(f"{args.runs} launches, {n} lines, {log.stat().st_size / 1e6:.1f} MB")
        print(f"ingest: median {mi:.2f} s of {[round(x, 2) for x in ingest]}")
        print(f"parse alone: median {mp:.2f} s of {[round(x, 2) for x in parse]}")
        print(f"ingest / parse: {mi / mp:.1f}x; per run: {mi / args.runs * 1000:.1f} ms "
              f"(target: ≤ 3 s for 450 runs: {'met' if mi <= 3 else 'NOT met'})")


if __name__ == "__main__":
    main()
