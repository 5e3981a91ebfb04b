"""What a user meets in an hour: each of these was wrong before it was fixed here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.env import RunEnv, diff
from tests.conftest import SAMPLES

runner = CliRunner()


def test_an_unknown_package_version_is_unknown_not_unset() -> None:
    def env(values: dict[str, str], complete: bool) -> RunEnv:
        return RunEnv.from_json(json.dumps({k: {"value": v, "source": "manifest",
                                                "tier": "identity"}
                                            for k, v in values.items()}), complete)

    known = env({"pkg.sglang": "0.5.23", "NCCL_ALGO": "Ring"}, True)
    bare = env({}, False)
    complete = env({"pkg.torch": "2.9"}, True)
    shown = {i.key: (i.a, i.b) for i in diff("a", known, "b", bare).items}
    assert shown["pkg.sglang"] == ("0.5.23", "unknown")
    # a captured environment without the variable: it was not set; a package it does not
    # list is still unknown
    shown = {i.key: (i.a, i.b) for i in diff("a", known, "c", complete).items}
    assert shown["NCCL_ALGO"] == ("Ring", "(unset)")
    assert shown["pkg.sglang"] == ("0.5.23", "unknown")


def test_a_negative_threshold_is_refused(sample_db: Path) -> None:
    result = runner.invoke(app, ["compare", "--run", "plain", "--run", "crlf", "--db",
                                 str(sample_db), "--threshold", "-1"])
    assert result.exit_code == 2 and "--threshold" in result.output


def test_export_to_a_path_that_cannot_be_made_is_an_error_not_a_crash(sample_db: Path
                                                                      ) -> None:
    result = runner.invoke(app, ["export", "/proc/nope/lake", "--db", str(sample_db)])
    assert result.exit_code == 2
    assert "cannot write the lake /proc/nope/lake" in result.output
    assert "internal error" not in result.output


def test_errors_under_format_json_are_json_on_stdout(sample_db: Path) -> None:
    result = runner.invoke(app, ["compare", "--run", "nope", "--run", "plain", "--db",
                                 str(sample_db), "--format", "json"])
    assert result.exit_code == 2
    err = json.loads(result.stdout)
    assert err["error"] == "no run named 'nope'" and err["exit"] == 2 and err["hint"]


def test_explain_has_the_option_its_notes_suggest() -> None:
    result = runner.invoke(app, ["explain", "--help"], env={"COLUMNS": "200"})
    assert "--allow-unknown-env" in result.output and "--allow-env-diff" in result.output


def test_the_engines_note_points_to_a_command_that_exists(sample_db: Path) -> None:
    result = runner.invoke(app, ["compare", "--campaign", "real-engines-cpu", "--db",
                                 str(sample_db), "--format", "json"])
    notes = json.loads(result.stdout)["comparisons"][0]["notes"]
    said = [n for n in notes if "lists them" in n]
    assert said and all("`logpipe env diff` lists them" in n for n in said)
    assert runner.invoke(app, ["env", "diff", "--help"]).exit_code == 0


def test_a_folder_with_no_logs_is_said_and_fails(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("tried NGRAM today, looked slower\n")
    result = runner.invoke(app, ["ingest", str(tmp_path), "--db", str(tmp_path / "d.duckdb")])
    assert result.exit_code == 2
    assert "nothing ingested: none of the 1 file(s) under" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["ingest", str(empty), "--db", str(tmp_path / "e.duckdb")])
    assert result.exit_code == 2 and "nothing ingested: no file under" in result.output


def test_runs_named_alike_in_two_campaigns_are_named_by_their_folders(tmp_path: Path) -> None:
    import shutil

    from tests.conftest import SAMPLES, query

    log = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"
    for campaign, other in (("campaign-a", "real-cpu-baseline-r1"),
                            ("campaign-b", "real-cpu-baseline-r2")):
        (tmp_path / campaign / "01-baseline").mkdir(parents=True)
        shutil.copy(log.parent.parent / other / "server.log",
                    tmp_path / campaign / "01-baseline" / "server.log")
    db = tmp_path / "d.duckdb"
    result = runner.invoke(app, ["ingest", str(tmp_path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    names = sorted(n for (n,) in query(db, "SELECT name FROM runs"))
    assert names == ["01-baseline", "campaign-b/01-baseline"]


def test_report_cells_show_a_missing_value_as_a_dash_not_null(sample_db: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", "--db", str(sample_db), "--no-checks", "-o",
                                 str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    # a speculative run with no baseline has no speedup: its cell was "null"
    assert "<td>eagle3-profiled</td><td>(none)</td><td>incomparable</td>" in page
    assert "<td>null</td>" not in page


def test_hundreds_of_keys_known_to_match_are_counted_not_listed(tmp_path: Path) -> None:
    """Two real launches without their manifests: the log's server arguments are known in
    both, hundreds of them alike.  The refusal counts them in one phrase."""
    import shutil

    from tests.conftest import SAMPLES

    for name in ("real-cpu-baseline-r1", "real-cpu-baseline-r2"):
        (tmp_path / name).mkdir()
        shutil.copy(SAMPLES / "real-cpu" / name / "server.log", tmp_path / name / "server.log")
    db = tmp_path / "d.duckdb"
    assert runner.invoke(app, ["ingest", str(tmp_path), "--db", str(db)]).exit_code == 0
    result = runner.invoke(app, ["compare", "--run", "real-cpu-baseline-r1", "--run",
                                 "real-cpu-baseline-r2", "--db", str(db), "--format", "json"])
    assert result.exit_code == 3
    note = json.loads(result.stdout)["comparisons"][0]["notes"][-1]
    assert "identity keys known to match (`logpipe env diff` lists them)" in note
    assert "arg.tp_size" not in note and len(note) < 1500


def test_memory_bound_lowers_duckdbs_limit_only_and_restores_it(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from logpipe.store import Store
    from logpipe.store.connection import _bytes

    assert _bytes("488.2 MiB") == 488.2 * 1024**2 and _bytes("512MB") == 512e6
    assert _bytes("18.8 GiB") > _bytes("512MB") and _bytes("weird") == float("inf")

    def limit(store: Store) -> str:
        return str((store.one("SELECT current_setting('memory_limit')") or ("",))[0])

    with Store.open(db) as store:  # DuckDB's default, far above
        before = limit(store)
        with store.memory_bound("512MB"):
            assert _bytes(limit(store)) <= 512e6
        assert limit(store) == before
    monkeypatch.setenv("LOGPIPE_DUCKDB_MEMORY", "256MB")  # a user's lower bound stays
    with Store.open(db) as store:
        low = limit(store)
        assert _bytes(low) <= 256e6
        with store.memory_bound("512MB"):
            assert limit(store) == low
        assert limit(store) == low


def test_a_phase_counts_its_own_time_and_only_while_collected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A phase inside another is taken out of the outer one's time; a phase met twice adds
    up; outside a collection nothing is kept (the clock is the test's)."""
    from logpipe import timings

    now = [0.0]
    monkeypatch.setattr(timings.time, "perf_counter", lambda: now[0])
    with timings.phase("outside"):
        now[0] += 1.0
    with timings.collecting() as spent:
        with timings.phase("outer"):
            now[0] += 2.0
            with timings.phase("inner"):
                now[0] += 3.0
            now[0] += 4.0
        with timings.phase("inner"):
            now[0] += 5.0
    assert spent == {"outer": 6.0, "inner": 8.0}


def test_ingest_says_where_its_time_went(tmp_path: Path) -> None:
    """``ingest --timings``: every phase of an ingest, in order, then the rest; together
    they are the time the ingest reports."""
    from logpipe.timings import PHASES

    out = runner.invoke(app, ["ingest", str(SAMPLES / "real-cpu"), "--db",
                              str(tmp_path / "t.duckdb"), "--timings"]).stdout
    (total,) = re.findall(r"^  time: ([\d.]+) s$", out, re.M)
    (line,) = re.findall(r"^  phases: (.*)$", out, re.M)
    parts = [re.fullmatch(r"(.+) ([\d.]+) s", p) for p in line.split(", ")]
    assert all(parts), line
    names = [m.group(1) for m in parts if m]
    seconds = {m.group(1): float(m.group(2)) for m in parts if m}
    assert names == [*PHASES, "other"]
    assert abs(sum(seconds.values()) - float(total)) <= 0.01 * len(names)
    for name in ("read and parse", "judged counts"):
        assert seconds[name] > 0, name  # (8 runs made: their lines read and classified)
    plain = runner.invoke(app, ["ingest", str(SAMPLES / "real-cpu"), "--db",
                                str(tmp_path / "t.duckdb")]).stdout  # (unchanged: quick)
    assert "time:" in plain and "phases:" not in plain
    lake = runner.invoke(app, ["ingest", str(SAMPLES / "real-cpu"), "--lake",
                               str(tmp_path / "lake"), "--timings"])
    assert lake.exit_code != 0 and "--timings are not available with --lake" in lake.output
    assert not (tmp_path / "lake").exists()
