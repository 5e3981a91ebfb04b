"""Trust on messy folders: notes are not runs, guessed clocks take no benchmark."""

from __future__ import annotations

import os
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

runner = CliRunner()
VLLM = ("INFO 11-03 14:07:52 metrics.py:161] Avg prompt throughput: 418.7 tokens/s, Avg "
        "generation throughput: 61.3 tokens/s, Running: 42 reqs, Swapped: 0 reqs, Pending: 17 "
        "reqs, GPU KV cache usage: 37.4%, CPU KV cache usage: 0.0%.\n")

REAL_LOG = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"
BENCH = SAMPLES / "eras" / "bench_serving_v0.2.15.jsonl"
NOTES = """# Notes on the NGRAM runs

The server printed `[16:42:44] server_args=ServerArgs(model_path='m', tp_size=1)` and
then, much later:

{decode}

which is where the throughput dropped.  Next time try `--speculative-num-steps 3`.
""".format(decode="[16:43:10 TP0] Decode batch. #running-req: 1, #token: 100, token usage: "
                  "0.01, gen throughput (token/s): 61.00, #queue-req: 0")


def test_a_notes_file_quoting_log_lines_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text(NOTES)
    shutil.copy(BENCH, tmp_path / "bench.jsonl")
    result = ingest_paths([tmp_path], tmp_path / "db.duckdb")
    status = {Path(f.path).name: f.status for f in result.files}
    assert status["notes.md"] == "skipped"
    assert query(tmp_path / "db.duckdb", "SELECT count(*) FROM runs") == [(0,)]
    assert len(result.unlinked) == 2  # the benchmarks stay unlinked, said so


def test_a_plain_text_note_quoting_a_line_makes_no_run(tmp_path: Path) -> None:
    """A .txt or .log has no fences to go by: a line or two of SGLang among prose is a
    quotation, not a server's output.  No run; the line is in rejects, saying why."""
    prose = NOTES.replace("`", "").replace("# ", "")
    (tmp_path / "notes.txt").write_text(prose)
    shutil.copy(BENCH, tmp_path / "bench.jsonl")
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert not result.failed
    assert query(db, "SELECT count(*) FROM runs") == [(0,)]
    assert query(db, "SELECT (SELECT count(*) FROM batches) + (SELECT count(*) FROM events)") \
        == [(0,)]
    rows = query(db, "SELECT line_no, reason, raw FROM rejects ORDER BY line_no")
    assert [n for n, _, _ in rows] == [3, 6]
    assert all("quoted among" in why and "no run made" in why for _, why, _ in rows)
    assert "server_args=ServerArgs(" in rows[0][2] and "Decode batch" in rows[1][2]
    assert len(result.unlinked) == 2
    # the same lines in a real log's company are records (the server_args a new launch)
    (tmp_path / "server.log").write_text(REAL_LOG.read_text() + prose)
    db2 = tmp_path / "db2.duckdb"
    ingest_paths([tmp_path / "server.log"], db2)
    assert query(db2, "SELECT count(*) FROM rejects") == [(0,)]
    assert query(db2, "SELECT count(*) FROM runs") == [(2,)]


def test_log_lines_in_a_fenced_block_of_notes_are_read(tmp_path: Path) -> None:
    lines = REAL_LOG.read_text().splitlines()
    fenced = "\n".join(lines[:400])
    (tmp_path / "paste.md").write_text(NOTES + "\n```\n" + fenced + "\n```\n\nThe end.\n")
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "server.log").write_text(fenced + "\n")
    ref = plain / "ref.duckdb"
    ingest_paths([plain / "server.log"], ref)
    # the fenced lines give the same rows as the log itself; the prose gives none
    shift = NOTES.count("\n") + 2  # the fence opens after the notes
    assert query(db, "SELECT min(line_no) - ? FROM batches", [shift]) == query(
        ref, "SELECT min(line_no) FROM batches")
    assert query(db, "SELECT count(*), round(sum(gen_throughput), 2) FROM batches") == query(
        ref, "SELECT count(*), round(sum(gen_throughput), 2) FROM batches")
    assert query(db, "SELECT count(*) FROM batches WHERE line_no < ?", [shift]) == [(0,)]
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]


def test_a_guessed_date_takes_no_benchmark_by_time_window(tmp_path: Path) -> None:
    """A log whose stamps have no date is dated from its file's mtime: the run says so
    (clock_source) and a benchmark whose mtime falls in that guessed span stays unlinked
    rather than linked by a guess."""
    shutil.copy(SAMPLES / "eras" / "v0.2.15.log", tmp_path / "timeonly.log")
    shutil.copy(REAL_LOG, tmp_path / "dated.log")
    shutil.copy(BENCH, tmp_path / "bench.jsonl")
    day = datetime(2026, 7, 1, 12, 0, 0).timestamp()
    os.utime(tmp_path / "timeonly.log", (day, day))
    inside = datetime(2026, 7, 1, 23, 59, 30).timestamp()  # in 23:59:10 .. 00:00:36
    os.utime(tmp_path / "bench.jsonl", (inside, inside))
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert query(db, "SELECT clock_source FROM runs WHERE source_path LIKE '%timeonly.log'") \
        == [("date inferred from the file's mtime",)]
    assert query(db, "SELECT started_at::DATE FROM runs WHERE source_path LIKE "
                     "'%timeonly.log'") == [(datetime(2026, 7, 1).date(),)]
    assert query(db, "SELECT count(*) FROM bench_results WHERE run_id IS NOT NULL") == [(0,)]
    assert len(result.unlinked) == 2


def _decode_lines(start: datetime, minutes: list[int]) -> str:
    line = ("[{}] Decode batch, #running-req: 1, #token: 14, token usage: 0.00, "
            "cpu graph: False, gen throughput (token/s): 143.58, #queue-req: 0")
    return "".join(line.format((start + timedelta(minutes=m)).strftime("%Y-%m-%d %H:%M:%S"))
                   + "\n" for m in minutes)


def test_a_span_longer_than_its_records_justify_takes_no_benchmark(tmp_path: Path) -> None:
    """Time-window linking trusts a run's span only where its records justify it (an hour
    a record): a run of ten lines over two and a half hours takes the benchmark written
    inside it; one of two lines three hours apart (a notes file quoting two lines) does
    not, and its benchmark stays unlinked."""
    start = datetime(2026, 7, 1, 9, 0, 0)
    for days, (folder, minutes) in enumerate((("long", list(range(0, 151, 15))),
                                              ("sparse", [0, 180]))):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.log").write_text(_decode_lines(start, minutes))
        # a second run in the folder, days later: linking must choose by time
        (tmp_path / folder / "b.log").write_text(
            _decode_lines(start + timedelta(days=1 + days), [0, 1, 2]))
        shutil.copy(BENCH, tmp_path / folder / "bench.jsonl")
        inside = (start + timedelta(minutes=100)).timestamp()
        os.utime(tmp_path / folder / "bench.jsonl", (inside, inside))
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    assert query(db, "SELECT r.source_path, count(*) FROM runs r JOIN batches b "
                     "USING (run_id) GROUP BY 1 ORDER BY 1") == [
        (str(tmp_path / "long" / "a.log"), 11), (str(tmp_path / "long" / "b.log"), 3),
        (str(tmp_path / "sparse" / "a.log"), 2), (str(tmp_path / "sparse" / "b.log"), 3)]
    linked = query(db, "SELECT DISTINCT b.source_path, r.source_path, b.link_method "
                       "FROM bench_results b LEFT JOIN runs r USING (run_id) ORDER BY 1")
    assert linked == [
        (str(tmp_path / "long" / "bench.jsonl"), str(tmp_path / "long" / "a.log"),
         "time window"),
        (str(tmp_path / "sparse" / "bench.jsonl"), None, None)]


def test_summaries_name_things(tmp_path: Path) -> None:
    """The ingest summary names skipped files and why, a vLLM log beside SGLang's is read
    as vLLM's, doctor takes a folder and names each file's engine, and a misspelt run name
    gets a suggestion."""
    (tmp_path / "vllm.log").write_text(VLLM)
    (tmp_path / "notes.txt").write_text("nothing to see here\n")
    (tmp_path / "baseline-a").mkdir()
    shutil.copy(REAL_LOG, tmp_path / "baseline-a" / "server.log")
    db = tmp_path / "db.duckdb"
    out = runner.invoke(app, ["ingest", str(tmp_path), "--db", str(db)]).stdout
    assert "skipped (not a recognised format): " in out and "notes.txt" in out
    assert "vllm.log" not in out.split("skipped (not a recognised format)")[1]
    assert query(db, "SELECT engine, count(*) FROM runs GROUP BY 1 ORDER BY 1") == [
        ("sglang", 1), ("vllm", 1)]
    doctor = runner.invoke(app, ["doctor", str(tmp_path)])
    assert "vllm.log: vLLM server log, 1 line(s)" in doctor.stdout
    assert "stats lines: 1" in doctor.stdout
    assert "server.log: SGLang server log" in doctor.stdout
    typo = runner.invoke(app, ["compare", "--run", "basline-a", "--run", "baseline-a",
                               "--db", str(db)])
    assert typo.exit_code == 2
    assert "no run named 'basline-a': did you mean 'baseline-a'?" in typo.output


GPU_RUN = SAMPLES / "real-gpu" / "real-gpu-baseline-r1"


def _driver_log(server_log: Path, lines: int) -> str:
    """What a run script prints when it tee's the server's decode lines into its own log."""
    decode = [line for line in server_log.read_text().splitlines() if "Decode batch" in line]
    return ("== driver: starting plain\nwaiting for ready...\n" + "\n".join(decode[:lines])
            + "\n== bench done\nall good\n")


def test_a_driver_log_that_teed_a_servers_lines_is_a_copy_not_a_run(tmp_path: Path) -> None:
    shutil.copy(GPU_RUN / "server.log", tmp_path / "server-plain.log")
    shutil.copy(GPU_RUN / "bench_serving.jsonl", tmp_path / "bench-plain.jsonl")
    (tmp_path / "run.log").write_text(_driver_log(GPU_RUN / "server.log", 30))
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert query(db, "SELECT source_path FROM runs") == [(str(tmp_path / "server-plain.log"),)]
    assert query(db, "SELECT copy_lines, copy_of FROM sources WHERE path LIKE '%run.log'") == [
        (30, str(tmp_path / "server-plain.log"))]
    assert query(db, "SELECT count(*) FROM batches WHERE source_path LIKE '%run.log'") == [(0,)]
    assert [(Path(c.path).name, c.lines) for c in result.copies] == [("run.log", 30)]
    assert result.runs_created == 1
    # the copy's run, taken back after its environment was written, took it along
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM logpipe_internal.run_envs "
                     "WHERE run_id IN (SELECT run_id FROM runs)") == [(1, 1)]
    assert query(db, "SELECT count(*) FROM logpipe_internal.run_envs") == [(1,)]
    out = runner.invoke(app, ["ingest", str(tmp_path), "--db", str(tmp_path / "cli.duckdb")])
    assert "copy, no run: " in out.output and "30 record line(s) all repeat" in out.output


def test_a_log_beside_its_own_copy_is_not_compared_with_the_other_logs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log, its copy behind a note line, and a third log of the same seconds that
    says other numbers (and more lines): the copy is taken back, and then the log
    itself, whose first lines only the copy repeated, is no suspect: it is not compared
    line by line with the third log (every line of it hashed and joined), as it was."""
    from logpipe.ingest import copies

    text = (GPU_RUN / "server.log").read_text()
    (tmp_path / "server.log").write_text(text)
    (tmp_path / "server.log.bak").write_text("# kept before the rerun\n" + text)
    other = re.sub(r"gen throughput \(token/s\): ([\d.]+)",
                   lambda m: f"gen throughput (token/s): {float(m[1]) + 1000:.2f}", text)
    decode = [line for line in other.splitlines() if "Decode batch" in line]
    (tmp_path / "other.log").write_text(other + "\n".join(decode[-5:]) + "\n")
    compared: list[str] = []
    same_lines = copies._same_lines

    def spy(store: object, path: str, *args: object, **kwargs: object) -> object:
        compared.append(Path(path).name)
        return same_lines(store, path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(copies, "_same_lines", spy)
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert [(Path(c.path).name, Path(c.of).name) for c in result.copies] == [
        ("server.log.bak", "server.log")]
    assert query(db, "SELECT count(DISTINCT source_path) FROM runs") == [(2,)]
    assert "server.log.bak" in compared and "server.log" not in compared, compared


def test_a_paste_from_the_middle_of_a_log_is_compared_with_its_lines_of_that_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A note of ten stamped decode lines pasted from the middle of a log is a copy,
    found by setting them against the log's lines of their seconds alone: the log is
    hashed over that window, not whole (the lines of other seconds cannot repeat one)."""
    from logpipe.ingest import copies

    text = (GPU_RUN / "server.log").read_text()
    decode = [line for line in text.splitlines() if "Decode batch" in line]
    (tmp_path / "server.log").write_text(text)
    at = len(decode) // 3
    (tmp_path / "paste.log").write_text("\n".join(decode[at:at + 10]) + "\n")
    windows: list[tuple[str, object]] = []
    line_hashes = copies.line_hashes

    def spy(path: Path, cuts: tuple[bytes, ...] = (b"",), lines: object = None) -> object:
        windows.append((path.name, lines))
        return line_hashes(path, cuts, lines)  # type: ignore[arg-type]

    monkeypatch.setattr(copies, "line_hashes", spy)
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert [(Path(c.path).name, Path(c.of).name) for c in result.copies] == [
        ("paste.log", "server.log")]
    (first, last), = [w for name, w in windows if name == "server.log"]  # type: ignore[misc]
    numbered = text.splitlines()
    pasted = (numbered.index(decode[at]) + 1, numbered.index(decode[at + 9]) + 1)
    assert first <= pasted[0] and pasted[1] <= last and last - first < len(numbered) / 2, (
        first, last, pasted, len(numbered))


def test_a_log_that_differs_in_one_line_is_not_a_copy(tmp_path: Path) -> None:
    shutil.copy(GPU_RUN / "server.log", tmp_path / "server-plain.log")
    text = _driver_log(GPU_RUN / "server.log", 30)
    changed = text.replace("gen throughput (token/s): ", "gen throughput (token/s): 1", 1)
    assert changed != text
    (tmp_path / "run.log").write_text(changed)
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert not result.copies
    assert query(db, "SELECT count(DISTINCT source_path) FROM runs") == [(2,)]


def test_benches_beside_several_server_logs_link_by_name_stem(tmp_path: Path) -> None:
    """The GPU recipe's folder: two server logs and two bench files, copied (their
    modification times now lie outside both runs' spans): each bench links to the log
    sharing its name stem, and says so."""
    prof = SAMPLES / "real-gpu-profiled"
    for arm, run in (("plain", "baseline-r1"), ("ngram", "ngram-r1")):
        shutil.copy(prof / f"real-gpu-prof-{run}" / "server.log", tmp_path / f"server-{arm}.log")
        shutil.copy(prof / f"real-gpu-prof-{run}" / "bench_serving.jsonl",
                    tmp_path / f"bench-{arm}.jsonl")
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert not result.failed and not result.unlinked, result.unlinked
    rows = query(db, "SELECT b.source_path, r.source_path, b.link_method FROM bench_results b "
                     "JOIN runs r USING (run_id) ORDER BY 1")
    assert [(Path(b).name, Path(r).name, m) for b, r, m in rows] == [
        ("bench-ngram.jsonl", "server-ngram.log", "name stem"),
        ("bench-plain.jsonl", "server-plain.log", "name stem")]


def test_name_stem_words() -> None:
    from logpipe.ingest.linking import name_stem

    assert name_stem("/x/bench-plain.jsonl") == name_stem("/x/server-plain.log") == {"plain"}
    assert name_stem("/x/bench_serving.jsonl") == frozenset()  # names no experiment
    assert name_stem("/x/eagle3_tp2.server.log") == {"eagle3", "tp2"}


def test_a_relay_behind_a_constant_tag_is_a_copy_and_no_aa_pair(tmp_path: Path) -> None:
    """A driver that relays every server line as ``[srv] ...`` into its own log, in a run
    folder with the manifest: its records repeat the server log's behind one constant tag.
    It makes no run, so no zero-spread A/A pair; a Ray-tagged or indented log of the same
    lines is the same log in another wrapper, and keeps its run."""
    run = SAMPLES / "real-cpu" / "real-cpu-baseline-r1"
    folder = tmp_path / "real-cpu-baseline-r1"
    folder.mkdir()
    for name in ("server.log", "env.json"):
        shutil.copy(run / name, folder / name)
    server = (run / "server.log").read_text().splitlines()
    (folder / "driver.log").write_text("".join(f"[srv] {line}\n" for line in server))
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert [Path(c.path).name for c in result.copies] == ["driver.log"]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    assert query(db, "SELECT count(*) FROM launch_noise") == [(0,)]
    wrapped = tmp_path / "wrapped"
    wrapped.mkdir()
    shutil.copy(SAMPLES / "wrappers" / "plain.log", wrapped / "plain.log")
    shutil.copy(SAMPLES / "wrappers" / "ray-local.log", wrapped / "ray-local.log")
    other = tmp_path / "wrapped.duckdb"
    assert not ingest_paths([wrapped], other).copies
    assert query(other, "SELECT count(*) FROM runs") == [(2,)]


def test_a_real_log_behind_100_kb_of_pip_output_is_found_and_read_whole(tmp_path: Path
                                                                        ) -> None:
    """A Slurm job installs its environment first: 2,400 lines of pip output, then the
    server's own log.  The head shows no known format; the log is found further on and
    every one of its batch lines is read, as from the log alone."""
    pip = "".join(f"Collecting package-{i}==1.{i}.0\n  Downloading package_{i}-1.{i}.0-py3-none-"
                  f"any.whl (12{i % 10} kB)\n" for i in range(1200))
    assert len(pip) > 100_000
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "slurm-4242.out").write_text(pip + REAL_LOG.read_text())
    (tmp_path / "alone").mkdir()
    shutil.copy(REAL_LOG, tmp_path / "alone" / "server.log")
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([tmp_path / "job"], db).failed
    other = tmp_path / "alone.duckdb"
    assert not ingest_paths([tmp_path / "alone"], other).failed
    cols = "kind, running_req, gen_throughput, ts"
    got = query(db, f"SELECT {cols} FROM batches ORDER BY ts, kind, running_req")
    assert got and got == query(other, f"SELECT {cols} FROM batches ORDER BY ts, kind, "
                                       "running_req")
    doctor = runner.invoke(app, ["doctor", str(tmp_path / "job" / "slurm-4242.out")])
    assert "SGLang server log" in doctor.stdout


def test_a_driver_log_tailing_two_servers_is_a_copy_of_both(tmp_path: Path) -> None:
    """A run script's log that holds the last three decode lines of each of two server
    logs it ran in turn (the GPU recipe's run.log): every record line repeats a line of
    one or the other.  It is a copy of both, never a run."""
    logs = [SAMPLES / "real-gpu" / f"real-gpu-{arm}-r1" / "server.log"
            for arm in ("baseline", "ngram")]
    text = ""
    for i, log in enumerate(logs):
        shutil.copy(log, tmp_path / f"server-{i}.log")
        decode = [line for line in log.read_text().splitlines() if "Decode batch" in line]
        text += f"== driver: server {i} up\n" + "\n".join(decode[-3:]) + "\n== bench done\n"
    (tmp_path / "run.log").write_text(text)
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert sorted(Path(p).name for (p,) in query(db, "SELECT source_path FROM runs")) == [
        "server-0.log", "server-1.log"]
    (copy,) = result.copies
    assert Path(copy.path).name == "run.log" and copy.lines == 6
    assert sorted(Path(p).name for p in copy.of.split(", ")) == ["server-0.log",
                                                                "server-1.log"]


def test_two_decode_lines_between_progress_bars_are_a_console_paste_and_are_read(
        tmp_path: Path) -> None:
    """A console paste: tqdm bars of a bench, two of the server's decode lines between
    them, a shell prompt.  Console output, not prose: both lines are read into a run (the
    rule for notes took them back before)."""
    decode = [line for line in REAL_LOG.read_text().splitlines() if "Decode batch" in line][5:7]
    bars = [f"{p:3d}%|{'█' * (p // 10)}{' ' * (10 - p // 10)}| {p * 24 // 100}/24 "
            f"[00:0{p // 20}<00:01, 21.3it/s]" for p in (0, 25, 50, 75, 100)]
    text = "\n".join(["$ python -m sglang.bench_serving --num-prompts 24", *bars[:2],
                      decode[0], bars[2], decode[1], *bars[3:], ""])
    (tmp_path / "paste.log").write_text(text)
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    assert query(db, "SELECT count(*) FROM batches") == [(2,)]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]


def test_a_footnote_quoting_one_whole_decode_line_is_read(tmp_path: Path) -> None:
    """A note's footnote sets one complete decode line in inline code, another note one in a
    fenced block: each is read (a fragment mentioned in prose is still not)."""
    lines = [x for x in REAL_LOG.read_text().splitlines() if "Decode batch" in x]
    line, other = lines[0], lines[40]  # (one line quoted twice is one record: a copy)
    (tmp_path / "footnote.md").write_text(
        "# NGRAM on the CPU\n\nIt slowed down at four requests.[^1]\n\n"
        f"[^1]: the server printed `{line}` at that point.\n")
    (tmp_path / "fenced.md").write_text(f"Seen today:\n\n```\n{other}\n```\n\nodd.\n")
    (tmp_path / "mention.md").write_text("We grep for `Decode batch` lines, as in "
                                         "`#running-req: 4`.\n")
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    rows = dict(query(db, "SELECT source_path, count(*) FROM batches GROUP BY 1"))
    assert {Path(p).name: n for p, n in rows.items()} == {"footnote.md": 1, "fenced.md": 1}
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]


def test_the_overlap_sweep_finds_what_the_pairs_find() -> None:
    """Which files' runs overlap another file's in time, found by a sweep (the join of
    every run with every run is quadratic in a folder of one day): the same files as the
    pairs, on random spans with touching ends, nested spans and files of several runs."""
    import random
    from datetime import datetime, timedelta

    from logpipe.ingest.copies import _overlapping

    rnd = random.Random(7)
    base = datetime(2026, 1, 1)
    for _ in range(300):
        spans = []
        for _ in range(rnd.randint(1, 12)):
            a = rnd.randint(0, 40)
            spans.append((rnd.randint(1, 5), base + timedelta(seconds=a),
                          base + timedelta(seconds=a + rnd.choice([0, 1, 3, 10]))))
        pool = [r for r in spans if rnd.random() < 0.7]
        pairs = {n for n, a, b in spans for m, c, d in pool if m != n and c <= b and d >= a}
        assert _overlapping(spans, pool) == pairs


def test_a_copy_of_a_log_whose_ranks_print_the_same_events_is_a_copy(tmp_path: Path) -> None:
    """Every rank of a TP/DP server prints its start-up events in the same second with its
    own tag (``DP0 TP0 EP0``, ``DP1 TP1 EP1``): the event rows of the two ranks say the
    same (an event keeps no rank).  A copy of such a log (``cp`` and a note on top) is
    still a copy: each of its lines is one of the original's, whichever rank's."""
    lines = []
    for line in (SAMPLES / "eras" / "v0.5.1.log").read_text().splitlines():
        if "DP1 TP1 EP1] " in line and "batch." not in line:
            lines.append(line.replace("DP1 TP1 EP1] ", "DP0 TP0 EP0] "))
        lines.append(line)
    text = "\n".join(lines) + "\n"
    assert text.count("DP0 TP0 EP0] KV Cache is allocated") == 1
    (tmp_path / "server.log").write_text(text)
    (tmp_path / "server.log.bak").write_text("kept before the rerun\n" + text)
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert [(Path(c.path).name, Path(c.of).name) for c in result.copies] == [
        ("server.log.bak", "server.log")]
    assert query(db, "SELECT DISTINCT source_path FROM runs") == [(str(tmp_path / "server.log"),)]
    events = query(db, "SELECT count(*) FROM events WHERE source_path LIKE '%server.log'")
    assert events[0][0] > 10


def test_a_log_repeating_a_line_more_often_than_the_original_is_not_a_copy(tmp_path: Path
                                                                         ) -> None:
    """Each line of a copy is a line of the original as often as it is in the copy: a
    driver log that holds one of the server's decode lines twice (a retried tail) holds
    a record the server printed once, and keeps its run."""
    shutil.copy(GPU_RUN / "server.log", tmp_path / "server-plain.log")
    decode = [line for line in (GPU_RUN / "server.log").read_text().splitlines()
              if "Decode batch" in line]
    (tmp_path / "run.log").write_text("== driver\n" + "\n".join(decode[:5] + decode[4:5])
                                      + "\n== done\n")
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([tmp_path], db).copies
    assert query(db, "SELECT count(DISTINCT source_path) FROM runs") == [(2,)]
    (tmp_path / "run.log").write_text("== driver\n" + "\n".join(decode[:6]) + "\n== done\n")
    again = tmp_path / "again.duckdb"
    assert [Path(c.path).name for c in ingest_paths([tmp_path], again).copies] == ["run.log"]


def test_a_log_that_goes_on_past_another_file_is_read_whole(tmp_path: Path) -> None:
    """A log copied while its server ran (``server-1.log``, the first half, read first)
    beside the log itself, complete: the complete log begins with the copy's bytes but
    goes on past them.  Every one of its lines is read (it was taken for a duplicate of
    the copy, and its second half was never read); the half copy is then the copy, in
    one ingest or in two.  A file of the very same bytes is still a duplicate."""
    lines = REAL_LOG.read_text().splitlines(keepends=True)
    half = "".join(lines[:len(lines) // 2])
    decode = sum("Decode batch" in line for line in lines)
    for ingests in ([["a"]], [["a"], ["b"]]):
        root = tmp_path / str(len(ingests))
        (root / "a").mkdir(parents=True)
        (root / "b").mkdir()
        (root / "a" / "server-1.log").write_text(half)
        (root / "a" / "server-1.log.bak").write_text(half)
        (root / ("a" if len(ingests) == 1 else "b") / "server.log").write_text("".join(lines))
        db = root / "db.duckdb"
        results = [ingest_paths([root / d for d in dirs], db) for dirs in ingests]
        assert query(db, "SELECT count(*) FROM batches WHERE kind = 'decode'") == [(decode,)]
        assert [Path(p).name for (p,) in query(db, "SELECT DISTINCT source_path FROM runs")
                ] == ["server.log"]
        copies = [(Path(c.path).name, Path(c.of).name) for r in results for c in r.copies]
        assert copies == [("server-1.log", "server.log")]
        assert {Path(f.path).name: f.status for f in results[0].files
                if f.path.endswith(".bak")} == {"server-1.log.bak": "duplicate"}
