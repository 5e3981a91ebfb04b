"""How long does a file holding many launches take to ingest?

A driver log that restarts the server for every configuration holds hundreds of launches
in one file: the ingest's per-run work (naming, inserting, arguments, environment, clock)
must be a few statements per file, not per run.  Builds a log of N short launches (the
generator's startup section and a few batch lines each), then, in interleaved rounds, times
(a) a full `ingest` of it into a fresh database and (b) the parse alone (the same
parser over the same blocks, no database), and reports the medians and their ratio.
Target: a 450-run file in ≤ 3 s.

``--real``: the launches are the bundled real SGLang CPU recordings (whole launches,
startup to shutdown, with their request logs) concatenated, and the comparison is the
issue's: (c) the same lines as one run (every launch line but the first dropped), target
(a) ≤ 2x (c).  Run by hand:

    python benchmarks/many_launches.py [--runs 450] [--rounds 3] [--real]
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


def build_real(path: Path, one_run: Path, runs: int) -> int:
    """``runs`` real launches one after another, their clocks moved 5 minutes apart; and
    the same lines with every launch line but the first dropped (one run)."""
    logs = sorted((ROOT / "sample_logs" / "real-cpu").glob("*/server.log"))
    texts = [p.read_text().splitlines() for p in logs]
    start = datetime(2026, 12, 4, 9, 0, 0)
    lines: list[str] = []
    for i in range(runs):
        base = start + timedelta(minutes=5 * i)
        for line in texts[i % len(texts)]:
            if line.startswith("[") and line[1:5].isdigit():
                stamp = datetime.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")
                moved = base + (stamp - stamp.replace(hour=0, minute=0, second=0))
                line = f"[{moved:%Y-%m-%d %H:%M:%S}" + line[20:]
            lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    first = next(i for i, ln in enumerate(lines) if "server_args=" in ln)
    one_run.write_text("\n".join(ln for i, ln in enumerate(lines)
                                 if i <= first or "server_args=" not in ln) + "\n")
    return len(lines)


def parse_only(path: Path) -> float:
    t = time.perf_counter()
    state, line_no = LogState(), 1
    with open_binary(path) as fh:
        for block in line_blocks(fh):
            finish_chunk(prepare_block(block, line_no, "2026-05-04"), state)
            line_no += block.count(b"\n")
    return time.perf_counter() - t


def ingest_once(path: Path, work: Path, runs: int | None = None) -> float:
    db = work / f"db-{time.monotonic_ns()}.duckdb"
    t = time.perf_counter()
    result = ingest_paths([path], db)
    elapsed = time.perf_counter() - t
    assert result.runs_created > 0 and not result.failed
    assert runs is None or result.runs_created == runs, result.runs_created
    db.unlink()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=450)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--real", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log = work / "many.log"
        if args.real:
            one = work / "one-run.log"
            n = build_real(log, one, args.runs)
            many_s, one_s = [], []
            for _ in range(args.rounds):
                many_s.append(ingest_once(log, work, args.runs))
                one_s.append(ingest_once(one, work, 1))
            mm, mo = statistics.median(many_s), statistics.median(one_s)
            print(f"{args.runs} real launches, {n} lines, {log.stat().st_size / 1e6:.1f} MB")
            print(f"ingest, {args.runs} launches: median {mm:.2f} s of "
                  f"{[round(x, 2) for x in many_s]}")
            print(f"ingest, the same lines as one run: median {mo:.2f} s of "
                  f"{[round(x, 2) for x in one_s]}")
            print(f"many / one: {mm / mo:.2f}x (target ≤ 2x: "
                  f"{'met' if mm / mo <= 2 else 'NOT met'}); per launch "
                  f"{(mm - mo) / args.runs * 1000:.1f} ms more")
            return
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
