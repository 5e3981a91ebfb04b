"""The ``sources`` rows: one per ingested file, found by path or by the hash of its head."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logpipe.store.schema import INTERNAL, RUN_ENV_TABLES, stored, stored_tables

if TYPE_CHECKING:  # polars is imported where frames are written: an ingest of unchanged

    pass


from logpipe.store.connection import Connection


class SourceRows(Connection):
    """Reading and writing the rows of ``sources``."""

    def source_id(self, path: str) -> int:
        """The integer of the file at ``path`` in ``sources``; a file seen for the first
        time gets its row now (completed by :meth:`upsert_source` at the end of its
        transaction)."""
        if path not in self._source_ids:
            self._source_ids[path] = self._find_or_add_source_id(path)
        return self._source_ids[path]

    def source_ids(self, paths: list[str]) -> dict[str, int]:
        """:meth:`source_id` of many paths, those the store has asked for in one query."""
        missing = [p for p in paths if p not in self._source_ids]
        if missing:
            for path, sid in self.all("SELECT path, source_id FROM sources WHERE path IN "
                                      "(SELECT unnest(?::VARCHAR[])) AND source_id IS NOT "
                                      "NULL", [missing]):
                self._source_ids[str(path)] = int(sid)
        return {p: self.source_id(p) for p in paths}

    def new_source_id(self, path: str, defer: bool = False) -> int:
        """The ``source_id`` of a file the caller knows has no ``sources`` row: its row is
        made now (completed by :meth:`upsert_source`), or with ``defer`` held back and
        written, completed, by the next read or the commit (a group of small files:
        one statement for all their rows, not two each)."""
        if defer and self._in_transaction:
            new = self._take_source_id()
            self._pending_sources[path] = {"path": path, "kind": "pending", "source_id": new}
            self._source_ids[path] = new
            return new
        self._source_ids[path] = self._add_source(path, None)
        return self._source_ids[path]

    def _take_source_id(self) -> int:
        """The next free ``source_id``, asked once a transaction (outside one, every
        time: another writer may come between)."""
        if self._next_source_id is None:
            (free,) = self.one("SELECT coalesce(max(source_id), 0) + 1 FROM sources") or (1,)
            self._next_source_id = int(free)
        new = self._next_source_id
        self._next_source_id = new + 1 if self._in_transaction else None
        return new

    def _before_read(self) -> None:
        if self._pending_sources:
            self.flush_sources()

    def flush_sources(self) -> None:
        """Write the ``sources`` rows held back, in one statement."""
        rows, self._pending_sources = list(self._pending_sources.values()), {}
        if not rows:
            return
        types = dict(self.columns("sources"))
        cols = [c for c in types if any(c in r for r in rows)]
        self.con.execute(
            f"INSERT INTO sources ({', '.join(cols)}) SELECT "
            + ", ".join(f"unnest(?::{types[c]}[])" for c in cols),
            [[r.get(c) for r in rows] for c in cols])

    def _find_or_add_source_id(self, path: str) -> int:
        row = self.one("SELECT source_id FROM sources WHERE path = ?", [path])
        if row is not None and row[0] is not None:
            return int(row[0])
        return self._add_source(path, row)

    def _add_source(self, path: str, row: tuple[Any, ...] | None) -> int:
        """A new ``source_id`` for ``path`` (``row``: its row, which has none; None: no
        row)."""
        new = self._take_source_id()
        self._forget_source(path)
        if row is None:
            self.con.execute("INSERT INTO sources (path, kind, source_id) VALUES (?, ?, ?)",
                             [path, "pending", new])
        else:
            self.con.execute("UPDATE sources SET source_id = ? WHERE path = ?", [new, path])
        return new

    def keep_sources(self, keep: bool = True) -> None:
        """Read every ``sources`` row once and answer :meth:`source` from them until
        ``keep_sources(False)`` (an ingest of a folder: a query per file was half the
        time of an unchanged re-ingest).  A row written meanwhile is read again."""
        self._kept_sources = None
        if keep:
            self._before_read()
            cur = self.con.execute("SELECT * FROM sources")
            names = [d[0] for d in cur.description]
            self._kept_sources = {str(r[names.index("path")]): dict(zip(names, r, strict=True))
                                  for r in cur.fetchall()}
            if self._heads is None:  # (the same rows: not read again for their heads)
                self._heads = {str(r["head_sha256"]) for r in self._kept_sources.values()}
                self._heads.update(str(h) for (h,) in self.all(
                    f"SELECT head_sha256 FROM {INTERNAL}.source_generations"))

    def _forget_source(self, *paths: str) -> None:
        if self._kept_sources is not None:
            for path in paths:
                self._kept_sources.pop(path, None)

    def source(self, path: str) -> dict[str, Any] | None:
        if self._kept_sources is not None and path in self._kept_sources:
            return dict(self._kept_sources[path])
        self._before_read()
        cur = self.con.execute("SELECT * FROM sources WHERE path = ?", [path])
        rows = cur.fetchall()
        if not rows:
            return None
        return dict(zip([d[0] for d in cur.description], rows[0], strict=True))

    def known_files(self) -> tuple[set[str], set[str]]:
        """The path of every file the store has a row for, and the head hash of every file
        and ended generation it read (from the rows kept by :meth:`keep_sources`)."""
        if self._kept_sources is not None and self._heads is not None:
            return set(self._kept_sources), set(self._heads)
        paths, heads = set(), set()
        for path, head in self.all("SELECT path, head_sha256 FROM sources"):
            paths.add(str(path))
            heads.add(str(head))
        heads.update(str(h) for (h,) in self.all(
            f"SELECT head_sha256 FROM {INTERNAL}.source_generations"))
        return paths, heads

    def _may_hold_head(self, head_sha256: str) -> bool:
        """Whether a file or ended generation with this head may be in the store: the
        heads are read once (then kept, every new one added as it is written), so that a
        folder of new files is not a query per file to find that none is a copy."""
        if self._heads is None:
            self._heads = self.known_files()[1]
        return head_sha256 in self._heads

    def sources_with_head(self, head_sha256: str) -> list[dict[str, Any]]:
        if not self._may_hold_head(head_sha256):
            return []
        self._before_read()
        cur = self.con.execute("SELECT * FROM sources WHERE head_sha256 = ?", [head_sha256])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def delete_source(self, path: str) -> None:
        """Remove every row that came from ``path`` (a rewritten file is re-read whole)."""
        self._before_read()
        self._forget_source(path)
        self._source_ids.pop(path, None)
        row = self.one("SELECT source_id FROM sources WHERE path = ?", [path])
        if row is not None and row[0] is not None:
            for table in RUN_ENV_TABLES:
                self.con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM "
                                 f"{stored('runs')} WHERE source_id = ?)", [row[0]])
            for table in stored_tables():
                self.con.execute(f"DELETE FROM {stored(table)} WHERE source_id = ?", [row[0]])
        self.con.execute("DELETE FROM sources WHERE path = ?", [path])

    def move_source(self, old: str, new: str) -> None:
        """Re-point a moved (rotated) file's rows to its new path: one row of ``sources``."""
        self._before_read()
        self._forget_source(old, new)
        self._source_ids.pop(old, None)
        self._source_ids.pop(new, None)
        self.con.execute("UPDATE sources SET path = ? WHERE path = ?", [new, old])

    def end_generation(self, source: dict[str, Any]) -> None:
        """A truncated file: keep what its ending generation held (its ``sources`` row),
        so that a rotated copy of it is known as already read."""
        if self._heads is not None and source.get("head_sha256") is not None:
            self._heads.add(str(source["head_sha256"]))
        self.con.execute(
            f"INSERT INTO {INTERNAL}.source_generations VALUES (?, ?, ?, ?, ?, ?, now())",
            [source["path"], int(source.get("generations") or 0), source["head_sha256"],
             source["tail_sha256"], source["bytes_ingested"], source["lines"]])

    def generations_with_head(self, head_sha256: str) -> list[tuple[Any, ...]]:
        """``(path, generation, bytes_ingested, tail_sha256)`` of ended generations."""
        if not self._may_hold_head(head_sha256):
            return []
        return self.all("SELECT path, generation, bytes_ingested, tail_sha256 FROM "
                        f"{INTERNAL}.source_generations WHERE head_sha256 = ?", [head_sha256])

    def upsert_source(self, row: dict[str, Any]) -> None:
        """Write the ``sources`` row of a file read now (its ``source_id`` kept)."""
        self.source_id(row["path"])
        if self._heads is not None and row.get("head_sha256") is not None:
            self._heads.add(str(row["head_sha256"]))
        self._forget_source(row["path"])
        held = self._pending_sources.get(row["path"])
        if held is not None:  # written with the others held back
            held.update(row)
            return
        cols = [c for c in row if c != "path"]
        self.con.execute(
            f"UPDATE sources SET {', '.join(f'{c} = ?' for c in cols)} WHERE path = ?",
            [row[c] for c in cols] + [row["path"]],
        )

    def set_env_keys(self, keys: list[tuple[str, str]]) -> None:
        """Record what the environments of each ``(path, key)``'s runs were computed
        from (one statement)."""
        if not keys:
            return
        self._before_read()
        self._forget_source(*(p for p, _ in keys))
        self.con.execute(
            "UPDATE sources SET env_key = v.k FROM (SELECT unnest(?::VARCHAR[]) AS p, "
            "unnest(?::VARCHAR[]) AS k) v WHERE path = v.p AND env_key IS DISTINCT FROM v.k",
            [[p for p, _ in keys], [k for _, k in keys]])
