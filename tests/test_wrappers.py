"""Every wrapper found in real logs parses to the same values as the plain log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SAMPLES, query

WRAPPERS = sorted(p.stem for p in (SAMPLES / "wrappers").glob("*.log"))
VALUES = ("kind, forward_iter, new_seq, new_token, cached_token, running_req, queue_req, "
          "num_token, token_usage, cuda_graph, graph_label, gen_throughput, input_throughput, "
          "accept_len, accept_rate, CAST(extra AS VARCHAR)")


def rows(db: Path, stem: str, cols: str) -> list[tuple]:
    return query(db, f"SELECT line_no, {cols} FROM batches WHERE source_path LIKE ? "
                     "ORDER BY line_no", [f"%/wrappers/{stem}.log"])


def test_all_wrapper_samples_are_present() -> None:
    assert set(WRAPPERS) >= {"plain", "ray", "ray-local", "docker-timestamps", "docker-desktop",
                             "kubectl-indented", "pylogging-brackets", "pylogging-pid",
                             "no-timestamp", "crlf"}


@pytest.mark.parametrize("stem", [w for w in WRAPPERS if w != "plain"])
def test_wrapper_gives_the_plain_values(sample_db: Path, stem: str) -> None:
    plain = rows(sample_db, "plain", VALUES)
    got = rows(sample_db, stem, VALUES)
    assert len(plain) == 11
    assert got == plain


@pytest.mark.parametrize("stem", [w for w in WRAPPERS if w not in ("plain", "no-timestamp")])
def test_wrapper_keeps_sglang_time(sample_db: Path, stem: str) -> None:
    # docker-timestamps carries UTC two hours behind SGLang's local time: ts must be SGLang's
    plain = rows(sample_db, "plain", "ts")
    assert rows(sample_db, stem, "ts") == plain
    assert all(r[1] is not None for r in plain)


def test_no_timestamp_log_has_rows_without_time(sample_db: Path) -> None:
    got = rows(sample_db, "no-timestamp", "ts")
    assert got and all(r[1] is None for r in got)


def test_ray_repeat_suffix_and_ipv6_prefix(tmp_path: Path) -> None:
    from logpipe.ingest import ingest_paths

    log = tmp_path / "ray.log"
    log.write_text(
        "(SGLangEngine pid=77, ip=fe80::1) [2026-01-01 00:00:00 TP0] Decode batch, "
        "#running-req: 2, #token: 10, token usage: 0.00, cuda graph: True, "
        "gen throughput (token/s): 12.50, #queue-req: 0 [repeated 7x across cluster]\n"
    )
    db = tmp_path / "r.duckdb"
    ingest_paths([log], db)
    assert query(db, "SELECT running_req, gen_throughput, queue_req FROM batches") == [
        (2, 12.5, 0)]
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]


def test_a_prefix_repeated_line_after_line_reads_as_each_line_alone() -> None:
    """Outer prefixes are read once for the lines that repeat one after another: each
    line's row is the one it gets read alone, where the prefix repeats, changes, comes
    back, spans New Year in SGLang's stamp (a syslog stamp takes that year), or has no
    SGLang time."""
    from datetime import datetime

    import polars as pl
    from polars.testing import assert_frame_equal

    from logpipe.engines.sglang.parser import outer_prefixes

    journald = "Dec 31 23:59:59 node7 python3[4242]:"
    rows = [
        (journald, datetime(2026, 12, 31, 23, 59, 59)),
        (journald, datetime(2026, 12, 31, 23, 59, 59)),
        (journald, datetime(2027, 1, 1, 0, 0, 0)),  # same text, SGLang's year moved on
        (journald, None),
        (journald, None),
        ("2026-12-04T15:00:09.457779063Z", datetime(2026, 12, 4, 15, 0, 9)),
        ("2026-12-04T15:00:09.457779063Z", datetime(2026, 12, 4, 15, 0, 9)),
        ("web-1  | ", datetime(2026, 12, 4, 15, 0, 9)),
        ("", datetime(2026, 12, 4, 15, 0, 9)),
        (None, datetime(2026, 12, 4, 15, 0, 9)),
        ("2026-12-04 15:00:09,123+01:00 pid=77", datetime(2026, 12, 4, 15, 0, 9)),
        (journald, datetime(2026, 12, 31, 23, 59, 59)),
    ]
    frame = pl.DataFrame({"run_seq": [0] * len(rows), "line_no": list(range(1, len(rows) + 1)),
                          "ts": [ts for _, ts in rows], "outer": [o for o, _ in rows]},
                         schema={"run_seq": pl.Int64, "line_no": pl.Int64,
                                 "ts": pl.Datetime("us"), "outer": pl.String})
    together = outer_prefixes(frame)
    alone = pl.concat([outer_prefixes(frame[i:i + 1]) for i in range(frame.height)])
    assert together.height == len(rows) - 2  # (no prefix: no row)
    assert_frame_equal(together, alone)
    stamps = together["outer_ts"].to_list()
    assert stamps[0] == stamps[1] == datetime(2026, 12, 31, 23, 59, 59)
    assert stamps[2] != stamps[1] and stamps[3:5] == [None, None]  # each its own year
    assert together["pid"].to_list() == [4242] * 5 + [None] * 3 + [77, 4242]
