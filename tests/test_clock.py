"""One clock: each run knows the offset of its stamps from UTC, and linking compares
instants, whatever the zone of the host that ingests (the suite runs under
America/Los_Angeles)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from logpipe.clock import offset_of
from logpipe.errors import InputError
from logpipe.ingest import ingest_paths
from tests.conftest import load_generator, query

LINE = ("{stamp}Decode batch, #running-req: 1, #token: 40, token usage: 0.00, "
        "cuda graph: True, gen throughput (token/s): 80.00, #queue-req: 0\n")


def _log(path: Path, start: str, minutes: int = 5, prefix: str = "") -> None:
    lines = [f"[{start}:00] server_args={{'model_path': 'm', 'tp_size': 1}}\n"]
    for m in range(minutes + 1):
        stamp = f"{start[:-2]}{int(start[-2:]) + m:02d}:00"
        lines.append(LINE.format(stamp=f"{prefix.format(m=m)}[{stamp}] "))
    path.write_text("".join(lines))


def _manifest(offset_s: int, name: str) -> dict:
    return {"logpipe_manifest": 1, "env": {}, "timezone": {"name": name,
                                                           "utc_offset_s": offset_s}}


def test_offsets_of_zones() -> None:
    assert offset_of("UTC") == 0 and offset_of("+05:30") == 19800 and offset_of("-0700") == -25200
    assert offset_of("Europe/Berlin", datetime(2026, 7, 1, 12)) == 7200  # summer time
    assert offset_of("Europe/Berlin", datetime(2026, 1, 1, 12)) == 3600
    with pytest.raises(InputError):
        offset_of("Mars/Olympus")


def test_the_zone_of_a_run_from_manifest_tz_option_or_outer_stamps(tmp_path: Path) -> None:
    a, b, c = (tmp_path / d for d in ("a", "b", "c"))
    for d in (a, b, c):
        d.mkdir()
    _log(a / "server.log", "2026-07-02 10:00")
    (a / "env.json").write_text(json.dumps(_manifest(7200, "Europe/Berlin")))
    _log(b / "server.log", "2026-07-02 10:30")
    # a job logger stamps every line in UTC before SGLang's local stamp (7 h behind)
    _log(c / "server.log", "2026-07-02 09:00", prefix="job-7 2026-07-02T16:{m:02d}:00Z ")
    db = tmp_path / "db.duckdb"
    ingest_paths([a, c], db)
    ingest_paths([b], db, tz="+05:30")
    got = dict((n, (o, s)) for n, o, s in query(
        db, "SELECT name, utc_offset_s, clock_source FROM runs"))
    assert got == {"a": (7200, "manifest"), "b": (19800, "--tz +05:30"),
                   "c": (-25200, "outer stamps")}


def test_outer_stamps_of_another_day_align_but_of_no_year_any_clock_shows_are_none(
        tmp_path: Path) -> None:
    """A job logger whose clock is three days and seven hours ahead of SGLang's gives that
    offset (the stamps still align); one whose stamps say year 9999 (a damaged logger,
    7,973 years off) gives none, and the file lands: before, the offset overflowed its
    32-bit column and the file failed."""
    days, year = tmp_path / "days", tmp_path / "year"
    for d in (days, year):
        d.mkdir()
    _log(days / "server.log", "2026-07-02 09:00", prefix="job-7 2026-07-05T16:{m:02d}:00Z ")
    _log(year / "server.log", "2026-07-02 09:00", prefix="job-7 9999-07-02T16:{m:02d}:00Z ")
    db = tmp_path / "db.duckdb"
    result = ingest_paths([days, year], db)
    assert not result.failed, result.failed
    got = dict((n, (o, s)) for n, o, s in query(
        db, "SELECT name, utc_offset_s, clock_source FROM runs"))
    assert got == {"days": (-(3 * 86400 + 25200), "outer stamps"), "year": (None, None)}


def test_a_file_is_linked_to_the_run_whose_span_holds_its_instant(tmp_path: Path) -> None:
    """Two runs in one folder, stamped on a UTC+2 host; a benchmark file written at 09:02
    UTC belongs to the run from 11:00 to 11:05 local, whatever zone ingests it."""
    folder = tmp_path / "exp"
    folder.mkdir()
    _log(folder / "first.log", "2026-07-02 10:00")
    _log(folder / "second.log", "2026-07-02 11:00")
    for name in ("first.log", "second.log"):
        (folder / f"{name}.env.json").write_text(json.dumps(_manifest(7200, "+02:00")))
    bench = folder / "bench_serving.jsonl"
    rec = load_generator().bench_record("0.5.12", output_tps=80.0, tpot_ms=12.5)
    bench.write_text(json.dumps(rec) + "\n")
    written = datetime(2026, 7, 2, 9, 2, tzinfo=UTC).timestamp()
    os.utime(bench, (written, written))
    db = tmp_path / "db.duckdb"
    ingest_paths([folder], db)
    assert query(db, "SELECT r.name, b.link_method FROM bench_results b JOIN runs r "
                     "USING (run_id)") == [("second", "time window")]


def test_phase_dump_iso_stamps_keep_their_instant() -> None:
    from logpipe.sources.phases import _ts

    assert _ts("2026-07-02T12:00:00+02:00") == datetime(2026, 7, 2, 10, 0)
    assert _ts("2026-07-02T10:00:00Z") == datetime(2026, 7, 2, 10, 0)
