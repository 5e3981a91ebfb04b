"""How long do `logpipe compare` and `logpipe check` take on a large database?

Builds a database from the bundled samples, clones the mission's runs (rows and all)
until it holds N runs, then replicates every run's batch rows (shifted in time) until the
database holds about M batch rows, and times `compare` of two runs and `check` (all
built-in suites, in a fresh process as a user runs it) against it: once after the
database was built (it brings the per-run statistics and pair verdicts up to date), then
again as after an ingest that changed nothing, and after one run changed.  Targets:
compare < 1 s and check < 10 s with 1,000 runs and 50 M batch rows.  Run by hand:

    python benchmarks/compare_many_runs.py [--runs 1000] [--rows 50M]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from logpipe import summaries
from logpipe.analysis.compare import compare
from logpipe.ingest import ingest_paths
from logpipe.store import Store

ROOT = Path(__file__).resolve().parent.parent


def build(db: Path, runs: int) -> None:
    ingest_paths([ROOT / "sample_logs"], db)
    with Store.open(db) as store:
        have = store.one("SELECT count(*) FROM runs")[0]  # type: ignore[index]
        src = [r[0] for r in store.all("SELECT run_id FROM runs WHERE name LIKE 'baseline%' "
                                       "OR name LIKE 'eagle3%'")]
        i = 0
        while have < runs:
            rid = src[i % len(src)]
            new = f"clone{i:07d}"
            with store.transaction():
                store.con.execute(
                    "INSERT INTO runs SELECT * REPLACE (? AS run_id, name || '-' || ? AS name) "
                    "FROM runs WHERE run_id = ?", [new, new, rid])
                for table in ("batches", "events", "http_requests"):
                    store.con.execute(f"INSERT INTO {table} SELECT * REPLACE (? AS run_id) "
                                      f"FROM {table} WHERE run_id = ?", [new, rid])
                store.con.execute("INSERT INTO run_env SELECT * REPLACE (? AS run_id) "
                                  "FROM run_env WHERE run_id = ?", [new, rid])
            have += 1
            i += 1


def grow_rows(db: Path, rows: int) -> None:
    """Replicate every run's batch rows, each copy an hour later, to about ``rows``."""
    with Store.open(db) as store:
        (have,) = store.one("SELECT count(*) FROM batches")  # type: ignore[misc]
        copies = max(1, round(rows / max(have, 1)))
        if copies > 1:
            store.con.execute(
                "INSERT INTO batches SELECT b.* REPLACE (b.line_no + k * 10000000 AS line_no, "
                "b.ts + to_hours(k) AS ts) FROM batches b, range(1, ?) AS t(k)", [copies])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rows", default="0", help="batch rows to reach, e.g. 50M")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", type=Path, default=None,
                        help="keep the database here (reused as it is when it exists)")
    parser.add_argument("--no-check", action="store_true", help="time compare only")
    args = parser.parse_args()
    rows = int(float(args.rows.rstrip("Mm")) * 1e6) if args.rows[-1] in "Mm" \
        else int(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "many.duckdb"
        t0 = time.perf_counter()
        if not db.exists():
            build(db, args.runs)
            print(f"cloned runs in {time.perf_counter() - t0:.1f} s", flush=True)
            grow_rows(db, rows)
        with Store.open(db, read_only=True) as store:
            n_runs, n_rows = store.one(
                "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM batches)")  # type: ignore[misc]
        print(f"{n_runs} runs, {n_rows} batch rows ({time.perf_counter() - t0:.1f} s)")
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            result = compare(str(db), ["baseline-untuned", "eagle3-untuned"])
            times.append(time.perf_counter() - t)
        print(f"compare (2 runs of {n_runs}, verdict {result[0].verdict}): median "
              f"{statistics.median(times):.3f} s, "
              f"min {min(times):.3f} s over {args.repeat} runs; target < 1 s")
        if args.no_check:
            return
        checks = []
        for _ in range(1 + max(1, min(args.repeat, 3))):
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "logpipe.cli", "check", "--db",
                                   str(db)], capture_output=True, text=True)
            checks.append(time.perf_counter() - t)
        print(f"check, first (brings per-run statistics and pair verdicts up to date): "
              f"{checks[0]:.2f} s")
        print(f"check (all suites, fresh process, exit {proc.returncode}): median "
              f"{statistics.median(checks[1:]):.2f} s over {len(checks) - 1} runs after the "
              f"first; target < 10 s")
        with Store.open(db) as store:  # one run changed, as ingest leaves it
            store.con.execute(
                "DELETE FROM batches WHERE run_id = (SELECT min(run_id) FROM runs WHERE role "
                "= 'speculative') AND line_no = (SELECT max(line_no) FROM batches WHERE "
                "run_id = (SELECT min(run_id) FROM runs WHERE role = 'speculative'))")
            summaries.repair_ranges(store)  # what ingest's fold_ranges does for it
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "logpipe.cli", "check", "--db", str(db)],
                       capture_output=True, text=True)
        print(f"check after one speculative run changed: {time.perf_counter() - t:.2f} s")

if __name__ == "__main__":
    main()
