"""The storage floor: load rows logpipe already parsed (its tables, as Parquet) into a
fresh logpipe database.  What DuckDB alone needs to store the rows of an ingest; an
ingest cannot be faster than this plus its parse.

    python storage_floor.py PARTS_DIR NEW_DB
"""

import sys
from pathlib import Path

from logpipe.store import Store, stored, stored_tables


def floor_tables() -> tuple[str, ...]:
    """The tables an ingest writes a file's rows to: the stored tables (``runs`` and the
    data tables) and the runs' environments (``run_envs``: ``runs.env``, kept beside the
    rows since migration 0027; ``run_env``: the same entries as rows)."""
    return (*stored_tables(), "run_envs", "run_env")


def main() -> None:
    parts, target = Path(sys.argv[1]), Path(sys.argv[2])
    with Store.open(target) as store, store.transaction():
        store.con.execute("SET preserve_insertion_order = false")  # as ingest loads its spool
        for table in floor_tables():
            files = sorted(str(p) for p in parts.glob(f"{table}-*.parquet"))
            if files:
                store.con.execute(f"INSERT INTO {stored(table)} SELECT * FROM read_parquet(?)",
                                  [files])
        (rows,) = store.one(f"SELECT count(*) FROM {stored('batches')}") or (0,)
    print(rows)


if __name__ == "__main__":
    main()
