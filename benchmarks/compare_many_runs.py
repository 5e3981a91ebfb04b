"""How long does `logpipe compare` take on a database of many runs?

Builds a database from the bundled samples, then clones the mission's runs (rows and all)
until it holds N runs, and times `compare` of two runs against it, several times.
Run by hand:  python benchmarks/compare_many_runs.py [--runs 1000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from logpipe.compare import compare
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "many.duckdb"
        t0 = time.perf_counter()
        build(db, args.runs)
        with Store.open(db, read_only=True) as store:
            n_runs, n_rows = store.one(
                "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM batches)")  # type: ignore[misc]
        print(f"built {n_runs} runs, {n_rows} batch rows in {time.perf_counter() - t0:.1f} s")
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            result = compare(str(db), ["baseline-untuned", "eagle3-untuned"])
            times.append(time.perf_counter() - t)
        assert result[0].verdict == "improvement"
        print(f"compare (2 runs of {n_runs}): median {statistics.median(times):.3f} s, "
              f"min {min(times):.3f} s over {args.repeat} runs; target < 1 s")


if __name__ == "__main__":
    main()
