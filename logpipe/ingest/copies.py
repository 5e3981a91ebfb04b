"""Copies are not runs: a file whose every record line repeats, with its timestamp, a line
of another file (a driver script that ``tee``'d the last lines of each server log, a note
holding a pasted tail, a driver that relays each server line behind a constant tag such
as ``[srv] ``) is a copy.  Its runs are taken back; its lines are counted as copies
in ``sources`` (``copy_lines``, ``copy_of``), and the original keeps the records."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logpipe.readers import line_hashes, lines_at
from logpipe.store import Store

COMPARED = {
    # what a record line says, its timestamp text included: equal rows are the same line.
    # Read from the stored tables by source id (the public views join sources and labels
    # for every row; a label's code stands for its text)
    "batches": ("ts", "ts_raw", "kind_code", "dp_rank", "tp_rank", "pp_rank", "ep_rank",
                "forward_iter", "mixed_chunk", "new_seq", "new_token", "cached_token",
                "running_req", "queue_req", "num_token", "token_usage", "cuda_graph",
                "graph_label_code", "gen_throughput", "input_throughput", "accept_len",
                "accept_rate", "extra"),
    "events": ("ts", "kind", "message", "attrs"),
    "http_requests": ("ts", "client", "method_code", "path", "protocol_code", "status"),
}


@dataclass(frozen=True)
class Copy:
    path: str
    of: str
    lines: int


COPIES_MEMORY = "256MB"
"""DuckDB's memory while the lines of suspected copies are compared (at most: a lower
``LOGPIPE_DUCKDB_MEMORY`` stays): a copy of a 256 MB log is over a million lines."""


def take_back_copies(store: Store, paths: list[str]) -> list[Copy]:
    """For each server log in ``paths`` (read now and holding runs), whether it is a copy
    of another file in the database; a copy's runs are taken back.  Of two files that hold
    the same records, the one with fewer records, then the one with more other lines (the
    driver's own output), then the later path, is the copy.  The likeliest copies are
    tested first: once taken back, they are no candidates for the files they copy, and a
    suspect whose first lines only they repeated is a suspect no more (the original of a
    256 MB log's copy was compared with the other logs of its time: 0.35 and 0.59 s)."""
    found: list[Copy] = []
    hashes = _Hashes()
    with store.memory_bound(COPIES_MEMORY):
        suspects = _suspects(store, paths)
        for path in _copies_first(store, suspects):
            if found and not _suspects(store, [path]):
                continue  # its first lines were repeated only by a copy taken back since
            mine = _records(store, path)
            if not mine or _count(
                    store, "SELECT count(*) FROM runs WHERE source_path = ? "
                    "AND started_at IS NULL", [path]):
                continue  # no records, or records without a date: nothing to tell a copy by
            candidates = _candidates(store, path)
            of: list[str] = []
            for other in candidates:
                # cheapest test first: the record counts, then the timestamps alone, then
                # every line by its bytes and timestamp
                if _is_the_copy(store, path, other, mine) \
                        and _stamps_repeat(store, path, [other]) \
                        and _same_lines(store, path, [other], hashes):
                    of = [other]
                    break
            if not of and len(candidates) > 1 and _stamps_repeat(store, path, candidates):
                # a driver that tailed several servers: every record line repeats a line of
                # one of them (it is a copy of each it repeats)
                of = _same_lines(store, path, candidates, hashes, several=True)
            if of:
                runs = [r for (r,) in store.all("SELECT run_id FROM runs WHERE source_path = ?",
                                                [path])]
                lines = store.unmake_runs(runs)
                store.con.execute("UPDATE sources SET copy_lines = ?, copy_of = ? "
                                  "WHERE path = ?", [len(lines), ", ".join(of), path])
                found.append(Copy(path, ", ".join(of), len(lines)))
    order = {p: i for i, p in enumerate(suspects)}
    return sorted(found, key=lambda c: order[c.path])


def _copies_first(store: Store, paths: list[str]) -> list[str]:
    """``paths`` in the order :func:`_is_the_copy` ranks copies: fewer records, then more
    other lines, then the later path first."""
    noise = {str(p): int(n) for p, n in store.all(
        "SELECT path, coalesce(noise_lines, 0) FROM sources WHERE path IN (SELECT unnest(?))",
        [paths])}
    records = {p: _records(store, p) for p in paths}
    return sorted(sorted(paths, reverse=True), key=lambda p: (records[p], -noise.get(p, 0)))


def _table(name: str) -> str:
    return f"logpipe_internal.{name}"


def _suspects(store: Store, paths: list[str]) -> list[str]:
    """Of ``paths``, those that can be copies: they hold records, and every record of
    their first :data:`_FIRST_LINES` lines has an equal row (every compared column) in
    another file.  One query per table for all the files of an ingest, whatever their
    number: a folder of thousands of logs of one day all overlap in time, and comparing
    each with every other one is quadratic.  A file
    one of whose records is nowhere else is no copy of any file or files (the tests
    below need every record repeated), so nothing is lost by leaving it out."""
    if not paths:
        return []
    # first the runs alone (a small table): only a file whose runs overlap another file's
    # in time can repeat its lines, and only the files it overlaps are read.  (Found by a
    # sweep over the runs in time order, not by a join of runs with runs: the files of
    # a folder of one day all overlap, and their pairs are quadratic: 10,000 files took
    # 11 s and 2.6 GB.)
    by_id = {sid: p for p, sid in store.source_ids(paths).items()}
    spans = [(int(sid), a, b) for sid, a, b in store.all(
        f"SELECT source_id, started_at, ended_at FROM {_table('runs')} "
        "WHERE started_at IS NOT NULL AND ended_at IS NOT NULL")]
    mine = [r for r in spans if r[0] in by_id]
    ids = {sid: by_id[sid] for sid in sorted(_overlapping(mine, spans))}
    if not ids:
        return []
    others = sorted(_overlapping(spans, [r for r in spans if r[0] in ids]))
    # the first lines of each file alone: a file that is no copy shows it there (the
    # tests of each suspect, :func:`take_back_copies`, read every line), and the other
    # files' rows are read only at those lines' timestamps
    held, unmatched = _repeated(store, list(ids), others, _FIRST_LINES)
    return [p for sid, p in ids.items() if held.get(sid, 0) and not unmatched.get(sid, 0)]


_FIRST_LINES = 5_000
"""Lines from a file's first record that :func:`_suspects` tests before all of them."""


def _repeated(store: Store, ids: list[int], others: list[int], first: int
              ) -> tuple[dict[int, int], dict[int, int]]:
    """Of the files ``ids``, the record rows of the lines up to ``first`` after each
    one's first record of a table, and how many of them have no equal row (every
    compared column) in another file of ``others``."""
    held: dict[int, int] = {}
    unmatched: dict[int, int] = {}
    for table, cols in COMPARED.items():
        same = " AND ".join(f"o.{c} IS NOT DISTINCT FROM n.{c}" for c in cols)
        mine = (f"SELECT t.* FROM {_table(table)} t JOIN (SELECT source_id, "
                f"min(line_no) + {int(first)} AS upto FROM {_table(table)} WHERE source_id "
                "IN (SELECT unnest($1)) GROUP BY 1) m USING (source_id) "
                "WHERE t.line_no < m.upto")
        for sid, rows, alone in store.all(
                f"WITH n AS MATERIALIZED ({mine}), o AS (SELECT * FROM {_table(table)} o "
                "WHERE o.source_id IN (SELECT unnest($2)) "
                "AND o.ts IN (SELECT DISTINCT ts FROM n WHERE ts IS NOT NULL) "
                "OR o.ts IS NULL AND o.source_id IN (SELECT unnest($2))) "
                "SELECT n.source_id, count(*), count(*) FILTER (WHERE NOT EXISTS ("
                f"SELECT 1 FROM o WHERE {same} AND o.source_id <> n.source_id)) FROM n "
                "GROUP BY 1", [ids, others]):
            held[sid] = held.get(sid, 0) + int(rows)
            unmatched[sid] = unmatched.get(sid, 0) + int(alone)
    return held, unmatched


def _overlapping(spans: list[tuple[int, Any, Any]], pool: list[tuple[int, Any, Any]]
                 ) -> set[int]:
    """The files (``source_id``) of ``spans`` one of whose spans overlaps, ends
    included, a span of ``pool`` of another file.  ``(source_id, start, end)`` each.

    The pool sorted by start: the spans starting at or before a span's end are a prefix,
    and one of them overlaps it when the latest end among them, over the files other than
    its own, is at or after its start; each prefix keeps its two latest ends of two
    different files, which is enough to leave one file out."""
    pool = sorted(pool, key=lambda r: r[1])
    starts = [r[1] for r in pool]
    best: list[tuple[tuple[Any, int] | None, tuple[Any, int] | None]] = [(None, None)]
    top: tuple[Any, int] | None = None
    second: tuple[Any, int] | None = None
    for sid, _, end in pool:
        if top is None or end > top[0]:
            if top is not None and top[1] != sid:
                second = top
            top = (end, sid)
        elif top[1] != sid and (second is None or end > second[0]):
            second = (end, sid)
        best.append((top, second))
    found: set[int] = set()
    for sid, start, end in spans:
        if sid in found:
            continue
        first, other = best[bisect_right(starts, end)]
        latest = first if first is not None and first[1] != sid else other
        if latest is not None and latest[0] >= start:
            found.add(sid)
    return found


def _records(store: Store, path: str) -> int:
    return _count(store, "SELECT " + " + ".join(
        f"(SELECT count(*) FROM {_table(t)} WHERE source_id = $1)" for t in COMPARED),
        [store.source_id(path)])


def _count(store: Store, sql: str, params: list[Any]) -> int:
    return int(store.all(sql, params)[0][0])


def _candidates(store: Store, path: str) -> list[str]:
    """Other server logs whose runs span the copy's time: the only ones it can repeat."""
    return [p for (p,) in store.all(
        "SELECT DISTINCT o.source_path FROM runs o, "
        "(SELECT min(started_at) AS a, max(ended_at) AS b FROM runs WHERE source_path = ?) m "
        "WHERE o.source_path <> ? AND o.started_at <= m.b AND o.ended_at >= m.a "
        "ORDER BY 1", [path, path])]


def _stamps_repeat(store: Store, path: str, others: list[str]) -> bool:
    """Every record row's timestamp of ``path`` is one of a row of ``others`` of the same
    table, as many times (cheap: it leaves out most files that are no copy before their
    lines are read)."""
    ids = [store.source_id(path), [store.source_id(o) for o in others]]
    # (their rows outside the span of ``path``'s cannot match one: left out, a short copy
    # of a long log is not set against every row of it)
    stamps = [f"(SELECT count(*) FROM (SELECT ts FROM {_table(t)} WHERE source_id = $1 "
              f"EXCEPT ALL SELECT ts FROM {_table(t)} WHERE list_contains($2, source_id) "
              f"AND (ts IS NULL OR ts BETWEEN (SELECT min(ts) FROM {_table(t)} WHERE "
              f"source_id = $1) AND (SELECT max(ts) FROM {_table(t)} WHERE source_id = $1))))"
              for t in COMPARED]
    return not _count(store, "SELECT " + " + ".join(stamps), ids)


def _is_the_copy(store: Store, path: str, other: str, mine: int) -> bool:
    theirs = _records(store, other)
    if mine != theirs:
        return mine < theirs
    noise = dict(store.all("SELECT path, coalesce(noise_lines, 0) FROM sources "
                           "WHERE path IN (?, ?)", [path, other]))
    if noise.get(path, 0) != noise.get(other, 0):
        return noise.get(path, 0) > noise.get(other, 0)
    return path > other


RELAY_TAG = re.compile(rb"[ \t]*[\[(<]?[A-Za-z][\w.\-]{0,31}[\])>]?[ \t]*[:|]?[ \t]+")
"""The constant tag a driver puts in front of each line it relays (``[srv] ``, ``srv | ``,
``server: ``): one word, bracketed or followed by a separator.  A Ray actor's tag, an
indentation, a container's or Python logging's timestamp, a tqdm bar glued on: the same
log in another wrapper, not a relay of it."""


def _relay_prefix(mine: bytes, theirs: bytes) -> bytes | None:
    """What ``mine`` adds in front of ``theirs``, when it is ``theirs`` behind a prefix."""
    if len(mine) > len(theirs) and mine.endswith(theirs):
        return mine[:len(mine) - len(theirs)]
    return None


def _same_lines(store: Store, path: str, others: list[str], hashes: _Hashes,
                several: bool = False) -> Any:
    """Every record line of ``path`` is, byte for byte and with its timestamp (a time
    without a date takes it from the lines before), a record line of the same table in
    ``others``, as many times as it is in ``path``; or every one (two or more) is such a
    line behind one constant relay tag (a driver relaying the server's output as
    ``[srv] ...``).  Equal lines parse to equal rows, so each record of ``path`` is a
    record of ``others``.  A log wrapped another way, by docker or journald (a prefix
    that changes from line to line), or indented or tagged by Ray, is the same log in
    another wrapper: not a copy.

    Lines are compared by hash in the database, never held in Python: a copy of a
    256 MB log has over a million record lines.  Returns whether it is a copy of
    ``others[0]``, or (``several``) the files it repeats, two or more."""
    tags = _relay_tags(store, path, others)
    if _records(store, path) < 2:
        tags = tags[:1]  # one line behind a tag tells no relay
    mine = hashes.table([path], tags)
    theirs = hashes.table(others, (b"",), _line_windows(store, path, others))
    if mine is None or theirs is None:
        return [] if several else False
    con = store.con
    # temporary tables read from the Arrow tables by name, not views of them: a view
    # registered in a transaction keeps its Arrow table until the commit, even dropped
    # (~26 MB a million lines; the copies are tested in the ingest's last transaction)
    con.execute("CREATE OR REPLACE TEMP TABLE _copy_lines AS SELECT * FROM mine")
    con.execute("CREATE OR REPLACE TEMP TABLE _their_lines AS SELECT * FROM theirs")
    del mine, theirs
    try:
        for k in range(len(tags)):
            unmatched, used = _unmatched(store, path, others, f"h{k}")
            if unmatched:
                continue
            if not several:
                return True
            if len(used) >= 2:
                return used
            # one file: the single-file test decides
    finally:
        con.execute("DROP TABLE IF EXISTS _copy_lines")
        con.execute("DROP TABLE IF EXISTS _their_lines")
    return [] if several else False


def _line_windows(store: Store, path: str, others: list[str]
                  ) -> list[tuple[int, int]] | None:
    """For each of ``others``, its first and last line holding a record row stamped within
    the span of ``path``'s record rows (``(1, 0)``: none): only those lines can repeat a
    record line of ``path`` with its timestamp.  None where a record row of ``path`` has
    no timestamp (it may repeat any line).  300 decode lines pasted from a 256 MB log
    with TP 8: set against 402 of its lines, not 1.46 million."""
    unions = " UNION ALL ".join(f"SELECT ts FROM {_table(t)} WHERE source_id = ?"
                                for t in COMPARED)
    sid = store.source_id(path)
    span = store.one(f"SELECT min(ts), max(ts), count(*) FILTER (WHERE ts IS NULL) "
                     f"FROM ({unions})", [sid] * len(COMPARED))
    if span is None or span[0] is None or span[2]:
        return None
    ids = [store.source_id(o) for o in others]
    rows = " UNION ALL ".join(
        f"SELECT source_id, line_no FROM {_table(t)} WHERE list_contains($1, source_id) "
        "AND ts BETWEEN $2 AND $3" for t in COMPARED)
    found = {int(i): (int(a), int(b)) for i, a, b in store.all(
        f"SELECT source_id, min(line_no), max(line_no) FROM ({rows}) GROUP BY 1",
        [ids, span[0], span[1]])}
    return [found.get(i, (1, 0)) for i in ids]


_SAMPLE = 64
"""Record lines of a suspected copy read to find the relay tag in front of its lines."""


def _relay_tags(store: Store, path: str, others: list[str]) -> tuple[bytes, ...]:
    """The prefixes to take off ``path``'s lines before comparing: none (b""), and the
    relay tags its first record lines carry in front of lines of ``others`` that say the
    same (batch lines first: their rank columns make the pairing exact, where an event
    printed by every rank says the same on each)."""
    ids = [store.source_id(o) for o in others]
    pairs: list[tuple[int, str, int]] = []
    for table, cols in COMPARED.items():
        on = " AND ".join(f"c.{c} IS NOT DISTINCT FROM o.{c}" for c in cols)
        pairs += [(int(a), others[ids.index(sid)], int(b)) for a, sid, b in store.all(
            "SELECT c.line_no, arg_min(o.source_id, o.line_no), min(o.line_no) "
            f"FROM (SELECT * FROM {_table(table)} WHERE source_id = ? "
            f"ORDER BY line_no LIMIT {_SAMPLE}) c JOIN {_table(table)} o ON {on} "
            "WHERE list_contains(?, o.source_id) GROUP BY 1",
            [store.source_id(path), ids])]
        if pairs:
            break
    mine = lines_at(Path(path), {a for a, _, _ in pairs})
    theirs = {o: lines_at(Path(o), {b for _, oo, b in pairs if oo == o}) for o in others}
    tags = [b""]
    for a, o, b in pairs:
        x, y = mine.get(a), theirs[o].get(b)
        tag = _relay_prefix(x, y) if x is not None and y is not None else None
        if tag is not None and tag not in tags and RELAY_TAG.fullmatch(tag):
            tags.append(tag)
    return tuple(tags)


class _Hashes:
    """The line hashes of the files an ingest compares, each file read once for all the
    copies it is compared with (up to :attr:`KEEP` lines kept)."""

    KEEP = 16_000_000

    def __init__(self) -> None:
        self._kept: dict[tuple[str, tuple[bytes, ...], tuple[int, int] | None],
                         list[array[int]]] = {}

    def of(self, path: str, cuts: tuple[bytes, ...], lines: tuple[int, int] | None = None
           ) -> list[array[int]] | None:
        """The hashes of ``path``'s lines (``lines``: of its lines ``first`` to ``last``
        alone, the first item line ``first``'s)."""
        key = (path, cuts, lines)
        if key not in self._kept:
            hashes = line_hashes(Path(path), cuts, lines)
            if hashes is None:
                return None
            if sum(len(h[0]) for h in self._kept.values()) + len(hashes[0]) > self.KEEP:
                self._kept.clear()
            self._kept[key] = hashes
        return self._kept[key]

    def table(self, paths: list[str], cuts: tuple[bytes, ...],
              windows: list[tuple[int, int]] | None = None) -> Any:
        """An Arrow table of every line of ``paths``: its file's position in ``paths``
        (``file``, from 1), ``line_no``, and ``h0``, ``h1``... its hash with each of
        ``cuts`` taken off (:func:`logpipe.readers.line_hashes`); None if a file cannot
        be read.  ``windows``: of each file, only its lines from the first to the last
        given (the lines before them counted, not hashed; none read after them)."""
        import polars as pl

        frames = []
        for pos, p in enumerate(paths, 1):
            window = windows[pos - 1] if windows is not None else None
            hashes = self.of(p, cuts, window)
            if hashes is None:
                return None
            n, first = len(hashes[0]), window[0] if window is not None else 1
            frames.append(pl.DataFrame({
                "file": pl.repeat(pos, n, dtype=pl.Int64, eager=True),
                "line_no": pl.int_range(first, first + n, dtype=pl.Int64, eager=True),
                **{f"h{k}": pl.Series(h, dtype=pl.Int64) for k, h in enumerate(hashes)}}))
        return pl.concat(frames).to_arrow()


def _unmatched(store: Store, path: str, others: list[str], h: str) -> tuple[int, list[str]]:
    """How many record lines of ``path`` (by their hash ``h`` in ``_copy_lines`` and
    their timestamp) are not record lines of ``others`` of the same table
    (``_their_lines``), counting a line as often as it is there; and the files they are
    in (each counted for the first of ``others`` it is in).  Both sides are counted by
    hash first: a log without dates repeats lines by the thousand, and a join of them
    with each other would be quadratic."""
    unmatched = 0
    first: set[int] = set()
    ids = [store.source_id(o) for o in others]
    for name in COMPARED:
        for missing, pos in store.all(
                "SELECT sum(greatest(c.n - coalesce(o.n, 0), 0)), o.pos FROM ("
                f"SELECT l.{h} AS h, t.ts, count(*) AS n FROM _copy_lines l "
                f"JOIN {_table(name)} t ON t.source_id = $1 AND t.line_no = l.line_no "
                "GROUP BY ALL) c LEFT JOIN ("
                "SELECT l.h0 AS h, t.ts, count(*) AS n, min(l.file) AS pos "
                f"FROM _their_lines l JOIN {_table(name)} t "
                "ON t.source_id = $2[l.file] AND t.line_no = l.line_no GROUP BY 1, 2) o "
                "ON c.h = o.h AND c.ts IS NOT DISTINCT FROM o.ts GROUP BY 2",
                [store.source_id(path), ids]):
            unmatched += int(missing or 0)
            if pos is not None:
                first.add(int(pos) - 1)
    return unmatched, [others[i] for i in sorted(first)]
