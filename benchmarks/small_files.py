"""A folder of many small server logs: per-file cost of ``logpipe ingest``.

    python benchmarks/small_files.py [--files 10000] [--rounds 1] [--workdir DIR]

Builds ``--files`` small logs in folders of 100 (``node-K/``), each a copy of one of the
bundled small real and era logs (SGLang of every era and wrapper, vLLM, 5-15 KB) with its
digits redrawn, so that no file duplicates another, then times ``logpipe ingest`` of the
whole folder into a fresh database (as a user runs it: a process, imports included) and
reports the time per file.  Target: 10,000 small files in ≤ 60 s (6 ms a file).
Writes ``benchmarks/RESULTS-small-files.md`` (a hand-written ``## Analysis`` is kept).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import (  # noqa: E402
    PY,
    SAMPLES,
    _jitter,
    compile_package,
    run_once,
    run_tree,
    write_results,
)

SEEDS = ("eras/*.log", "eras/vllm/*.log", "wrappers/*.log", "restarts/*.log")


def make_folder(root: Path, files: int) -> int:
    """``files`` small logs under ``root`` (reused when already there); their bytes."""
    done = root / ".complete"
    if done.exists() and int(done.read_text()) == files:
        return sum(p.stat().st_size for p in root.rglob("*.log"))
    seeds = [p for pattern in SEEDS for p in sorted(SAMPLES.glob(pattern))
             if p.stat().st_size <= 20_000]
    texts = [p.read_text().splitlines() for p in seeds]
    rnd = random.Random(5)
    total = 0
    for i in range(files):
        folder = root / f"node-{i // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = texts[i % len(texts)]
        text = "\n".join(_jitter(ln, rnd) for ln in lines) + "\n"
        path = folder / f"server-{i:05d}.log"
        path.write_text(text)
        total += len(text)
    done.write_text(str(files))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    compile_package()
    work = args.workdir or Path(tempfile.gettempdir()) / "logpipe-small-files"
    folder = work / f"fleet-{args.files}"
    print(f"building {args.files} small logs under {folder} ...", flush=True)
    size = make_folder(folder, args.files)
    db = work / "small.duckdb"
    rm = [PY, "-c", f"import pathlib; [pathlib.Path(p).unlink(missing_ok=True) for p in "
                    f"({str(db)!r}, {str(db) + '.wal'!r})]"]
    times, peak = [], 0.0
    for _ in range(args.rounds):
        subprocess.run(rm, check=True)
        wall, rss = run_tree([PY, "-m", "logpipe.cli", "ingest", str(folder), "--db", str(db)])
        times.append(wall)
        peak = max(peak, rss)
    again, _ = run_once([PY, "-m", "logpipe.cli", "ingest", str(folder), "--db", str(db)])
    best = sorted(times)[len(times) // 2]
    per = best / args.files * 1000
    text = [f"# Many small files ({args.files:,} logs, {datetime.now():%Y-%m-%d})", "",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}.  `benchmarks/small_files.py --files {args.files}`: "
            f"{args.files:,} copies of the bundled small logs ({size / 1e6:.1f} MB, digits "
            f"redrawn), 100 a folder, one `logpipe ingest` of the folder into a fresh "
            f"database, median of {args.rounds}.", "",
            "| measurement | seconds | per file | peak RSS MB (all processes) |",
            "|---|---|---|---|",
            f"| ingest of {args.files:,} small files | {best:.1f} | {per:.1f} ms | {peak:.0f} |",
            f"| re-ingest, unchanged | {again:.1f} | {again / args.files * 1000:.2f} ms | – |",
            "", "| target | measured | met |", "|---|---|---|",
            f"| 10,000 small files ≤ 60 s (6 ms a file) | {per:.1f} ms a file "
            f"({per * 10:.0f} s for 10,000) | {'yes' if per <= 6 else 'NO'} |"]
    out = "\n".join(text) + "\n"
    print(out)
    write_results(HERE / "RESULTS-small-files.md", out)


if __name__ == "__main__":
    main()
