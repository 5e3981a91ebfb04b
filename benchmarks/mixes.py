"""Ingest on logs shaped like real deployments, against peers measured in the same run.

    python benchmarks/mixes.py [--size 256MB] [--repeat 3] [--workdir DIR] [--only NAME ...]

``benchmarks/run.py`` measures a steady log of one rank per line, the friendliest file.
Real server logs are not that: a TP 8 server prints every batch line eight times with rank
tags, a speculative server adds accept length and rate, a load balancer asks ``/health``
every 2 s, a container runtime or journald wraps every line, a folder of experiments
concatenates many launches, and a vLLM server prints one access line per request with a
stats line every 10 s.  Each mix below is built from lines the engines really print (the
bundled recordings: ``mission/eagle3-untuned`` for SGLang's speculative lines with ranks,
``real-gpu`` for SGLang 0.5.23's access lines, ``real-cpu`` for whole launches,
``real-vllm-cpu-counters`` for vLLM 0.32's stats and speculative metrics lines), their
numbers redrawn and their clock advanced:

- ``sglang-eagle3-tp8``: 4 launches of an EAGLE-3 server at TP 8 (every batch line from
  each of 8 ranks, accept length and rate), one ``POST /generate`` access line a step,
  ``GET /health`` every 2 s;
- ``sglang-dp4-journald``: DP attention over 4 ranks (``DP<i> TP<i>`` tags) read from
  ``journalctl`` (``Dec 04 13:00:01 node7 python3[4242]: `` before every line), warnings
  between the batch lines, 2 launches;
- ``sglang-docker-launches``: ``docker logs --timestamps`` of a folder of short launches
  (whole real SGLang CPU launches, startup to shutdown, about 180 KB each: many launches in
  one file); each launch's ``server_args`` line is its recording's (two configurations,
  each recorded twice) with the ``random_seed`` an unseeded server draws, not redrawn
  digit by digit (which renamed arguments, ``enable_fp32_lm_head`` to
  ``enable_fp11_lm_head``, and changed ~110 of ~550 in every launch: no folder of real
  launches looks so);
- ``vllm-docker-spec``: a vLLM 0.32 server with n-gram speculation under
  ``docker logs --timestamps``: an access line per request (20 requests a second), the
  engine's stats and ``SpecDecoding metrics`` lines every 10 s;
- ``steady`` (reference): ``run.py``'s steady log, one rank, no wrapper;
- ``folder``: the five above as the files of one folder, with a copy of the steady log
  behind a note line (``steady.log.bak``): one ingest of the folder, the copy taken back;
  its peers read each file in turn.

For each mix, in ``--repeat`` interleaved rounds (one of each per round, the ratios the
medians of each round's ratio): ``logpipe ingest`` into a fresh database, the Python
``re`` loop (``peers/re_loop.py``: decode fields, or vLLM's stats fields for a vLLM log),
one polars streaming regex (``peers/polars_regex.py``), and the storage floor (the rows
of logpipe's own ingest of the mix loaded from Parquet into a fresh database).  Also, once,
the share of lines each lane took: the C lane's batch, access and request (receipt and
record) rows and the polars parser's lines (``split_block`` over the file's blocks; for a vLLM log,
its C lane's access rows, its stats and spec rows and the lines left to its line parser).
Writes ``benchmarks/RESULTS-mixes.md`` (a hand-written ``## Analysis`` at its end is kept).
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import (  # noqa: E402
    FLOOR_PARTS,
    PY,
    SAMPLES,
    _jitter,
    compile_package,
    generate_steady,
    measure_rounds,
    parse_size,
    round_ratio,
    write_results,
)

from logpipe.timings import PHASES  # noqa: E402

INGEST, FLOOR, RE_LOOP, POLARS = "ingest", "floor", "re loop", "polars regex"


def _lines(rel: str) -> list[str]:
    return (SAMPLES / rel).read_text().splitlines()


def _sglang_stamp(t: datetime, ranks: str = "") -> str:
    return f"[{t:%Y-%m-%d %H:%M:%S}{' ' + ranks if ranks else ''}] "


def _message(line: str) -> str:
    """An SGLang line without its bracket prefix."""
    return line.split("] ", 1)[1] if line.startswith("[") else line


class _Writer:
    """Writes lines until ``size`` bytes, with a wrapper in front of each."""

    def __init__(self, path: Path, size: int, wrap: Callable[[datetime], str] | None = None):
        self.fh = path.open("w")
        self.size, self.written, self.wrap = size, 0, wrap

    def put(self, t: datetime, line: str) -> None:
        text = (self.wrap(t) if self.wrap else "") + line + "\n"
        self.fh.write(text)
        self.written += len(text)

    @property
    def full(self) -> bool:
        return self.written >= self.size

    def close(self) -> None:
        self.fh.close()


def _sglang_server(out: _Writer, rnd: random.Random, start: datetime, ranks: list[str],
                   share: int, startup: list[str], decode: list[str], prefill: list[str],
                   noise: list[str] = (), noise_every: int = 0) -> datetime:
    """One launch: its startup lines (each rank's copy where the line had a rank tag), then
    steps of 0.5 s until ``share`` bytes: every rank's decode line, a prefill line every
    10 steps, an access line a step, ``/health`` every 4 steps; then a shutdown."""
    t = start
    for line in startup:
        if line.startswith("[") and " TP0" in line.split("]", 1)[0]:
            for r in ranks:
                out.put(t, _sglang_stamp(t, r) + _message(line))
        else:
            out.put(t, _sglang_stamp(t) + _message(line) if line.startswith("[") else line)
    until = out.written + share
    step = 0
    port = 40000
    while out.written < until and not out.full:
        step += 1
        t += timedelta(milliseconds=500)
        if step % 10 == 0:
            line = _jitter(rnd.choice(prefill), rnd)
            for r in ranks:
                out.put(t, _sglang_stamp(t, r) + line)
        line = _jitter(rnd.choice(decode), rnd)
        for r in ranks:
            out.put(t, _sglang_stamp(t, r) + line)
        port = 40000 + (port + 7) % 20000
        out.put(t, _sglang_stamp(t) + f'INFO:     127.0.0.1:{port} - "POST /generate '
                                      'HTTP/1.1" 200 OK')
        if step % 4 == 0:
            out.put(t, _sglang_stamp(t) + f'INFO:     10.0.3.17:{port + 1} - "GET /health '
                                          'HTTP/1.1" 200 OK')
        if noise_every and step % noise_every == 0:
            out.put(t, _sglang_stamp(t) + rnd.choice(noise))
    t += timedelta(seconds=30)
    return t


def _eagle3_parts() -> tuple[list[str], list[str], list[str]]:
    log = _lines("mission/eagle3-untuned/server.log")
    ready = next(i for i, ln in enumerate(log) if "ready to roll" in ln) + 1
    decode = [_message(ln) for ln in log if "Decode batch" in ln and "cuda graph: True" in ln]
    prefill = [_message(ln) for ln in log if "Prefill batch" in ln and "cuda graph: True" in ln]
    return log[:ready], decode, prefill


def gen_eagle3_tp8(path: Path, size: int) -> None:
    rnd = random.Random(11)
    startup, decode, prefill = _eagle3_parts()
    startup = [ln.replace("tp_size=1", "tp_size=8") for ln in startup]
    out = _Writer(path, size)
    t = datetime(2026, 5, 4, 13, 0, 0)
    ranks = [f"TP{i} EP{i}" for i in range(8)]
    while not out.full:
        t = _sglang_server(out, rnd, t, ranks, size // 4 + 1, startup, decode, prefill)
    out.close()


def gen_dp4_journald(path: Path, size: int) -> None:
    rnd = random.Random(12)
    startup, decode, prefill = _eagle3_parts()
    noise = [_message(ln) for ln in _lines("eras/v0.5.5.log")
             if "WARNING" in ln or "Warning" in ln][:20] or ["WARNING: slow iteration"]
    out = _Writer(path, size, wrap=lambda t: f"{t:%b %d %H:%M:%S} node7 python3[4242]: ")
    t = datetime(2026, 12, 4, 13, 0, 0)
    ranks = [f"DP{i} TP{i}" for i in range(4)]
    while not out.full:
        t = _sglang_server(out, rnd, t, ranks, size // 2 + 1, startup, decode, prefill,
                           noise, noise_every=25)
    out.close()


_SEED = re.compile(r"('random_seed': )\d+")


def gen_docker_launches(path: Path, size: int) -> None:
    rnd = random.Random(13)
    launches = [_lines(f"real-cpu/{name}/server.log") for name in
                ("real-cpu-baseline-r1", "real-cpu-baseline-r2", "real-cpu-ngram-r1",
                 "real-cpu-ngram-r2")]
    t0 = datetime(2026, 12, 4, 9, 0, 0)

    def wrap(t: datetime) -> str:
        return f"{t:%Y-%m-%dT%H:%M:%S}.{rnd.randrange(10**9):09d}Z "

    out = _Writer(path, size, wrap=wrap)
    n = 0
    while not out.full:
        log = launches[n % len(launches)]
        base = t0 + timedelta(minutes=5 * n)
        for line in log:
            text = (_SEED.sub(lambda m: f"{m[1]}{rnd.randrange(1 << 30)}", line)
                    if "server_args=" in line else _jitter(line, rnd))
            if text.startswith("[") and text[1:5].isdigit():  # the launch's own clock, moved
                stamp = datetime.strptime(text[1:20], "%Y-%m-%d %H:%M:%S")
                moved = base + (stamp - datetime(stamp.year, stamp.month, stamp.day))
                text = f"[{moved:%Y-%m-%d %H:%M:%S}" + text[20:]
            out.put(base, text)
        n += 1
    out.close()


def gen_vllm_docker_spec(path: Path, size: int) -> None:
    rnd = random.Random(14)
    log = _lines("real-vllm-cpu-counters/real-vllm-cpu-counters-ngram-r1/server.log")
    stats = next(ln for ln in log if "Engine 000:" in ln and "Running: 1 reqs" in ln)
    spec = next(ln for ln in log if "SpecDecoding metrics" in ln)
    head_end = next(i for i, ln in enumerate(log) if "Application startup complete" in ln) + 1
    startup = log[:head_end]

    def wrap(t: datetime) -> str:
        return f"{t:%Y-%m-%dT%H:%M:%S}.{rnd.randrange(10**9):09d}Z "

    def stamped(line: str, t: datetime) -> str:  # vLLM's "INFO 12-04 15:41:14 [file.py:N]"
        head, sep, rest = line.partition(" INFO ")
        return f"{head}{sep}{t:%m-%d %H:%M:%S}{rest[14:]}" if sep else line

    out = _Writer(path, size, wrap=wrap)
    t = datetime(2026, 12, 4, 15, 0, 0)
    while not out.full:
        for line in startup:
            out.put(t, stamped(line, t))
        until = out.written + size // 3 + 1
        tick = 0
        while out.written < until and not out.full:
            tick += 1
            t += timedelta(milliseconds=50)
            out.put(t, f'INFO:     127.0.0.1:{40000 + tick % 20000} - "POST /v1/completions '
                       'HTTP/1.1" 200 OK')
            if tick % 40 == 0:
                out.put(t, 'INFO:     10.0.3.17:51234 - "GET /health HTTP/1.1" 200 OK')
            if tick % 200 == 0:
                out.put(t, stamped(_jitter(stats, rnd), t))
                out.put(t, stamped(_jitter(spec, rnd), t))
        t += timedelta(minutes=2)
    out.close()


MIXES: dict[str, tuple[Callable[[Path, int], None], str]] = {
    "sglang-eagle3-tp8": (gen_eagle3_tp8, "sglang"),
    "sglang-dp4-journald": (gen_dp4_journald, "sglang"),
    "sglang-docker-launches": (gen_docker_launches, "sglang"),
    "vllm-docker-spec": (gen_vllm_docker_spec, "vllm"),
    "steady": (generate_steady, "sglang"),
}

LANES = """
import sys
from logpipe.engines.sglang import fastlane
from logpipe.readers import line_blocks
batch = http = receipts = records = slow = 0
with open(sys.argv[1], "rb") as fh:
    for block in line_blocks(fh):
        lanes = fastlane.split_block(block, 1, "2026-01-01")
        batch += lanes.batches.height
        http += lanes.http.height
        records += len(lanes.records)
        receipts += lanes.quiet.height - len(lanes.records)
        slow += len(lanes.slow_line_nos)
print(batch, http, receipts, records, slow)
"""
"""The lines each lane takes: C batch rows, C access rows, C quiet rows (a request log's
receipts and records), lines left to polars."""


VLLM_LANES = """
import sys
from logpipe.engines.vllm import logparser
from logpipe.readers import line_blocks
if not logparser.fast_enabled():
    raise SystemExit("the vLLM C lane is not built")
http = records = slow = 0
with open(sys.argv[1], "rb") as fh:
    for block in line_blocks(fh, logparser.BLOCK_BYTES):
        lines, access = logparser.split_block(block)
        http += access.height
        records += sum(t.height for t in (lines.stats, lines.spec) if t is not None)
        slow += len(lines.slow_idx)
print(records, http, slow)
"""
"""The lines each lane takes in a vLLM log: C access rows, C stats and spec rows, lines left
to the line parser."""


def lane_shares(path: Path, engine: str) -> str:
    proc = subprocess.run([PY, "-c", LANES if engine == "sglang" else VLLM_LANES, str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return f"not measured: {proc.stderr.strip().splitlines()[-1]}"
    counts = [int(x) for x in proc.stdout.split()]
    total = sum(counts)
    if engine != "sglang":  # (its stats and spec lines, access lines, the line parser's)
        records, http, slow = counts
        return (f"C {100 * (records + http) / total:.1f}% (access {100 * http / total:.1f}%, "
                f"stats and spec {100 * records / total:.1f}%), line parser "
                f"{100 * slow / total:.1f}%")
    batch, http, receipts, records, slow = counts
    requests = (f", request receipts {100 * receipts / total:.1f}% and records "
                f"{100 * records / total:.1f}%" if receipts or records else "")
    return (f"C {100 * (total - slow) / total:.1f}% (batch {100 * batch / total:.1f}%, "
            f"access {100 * http / total:.1f}%{requests}), polars {100 * slow / total:.1f}%")


FOLDER = "folder"
"""A folder as a user keeps one: every mix above in its own file, and a copy of the steady
log behind a note line (``steady.log.bak``, kept before a rerun): one ``logpipe ingest``
of the folder, each file in its own transaction, the copy found and taken back."""


def make_folder(work: Path, size_name: str) -> Path:
    folder = work / f"{FOLDER}-{size_name}"
    folder.mkdir(exist_ok=True)
    for name in MIXES:
        link = folder / f"{name}.log"
        if not link.exists():
            link.symlink_to(work / f"{name}-{size_name}.log")
    bak = folder / "steady.log.bak"
    if not bak.exists():
        with open(bak, "wb") as out, open(work / f"steady-{size_name}.log", "rb") as src:
            out.write(b"kept before the rerun\n")
            shutil.copyfileobj(src, out, 1 << 24)
    return folder


def _phases_row(name: str, said: str, wall: float) -> str:
    """A row of the phases table from what ``ingest --timings`` printed."""
    (total,) = re.findall(r"^  time: ([\d.]+) s$", said, re.M)
    (line,) = re.findall(r"^  phases: (.*)$", said, re.M)
    seconds = [p.rsplit(" ", 2)[1] for p in line.split(", ")]
    return f"| {name} | {wall - float(total):.2f} | {' | '.join(seconds)} |"


def _peer_over(peer: str, files: list[tuple[Path, str]]) -> list[str]:
    """A peer over every file of a folder in turn (one process a file, as it is written)."""
    script = " && ".join(
        f"{PY} {HERE / 'peers' / peer} {f}" + (" --vllm" if engine == "vllm" else "")
        for f, engine in files)
    return ["sh", "-c", script]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="256MB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--only", nargs="*", choices=sorted([*MIXES, FOLDER]), default=None)
    args = ap.parse_args()
    compile_package()
    size = parse_size(args.size)
    work = args.workdir or Path(tempfile.gettempdir()) / "logpipe-mixes"
    work.mkdir(parents=True, exist_ok=True)
    logpipe = [PY, "-m", "logpipe.cli"]
    rows, targets, phases = [], [], []
    for name in args.only or [*MIXES, FOLDER]:
        if name == FOLDER:
            for other, (make, _) in MIXES.items():
                if not (work / f"{other}-{args.size}.log").exists():
                    print(f"generating {other}-{args.size}.log ...", flush=True)
                    make(work / f"{other}-{args.size}.log", size)
            mix = make_folder(work, args.size)
            files = [(f, MIXES[f.stem][1] if f.stem in MIXES else "sglang")
                     for f in sorted(mix.iterdir())]
        else:
            make, engine = MIXES[name]
            mix = work / f"{name}-{args.size}.log"
            if not mix.exists() or mix.stat().st_size < size:
                print(f"generating {mix.name} ...", flush=True)
                make(mix, size)
            files = [(mix, engine)]
        mb = sum(f.stat().st_size for f, _ in files) / 2**20
        lines = sum(int(subprocess.run(["wc", "-l", str(f)], capture_output=True, text=True)
                        .stdout.split()[0]) for f, _ in files)
        db, floor_db, parts = work / f"{name}.duckdb", work / "floor.duckdb", work / "parts"

        def rm(p: Path) -> list[str]:
            return [PY, "-c", f"import pathlib; [pathlib.Path(p).unlink(missing_ok=True) "
                              f"for p in ({str(p)!r}, {str(p) + '.wal'!r})]"]

        print(f"{name}: {mb:.0f} MiB, {lines:,} lines; the floor's input ...", flush=True)
        subprocess.run(rm(db), check=True)
        began = time.perf_counter()
        said = subprocess.run([*logpipe, "ingest", str(mix), "--db", str(db), "--timings"],
                              check=True, capture_output=True, text=True).stdout
        phases.append(_phases_row(name, said, time.perf_counter() - began))
        shutil.rmtree(parts, ignore_errors=True)
        parts.mkdir()
        subprocess.run([PY, "-c", FLOOR_PARTS, str(db), str(parts), str(HERE)], check=True)
        shares = ("each file's as in its row; the copy's rows taken back" if name == FOLDER
                  else lane_shares(mix, files[0][1]))
        print(f"  lanes: {shares}; {args.repeat} interleaved round(s) ...", flush=True)
        res, rounds = measure_rounds({
            INGEST: ([*logpipe, "ingest", str(mix), "--db", str(db)], None, rm(db)),
            FLOOR: ([PY, str(HERE / "peers" / "storage_floor.py"), str(parts), str(floor_db)],
                    None, rm(floor_db)),
            RE_LOOP: (_peer_over("re_loop.py", files), None, None),
            POLARS: (_peer_over("polars_regex.py", files), None, None),
        }, args.repeat)
        shutil.rmtree(parts, ignore_errors=True)
        ing = res[INGEST]
        rate = mb / ing["seconds"]
        re_x = round_ratio(rounds, RE_LOOP, INGEST)
        floor_x = round_ratio(rounds, INGEST, FLOOR)
        pl_x = round_ratio(rounds, POLARS, INGEST)
        rows.append(f"| {name} | {mb:.0f} | {lines:,} | {ing['seconds']:.2f} | {rate:.1f} | "
                    f"{ing['rss_mb']:.0f} | {res[RE_LOOP]['seconds']:.2f} | {re_x:.2f}× | "
                    f"{res[POLARS]['seconds']:.2f} | {pl_x:.2f}× | {res[FLOOR]['seconds']:.2f} "
                    f"| {floor_x:.2f}× | {shares} |")
        targets.append(f"| {name} | {'yes' if rate >= 150 else 'NO'} ({rate:.0f} MB/s) | "
                       f"{'yes' if re_x >= 2 else 'NO'} ({re_x:.2f}×) | "
                       f"{'yes' if floor_x <= 2 else 'NO'} ({floor_x:.2f}×) | "
                       f"{'yes' if ing['rss_mb'] <= 1024 else 'NO'} ({ing['rss_mb']:.0f} MB) |")
        print(rows[-1], flush=True)
    import os
    import platform
    text = [f"# Ingest on realistic mixes ({args.size} each, {datetime.now():%Y-%m-%d})", "",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}.  `benchmarks/mixes.py --size {args.size} --repeat "
            f"{args.repeat}`: per mix, ingest and its peers in {args.repeat} interleaved "
            "round(s), medians; ratios are medians of each round's ratio (peer time over "
            "ingest time for the re loop and polars, ingest over floor for the floor); RSS is "
            "the peak of `/usr/bin/time -v`.", "",
            "| mix | MiB | lines | ingest s | MB/s | peak RSS MB | re loop s | re loop / "
            "ingest | polars regex s | polars / ingest | floor s | ingest / floor | lanes |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|", *rows, "",
            "| mix | ≥ 150 MB/s | ≥ 2× the re loop | ≤ 2× the storage floor | peak RSS ≤ 1 GB |",
            "|---|---|---|---|---|", *targets, "",
            "Where an ingest's time went (one more ingest of each mix, before the rounds: "
            "`logpipe ingest --timings`, the main thread's phases; start: the process's "
            "start and imports, its wall time less the time it reports):", "",
            f"| mix | start s | {' s | '.join(PHASES)} s | other s |",
            "|---|---|" + "---|" * len(PHASES) + "---|", *phases]
    out = "\n".join(text) + "\n"
    print(out)
    write_results(HERE / "RESULTS-mixes.md", out)


if __name__ == "__main__":
    main()
