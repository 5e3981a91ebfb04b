"""Copies are not runs: a file whose every record line repeats, with its timestamp, a line
of another file (a driver script that ``tee``'d the last lines of each server log, a note
holding a pasted tail, a driver that relays each server line behind a constant tag such
as ``[srv] ``) is a copy.  Its runs are taken back; its lines are counted as copies
in ``sources`` (``copy_lines``, ``copy_of``), and the original keeps the records."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logpipe.readers import lines_at
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


def take_back_copies(store: Store, paths: list[str]) -> list[Copy]:
    """For each server log in ``paths`` (read now and holding runs), whether it is a copy
    of another file in the database; a copy's runs are taken back.  Of two files that hold
    the same records, the one with fewer records, then the one with more other lines (the
    driver's own output), then the later path, is the copy."""
    found: list[Copy] = []
    for path in _suspects(store, paths):
        mine = _records(store, path)
        if not mine or _count(
                store, "SELECT count(*) FROM runs WHERE source_path = ? AND started_at IS NULL",
                [path]):
            continue  # no records, or records without a date: nothing to tell a copy by
        candidates = _candidates(store, path)
        of: list[str] = []
        for other in candidates:
            # cheapest test first: the record counts, then the timestamps alone, then
            # every column, then the bytes
            if _is_the_copy(store, path, other, mine) and _all_repeat(store, path, [other]) \
                    and _same_bytes(store, path, [other]):
                of = [other]
                break
        if not of and len(candidates) > 1 and _all_repeat(store, path, candidates):
            # a driver that tailed several servers: every record line repeats a line of one
            # of them (it is a copy of each it repeats)
            of = _same_bytes(store, path, candidates, several=True)
        if of:
            runs = [r for (r,) in store.all("SELECT run_id FROM runs WHERE source_path = ?",
                                            [path])]
            lines = store.unmake_runs(runs)
            store.con.execute("UPDATE sources SET copy_lines = ?, copy_of = ? "
                              "WHERE path = ?", [len(lines), ", ".join(of), path])
            found.append(Copy(path, ", ".join(of), len(lines)))
    return found


def _table(name: str) -> str:
    return f"logpipe_internal.{name}"


def _suspects(store: Store, paths: list[str]) -> list[str]:
    """Of ``paths``, those that can be copies: they hold records and each of them has an
    equal row (every compared column) in another file.  One query per table for all the
    files of an ingest, whatever their number: a folder of thousands of logs of one day
    all overlap in time, and comparing each with every other one is quadratic.  A file
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
    held: dict[int, int] = {}
    unmatched: dict[int, int] = {}
    for table, cols in COMPARED.items():
        same = " AND ".join(f"o.{c} IS NOT DISTINCT FROM n.{c}" for c in cols)
        for sid, rows, alone in store.all(
                f"SELECT n.source_id, count(*), count(*) FILTER (WHERE NOT EXISTS ("
                f"SELECT 1 FROM {_table(table)} o WHERE {same} AND o.source_id <> n.source_id"
                f" AND o.source_id IN (SELECT unnest($2)))) FROM {_table(table)} n "
                "WHERE n.source_id IN (SELECT unnest($1)) GROUP BY 1", [list(ids), others]):
            held[sid] = held.get(sid, 0) + int(rows)
            unmatched[sid] = unmatched.get(sid, 0) + int(alone)
    return [p for sid, p in ids.items() if held.get(sid, 0) and not unmatched.get(sid, 0)]


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


def _all_repeat(store: Store, path: str, others: list[str]) -> bool:
    """Every record row of ``path`` is a row of one of ``others`` (timestamps first)."""
    ids = [store.source_id(path), [store.source_id(o) for o in others]]
    stamps = [f"(SELECT count(*) FROM (SELECT ts FROM {_table(t)} WHERE source_id = $1 "
              f"EXCEPT ALL SELECT ts FROM {_table(t)} WHERE list_contains($2, source_id)))"
              for t in COMPARED]
    if _count(store, "SELECT " + " + ".join(stamps), ids):
        return False
    left = [f"(SELECT count(*) FROM (SELECT {', '.join(cols)} FROM {_table(t)} "
            f"WHERE source_id = $1 EXCEPT ALL SELECT {', '.join(cols)} FROM {_table(t)} "
            "WHERE list_contains($2, source_id)))" for t, cols in COMPARED.items()]
    return not _count(store, "SELECT " + " + ".join(left), ids)


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


def _same_bytes(store: Store, path: str, others: list[str], several: bool = False) -> Any:
    """Each record line of ``path`` is, byte for byte, a line of ``other`` that says the
    same, or every one (two or more) is its line behind one constant relay tag (a driver
    relaying the server's output as ``[srv] ...``).  A log wrapped another
    way, by docker or journald (a prefix that changes from line to line), or indented or
    tagged by Ray, is the same log in another wrapper: not a copy."""
    matched: dict[int, tuple[str, int]] = {}
    for other in others:
        for table, cols in COMPARED.items():
            on = " AND ".join(f"c.{c} IS NOT DISTINCT FROM o.{c}" for c in cols)
            for a, b in store.all(
                    f"SELECT c.line_no, min(o.line_no) FROM {_table(table)} c "
                    f"JOIN {_table(table)} o ON {on} WHERE c.source_id = ? "
                    "AND o.source_id = ? GROUP BY 1",
                    [store.source_id(path), store.source_id(other)]):
                matched.setdefault(int(a), (other, int(b)))
    mine = lines_at(Path(path), set(matched))  # a CRLF copy is another file
    theirs = {o: lines_at(Path(o), {b for oo, b in matched.values() if oo == o})
              for o in others}
    pairs = {a: (mine.get(a), theirs[o].get(b)) for a, (o, b) in matched.items()}
    used = sorted({o for o, _ in matched.values()})
    if not pairs or any(x is None or y is None for x, y in pairs.values()):
        return [] if several else False
    if several and len(used) < 2:
        return []  # one file: the single-file test above decides
    if all(x == y for x, y in pairs.values()):
        return used if several else True
    prefixes = {_relay_prefix(x, y) for x, y in pairs.values()}  # type: ignore[arg-type]
    (prefix,) = prefixes if len(prefixes) == 1 else (None,)
    relay = prefix is not None and len(pairs) > 1 and bool(RELAY_TAG.fullmatch(prefix))
    return (used if relay else []) if several else relay

