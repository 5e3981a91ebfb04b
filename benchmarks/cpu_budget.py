"""Where an ingest's CPU goes, by library: what a throughput target on two cores is up against.

    python benchmarks/cpu_budget.py LOG [LOG ...] [--target-mbs 150] [--frequency 499]

Each log is ingested once into a fresh database under ``perf record`` (Linux ``perf``;
it samples every thread and the worker processes alike), and the samples are summed by
the shared object they fell in: DuckDB, polars, the C lanes and kernels, the Python
interpreter, libc, the kernel, OpenSSL's SHA-256, numpy/pyarrow.  Beside it, the budget a
target rate leaves: ``size / rate`` seconds of wall time on every core the machine has,
less the process's start on one core (measured here as ``logpipe --version``); MB/s are
MiB a second, as ``benchmarks/mixes.py`` counts them.

The logs are the mixes ``benchmarks/mixes.py`` writes (``--workdir``).  Run by hand: it
needs ``perf`` and permission to sample (``perf_event_paranoid`` <= 2 for one's own
processes); it prints a Markdown table and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

GROUPS = (
    ("DuckDB", r"_duckdb"),
    ("polars", r"_polars_runtime"),
    ("C lanes and kernels", r"logpipe|_fastlane|_classify|_lines"),
    ("Python", r"libpython|^python|_json|_pickle|_struct|_sre|_datetime|_bisect|_queue"),
    ("libc", r"libc\.so|ld-linux|libstdc|libgcc|libm\.so"),
    ("kernel", r"kernel"),
    ("SHA-256", r"libcrypto|_hashlib"),
    ("numpy, pyarrow, BLAS", r"numpy|multiarray|arrow|openblas|_compute"),
)
"""Groups of shared objects, matched in order (the first that matches takes a sample)."""


def _group(dso: str) -> str:
    for name, pattern in GROUPS:
        if re.search(pattern, dso):
            return name
    return "other"


def cpu_by_group(data: Path) -> dict[str, float]:
    """Seconds of CPU by group from a ``perf record`` file (sample periods are ns of
    ``cpu-clock``)."""
    out = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "dso", "-g", "none",
         "-F", "period,dso", "--stdio"], capture_output=True, text=True, check=True).stdout
    seconds: dict[str, float] = defaultdict(float)
    for line in out.splitlines():
        parts = line.split(None, 1)
        if line.startswith("#") or len(parts) < 2 or not parts[0].isdigit():
            continue
        seconds[_group(parts[1].strip())] += int(parts[0]) / 1e9
    return seconds


def start_seconds() -> float:
    """The CLI's start and imports (``logpipe --version``), best of three."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "logpipe.cli", "--version"],
                       capture_output=True, check=True)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--target-mbs", type=float, default=150.0)
    ap.add_argument("--frequency", type=int, default=499)
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed: this benchmark samples with Linux perf")
    cores = os.cpu_count() or 1
    start = start_seconds()
    names = [name for name, _ in GROUPS] + ["other"]
    print(f"Machine: {cores} cores; start (`logpipe --version`) {start:.2f} s; target "
          f"{args.target_mbs:.0f} MB/s.\n")
    print("| log | MiB | wall s | CPU s | budget CPU s | "
          + " | ".join(names) + " |")
    print("|---|---|---|---|---|" + "---|" * len(names))
    with tempfile.TemporaryDirectory(prefix="logpipe-cpu-") as tmp:
        for log in args.logs:
            data, db = Path(tmp) / "perf.data", Path(tmp) / "cpu.duckdb"
            for p in Path(tmp).glob("cpu.duckdb*"):
                p.unlink()
            t = time.perf_counter()
            subprocess.run(["perf", "record", "-q", "-F", str(args.frequency), "-o", str(data),
                            "--", sys.executable, "-m", "logpipe.cli", "ingest", str(log),
                            "--db", str(db)], capture_output=True, check=True)
            wall = time.perf_counter() - t
            seconds = cpu_by_group(data)
            total = sum(seconds.values())
            mib = log.stat().st_size / 2**20
            # the target's wall time on every core, the start on one of them
            budget = mib / args.target_mbs * cores - start * (cores - 1)
            shares = [(seconds.get(n, 0.0), 100 * seconds.get(n, 0.0) / total) for n in names]
            cells = " | ".join(f"{s:.2f} ({pct:.0f}%)" for s, pct in shares)
            print(f"| {log.name} | {mib:.0f} | {wall:.2f} | {total:.2f} | {budget:.2f} | "
                  f"{cells} |", flush=True)


if __name__ == "__main__":
    main()
