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
