"""Small files written in groups: one transaction, their rows inserted together.

A folder of small logs pays per file what a large log pays per block: a transaction, an
insert per table, the environment's queries.  The ingest writes consecutive small files as
one group (:func:`groups`): one transaction whose files share a :class:`Shared` (their rows
held until the group's end, then one insert per table).  The guarantee stays the file's:
when one file of a group fails, the group is rolled back and its files are read again
one by one, each in its own transaction, so that the damaged file fails alone and the
others are written as they would have been.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from logpipe.store import Spool, Store

SMALL_FILE_BYTES = 4 * 1024 * 1024
"""A small file: parsed ahead (:mod:`logpipe.ingest.ahead`) and written in a group.  A
larger one is read by the ingest itself, block by block (its blocks are prepared ahead on
the second core already), in a transaction of its own."""

GROUP_FILES = 100
"""Small files written in one transaction (their rows inserted together, a statement per
table rather than per table per file)."""
GROUP_BYTES = 8 * 1024 * 1024
"""Bytes of the files of one group at most; a file larger than :data:`SMALL_FILE_BYTES` is
written alone."""


def groups(files: list[tuple[Path, Path]]) -> Iterator[list[int]]:
    """Indexes of ``files`` in order, a group of small ones at a time."""
    group: list[int] = []
    size = 0
    for i, (path, _) in enumerate(files):
        try:
            n = path.stat().st_size
        except OSError:
            n = 0  # (it fails alone, as it did)
        if n > SMALL_FILE_BYTES or len(group) >= GROUP_FILES or size + n > GROUP_BYTES:
            if group:
                yield group
            group, size = [], 0
        group.append(i)
        size += n
        if n > SMALL_FILE_BYTES:
            yield group
            group, size = [], 0
    if group:
        yield group


class Shared:
    """What the files of one transaction share (:func:`logpipe.ingest.ingest_files`
    writes a group of small files at once): their rows and their new runs, held until
    the group's end (:meth:`load`), and the names of runs."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.spool = Spool(store, shape_late=True)
        """Every table's rows of the group's files, loaded by :meth:`load`."""
        self.new_runs: dict[str, list[tuple[Any, ...]]] = {}
        """Runs first seen, by engine (:meth:`Store.add_runs`' rows)."""
        self.widened: list[tuple[Any, ...]] = []
        """Runs whose span and era later lines widened (:meth:`Store.widen_run`)."""
        self.facts: list[tuple[str, dict[str, Any]]] = []
        """What launch lines said of runs (:meth:`Store.update_runs`), after them."""
        self._taken: tuple[set[str], set[str]] | None = None
        self.envs: list[tuple[str, list[Path], str]] = []
        """``(file, its manifests, their key)`` of the files whose runs' environments are
        computed once the rows are in their tables."""

    def taken(self) -> tuple[set[str], set[str]]:
        """Every run name and every run id in the database, those given in the group
        included (:func:`taken_runs`)."""
        if self._taken is None:
            self._taken = taken_runs(self.store)
        return self._taken

    def add_runs(self, rows: list[tuple[Any, ...]], *, engine: str,
                 facts: Sequence[tuple[str, dict[str, Any]]] = ()
                 ) -> list[tuple[str, dict[str, Any]]]:
        """:meth:`Store.add_runs`, at the group's end (``facts`` are all returned, to be
        held by :meth:`update_runs` and written with the rows at the end)."""
        self.new_runs.setdefault(engine, []).extend(rows)
        return list(facts)

    def widen_run(self, *widened: Any) -> None:
        """:meth:`Store.widen_run`, at the group's end."""
        self.widened.append(widened)

    def update_runs(self, facts: list[tuple[str, dict[str, Any]]]) -> None:
        """:meth:`Store.update_runs`, at the group's end."""
        self.facts.extend(facts)

    def write_runs(self) -> None:
        """The runs held into ``runs`` (before anything reads them)."""
        facts = self.facts
        for engine, rows in self.new_runs.items():
            facts = self.store.add_runs(rows, engine=engine, facts=facts)
        self.new_runs.clear()
        for widened in self.widened:
            self.store.widen_run(*widened)
        self.widened.clear()
        self.store.update_runs(facts)
        self.facts.clear()

    def load(self) -> None:
        """Everything held into its table."""
        self.store.flush_sources()
        self.write_runs()
        self.spool.load()

    def close(self) -> None:
        self.spool.close()


def taken_runs(store: Store) -> tuple[set[str], set[str]]:
    """Every run's name and every run's id in the database (one query, once per file or
    group, not a query a run): what a new run's name and id must differ from."""
    rows = store.all("SELECT name, run_id FROM runs")
    return {str(n) for n, _ in rows}, {str(r) for _, r in rows}
