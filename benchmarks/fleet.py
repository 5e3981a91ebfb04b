"""Fleet ingest into a Parquet lake: files/s and MB/s for 1 and 2 Ray workers, against
the one-process ingest into a database and the in-process lake ingest, in one run.

    python benchmarks/fleet.py [--folders 16] [--size 8MB] [--repeat 1] [--workdir DIR]

Generates a fleet: ``--folders`` folders (``rack-K/node-N``) each holding one steady
server log of ``--size`` (the generator of ``benchmarks/run.py``; every copy gets its own
first line, so none is a duplicate of another), then measures, each into a fresh target:

- ``logpipe ingest FLEET --db DB`` (one process, one database: the peer);
- ``logpipe ingest FLEET --lake DIR --engine local`` (the fleet code, tasks in-process);
- ``logpipe ingest FLEET --lake DIR --engine ray --workers 1`` and ``--workers 2``
  (a local Ray started by the command: its start-up is included, as a user pays it).

Prints a table with ratios against the one-process ingest and writes
``benchmarks/RESULTS-fleet.md``.  Not run by the tests.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import (  # noqa: E402
    PY,
    compile_package,
    generate_steady,
    measure,
    parse_size,
    write_results,
)


def make_fleet(root: Path, folders: int, size: int) -> tuple[int, int]:
    """(files, bytes) of a fleet under ``root`` (reused when already there)."""
    seed = root.parent / f"seed-{size}.log"
    if not seed.exists():
        print(f"generating {seed} ...", flush=True)
        generate_steady(seed, size)
    text = seed.read_bytes()
    total = 0
    for n in range(folders):
        folder = root / f"rack-{n // 8}" / f"node-{n % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "server.log"
        if not log.exists():
            log.write_bytes(f"host rack-{n // 8}/node-{n % 8} starting\n".encode() + text)
        total += log.stat().st_size
    return folders, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folders", type=int, default=16)
    ap.add_argument("--size", default="8MB", help="size of each server log")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    compile_package()
    work = args.workdir or Path(tempfile.gettempdir()) / "logpipe-fleet-bench"
    work.mkdir(parents=True, exist_ok=True)
    fleet = work / f"fleet-{args.folders}x{args.size}"
    files, nbytes = make_fleet(fleet, args.folders, parse_size(args.size))
    mb = nbytes / 2**20
    db, lake = work / "bench.duckdb", work / "lake"

    def fresh() -> list[str]:
        return [PY, "-c", "import pathlib, shutil; "
                f"[pathlib.Path(p).unlink(missing_ok=True) for p in ({str(db)!r}, "
                f"{str(db) + '.wal'!r})]; shutil.rmtree({str(lake)!r}, ignore_errors=True)"]

    logpipe = [PY, "-m", "logpipe.cli", "ingest", str(fleet)]
    cases = {
        "one process into a database (peer)": [*logpipe, "--db", str(db)],
        "lake, --engine local": [*logpipe, "--lake", str(lake), "--engine", "local"],
        "lake, --engine ray --workers 1": [*logpipe, "--lake", str(lake), "--engine", "ray",
                                           "--workers", "1"],
        "lake, --engine ray --workers 2": [*logpipe, "--lake", str(lake), "--engine", "ray",
                                           "--workers", "2"],
    }
    results = {}
    for name, cmd in cases.items():
        print(f"measuring {name} ...", flush=True)
        results[name] = measure(cmd, args.repeat, before=fresh())
    print("measuring a re-run of ray --workers 2 on the unchanged fleet ...", flush=True)
    results["re-run, unchanged (ray --workers 2)"] = measure(cases[
        "lake, --engine ray --workers 2"], args.repeat)
    base = results["one process into a database (peer)"]["seconds"]
    table = ["| measurement | seconds | files/s | MB/s | peak RSS MB (driver) | "
             "speed vs one process |", "|---|---|---|---|---|---|"]
    for name, r in results.items():
        s = r["seconds"]
        table.append(f"| {name} | {s:.2f} | {files / s:.2f} | {mb / s:.1f} | "
                     f"{r['rss_mb']:.0f} | {base / s:.2f}× |")
    cpu = platform.processor() or platform.machine()
    head = (f"# Fleet ingest\n\n{files} server logs ({mb:.0f} MB in all, {args.size} each) in "
            f"{files} folders; {cpu}, {len(__import__('os').sched_getaffinity(0))} cores; "
            f"{datetime.now():%Y-%m-%d}; median of {args.repeat}.\n\n")
    text = head + "\n".join(table) + "\n"
    print(text)
    write_results(HERE / "RESULTS-fleet.md", text)
    shutil.rmtree(lake, ignore_errors=True)


if __name__ == "__main__":
    main()
