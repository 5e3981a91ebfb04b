"""Ingest speed and memory against peers, measured in one run on the same files.

    python benchmarks/run.py --size 1GB [--repeat 1] [--workdir DIR] [--memory-size 5GB]

Generates a realistic SGLang log: a campaign of long-running servers, one per sample log
(every era, the mission runs: prefill, decode, HTTP and noise lines, ranks, speculation),
each its startup, then its workload lines repeated with fresh numbers, then its shutdown.
Also a stress file (whole sample logs repeated, so one launch per ~10 KB: far more
startup, event and wrapper lines than a real log) and, for SGLang's own parser, a log in
the only format it accepts (0.5.4–0.5.8 decode lines).  Then measures each tool as the
median of ``--repeat`` runs with peak RSS from ``/usr/bin/time -v``; ingest, the storage
floor, the ``re`` loop and the polars regex run in interleaved rounds (one of each per
round), and the target ratios are the medians of each round's ratio, so that a machine
whose speed drifts over minutes does not favour whichever ran in its faster spell:

- ``logpipe ingest`` end to end into a fresh database (every line kind), also on the
  stress file and with the polars parser alone (``LOGPIPE_FASTLANE=0``);
- a Python ``re`` loop extracting decode fields (the naive approach);
- SGLang's ``srt/debug_utils/log_parser.py`` from the sglang wheel (``pip download
  --no-deps``; skipped, and said so, when it cannot be downloaded);
- one polars streaming regex extracting decode lines only;
- ``LC_ALL=C grep -c batch``, the scan-speed limit;
- the storage floor: the rows of logpipe's own ingest, written to Parquet, loaded into a
  fresh logpipe database (``peers/storage_floor.py``): what storing them costs DuckDB
  alone, so that ingest can be reported as a ratio to it;
- a spike of parsing inside DuckDB (``peers/duckdb_parse.py``: whole lines through
  ``read_csv``, ``regexp_extract``, ``TRY_CAST``, one ``INSERT ... SELECT``; decode lines
  only, the re loop's pattern).

Then re-ingest of the unchanged file, re-ingest after appending 1 MB, ``logpipe --help``
and, with ``--memory-size``, one ingest of a steady file that size for peak memory.
Prints a table and writes ``benchmarks/RESULTS.md`` (a hand-written ``## Analysis``
section at its end is kept).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLES = ROOT / "sample_logs"
PY = sys.executable


def compile_package() -> None:
    """logpipe's modules and its dependencies' compiled to bytecode before anything is
    timed, as a user's second run finds them: where ``PYTHONDONTWRITEBYTECODE`` is set
    (or the package directory is read-only) every timed process would otherwise compile
    each module it imports again, ~0.1-0.2 s an ingest for logpipe's own (its worker
    processes included), and ~0.25 s more for polars', DuckDB's, typer's and pydantic's
    where they were installed without their bytecode (``pip install --no-compile``, as CI
    installs: an ingest's start 0.65-0.75 s against 0.37-0.45 s).  ``compileall`` writes
    the files whatever that variable says (once: later calls find them current); Python
    reads them either way."""
    import compileall
    import sysconfig

    import logpipe

    compileall.compile_dir(Path(logpipe.__file__).parent, quiet=1)
    paths = sysconfig.get_paths()  # (this interpreter's environment: the dependencies)
    for lib in sorted({paths["purelib"], paths["platlib"]}):
        # quiet=2: some packages ship files that are no Python 3 (templates, old tests)
        compileall.compile_dir(lib, quiet=2, workers=0)


INGEST = "logpipe ingest (all line kinds)"
FLOOR = "storage floor: the same rows loaded from Parquet"
RE_LOOP = "python re loop (decode fields)"
POLARS = "polars streaming regex (decode only)"


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?)B?", text.strip(), re.I)
    if not m:
        raise SystemExit(f"bad size {text!r}: use e.g. 200MB or 1GB")
    return int(float(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2).upper()])


def body_lines() -> tuple[list[str], list[str]]:
    """(startup of one launch, workload lines of every era) from the samples."""
    start = (SAMPLES / "mission" / "eagle3-untuned" / "server.log").read_text().splitlines()
    cut = next(i for i, ln in enumerate(start) if "ready to roll" in ln) + 1
    work: list[str] = []
    for path in sorted((SAMPLES / "eras").glob("*.log")) + sorted(SAMPLES.glob("mission/*/*.log")):
        for line in path.read_text().splitlines():
            if "server_args=" in line or "ready to roll" in line:
                continue
            work.append(line)
    return start[:cut], work


def generate(path: Path, size: int) -> None:
    head, work = body_lines()
    block = ("\n".join(work) + "\n").encode()
    with path.open("wb") as fh:
        fh.write(("\n".join(head) + "\n").encode())
        written = 0
        while written < size:
            fh.write(block)
            written += len(block)


_NUMBER = re.compile(r"\d+")


def _jitter(line: str, rnd: random.Random) -> str:
    """The line with the digits of its message (after SGLang's prefix) redrawn, keeping
    every number's length and form, so no two repetitions are byte-identical."""
    cut = line.find("] ") + 2 if line.startswith("[") else 0

    def redraw(m: re.Match[str]) -> str:
        digits = m.group()
        first = "0" if digits[0] == "0" else rnd.choice("123456789")  # no new leading zero
        return first + "".join(rnd.choice("0123456789") for _ in digits[1:])

    return line[:cut] + _NUMBER.sub(redraw, line[cut:])


def generate_steady(path: Path, size: int, seed: int = 7) -> None:
    """A campaign of long-running servers: one segment per sample log (every era, the
    mission runs), each its startup, then that log's prefill/decode/HTTP lines repeated
    with fresh numbers (a steady server), its noise lines (NCCL, tracebacks, warnings) at
    their own rate, and its shutdown."""
    rnd = random.Random(seed)
    logs = sorted((SAMPLES / "eras").glob("*.log")) + sorted(SAMPLES.glob("mission/*/server.log"))
    share = size // len(logs)
    with path.open("w") as fh:
        for log in logs:
            lines = log.read_text().splitlines()
            first = next(i for i, ln in enumerate(lines) if " batch" in ln and "] " in ln)
            last = max(i for i, ln in enumerate(lines) if " batch" in ln and "] " in ln)
            head, tail = lines[:first], lines[last + 1:]
            # the workload: batch and access lines, and unprefixed noise; a relaunch inside
            # a sample (two eras' samples hold two) is not repeated
            body = [ln for ln in lines[first:last + 1]
                    if " batch" in ln or ' HTTP/1.' in ln or not ln.startswith("[")]
            variants = [[_jitter(ln, rnd) for _ in range(20)] for ln in body]
            fh.write("\n".join(head) + "\n")
            written = 0
            while written < share:
                for options in variants:
                    text = rnd.choice(options) + "\n"
                    fh.write(text)
                    written += len(text)
            fh.write("\n".join(tail) + "\n")


def generate_sglang_format(path: Path, size: int) -> None:
    lines = [ln for ln in (SAMPLES / "eras" / "v0.5.5.log").read_text().splitlines()
             if "Decode batch" in ln]
    block = ("\n".join(lines) + "\n").encode()
    with path.open("wb") as fh:
        written = 0
        while written < size:
            fh.write(block)
            written += len(block)


def run_once(cmd: list[str], env: dict[str, str] | None = None,
             before: list[str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of ``cmd`` under ``/usr/bin/time -v``."""
    if before:
        subprocess.run(before, check=True)
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {proc.stderr[-800:]}")
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)",
                  proc.stderr)
    assert m, proc.stderr[-500:]
    wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    r = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return wall, (int(r.group(1)) / 1024 if r else float("nan"))


def _tree_rss_kb(root: int) -> int:
    """Resident memory of process ``root`` and all its descendants (Linux ``/proc``)."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        pid = int(entry)
        parent[pid] = int(fields.get("PPid", "0").strip() or 0)
        rss[pid] = int((fields.get("VmRSS", "0 kB").split() or ["0"])[0])
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(c for c, pp in parent.items() if pp == pid and c not in tree)
    return sum(rss.get(pid, 0) for pid in tree)


def run_tree(cmd: list[str], every_s: float = 0.05) -> tuple[float, float]:
    """Wall seconds and the peak of the summed RSS (MB) of ``cmd`` and every process it
    starts (worker processes included: ``/usr/bin/time`` reports the largest one alone),
    sampled every ``every_s``."""
    import time

    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(every_s)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {proc.stderr.read()[-800:] if proc.stderr else ''}")
    return wall, peak / 1024


def measure(cmd: list[str], repeat: int, env: dict[str, str] | None = None,
            before: list[str] | None = None) -> dict[str, float]:
    runs = [run_once(cmd, env, before) for _ in range(repeat)]
    return {"seconds": statistics.median(w for w, _ in runs), "rss_mb": max(r for _, r in runs)}


Job = tuple[list[str], dict[str, str] | None, list[str] | None]
"""A command, its extra environment, and a command to run before it (untimed)."""


def measure_rounds(jobs: dict[str, Job], repeat: int
                   ) -> tuple[dict[str, dict[str, float]], list[dict[str, float]]]:
    """Each job once per round, ``repeat`` rounds: a machine whose speed drifts over minutes
    slows every job of a round alike, so the ratios of one round are comparable.  Returns
    the median seconds and peak RSS per job, and each round's seconds."""
    rounds: list[dict[str, float]] = []
    rss: dict[str, float] = {}
    for _ in range(repeat):
        this: dict[str, float] = {}
        for name, (cmd, env, before) in jobs.items():
            this[name], peak = run_once(cmd, env, before)
            rss[name] = max(rss.get(name, 0.0), peak)
        rounds.append(this)
    return ({name: {"seconds": statistics.median(r[name] for r in rounds), "rss_mb": rss[name]}
             for name in jobs}, rounds)


def round_ratio(rounds: list[dict[str, float]], num: str, den: str) -> float:
    """The median over rounds of ``num``'s seconds over ``den``'s in the same round."""
    return statistics.median(r[num] / r[den] for r in rounds)


def sglang_parser(workdir: Path) -> Path | None:
    target = workdir / "sglang_log_parser.py"
    if target.exists():
        return target
    dl = workdir / "wheel"
    proc = subprocess.run([PY, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dl),
                           "sglang"], capture_output=True, text=True)
    wheels = list(dl.glob("sglang-*.whl"))
    if proc.returncode != 0 or not wheels:
        return None
    with zipfile.ZipFile(wheels[0]) as z:
        name = next((n for n in z.namelist() if n.endswith("srt/debug_utils/log_parser.py")),
                    None)
        if name is None:
            return None
        target.write_bytes(z.read(name))
    return target


FLOOR_PARTS = """
import sys
import duckdb
from logpipe.store import stored
sys.path.insert(0, sys.argv[3])
from peers.storage_floor import floor_tables
con = duckdb.connect(sys.argv[1], read_only=True)
for table in floor_tables():
    con.execute(f"COPY (SELECT * FROM {stored(table)}) TO '{sys.argv[2]}/{table}-0.parquet' "
                "(FORMAT parquet, COMPRESSION lz4)")
"""
"""Writes the stored rows of an ingested database as Parquet: the storage floor's input
(arguments: the database, the folder of Parquet files, this folder)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="200MB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--memory-size", default=None,
                    help="also ingest a steady file of this size once for peak RSS (e.g. 5GB)")
    args = ap.parse_args()
    compile_package()
    size = parse_size(args.size)
    work = args.workdir or Path(tempfile.gettempdir()) / "logpipe-bench"
    work.mkdir(parents=True, exist_ok=True)
    mixed = work / f"steady-{args.size}.log"
    stress = work / f"mixed-{args.size}.log"
    sgl_fmt = work / f"sglang-format-{args.size}.log"
    for path, make in ((mixed, generate_steady), (stress, generate)):
        if not path.exists() or path.stat().st_size < size:
            print(f"generating {path} ...", flush=True)
            make(path, size)
    if not sgl_fmt.exists() or sgl_fmt.stat().st_size < size:
        generate_sglang_format(sgl_fmt, size)
    mb = mixed.stat().st_size / 2**20
    lines = int(subprocess.run(["wc", "-l", str(mixed)], capture_output=True, text=True)
                .stdout.split()[0])
    db = work / "bench.duckdb"
    rm_db = [PY, "-c", f"import pathlib; [pathlib.Path(p).unlink(missing_ok=True) for p in "
                       f"({str(db)!r}, {str(db) + '.wal'!r})]"]
    logpipe = [PY, "-m", "logpipe.cli"]
    results: dict[str, dict[str, float]] = {}
    print("building the storage floor's input (one ingest) ...", flush=True)
    subprocess.run([*rm_db], check=True)
    subprocess.run([*logpipe, "ingest", str(mixed), "--db", str(db)], check=True,
                   capture_output=True)
    parts = work / "floor-parts"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir()
    subprocess.run([PY, "-c", FLOOR_PARTS, str(db), str(parts), str(HERE)], check=True)
    floor_db = work / "floor.duckdb"
    rm_floor = [PY, "-c", f"import pathlib; [pathlib.Path(p).unlink(missing_ok=True) for p in "
                          f"({str(floor_db)!r}, {str(floor_db) + '.wal'!r})]"]
    print(f"measuring logpipe ingest, the storage floor and the peers, {args.repeat} "
          "interleaved round(s) ...", flush=True)
    paired, rounds = measure_rounds({
        INGEST: ([*logpipe, "ingest", str(mixed), "--db", str(db)], None, rm_db),
        FLOOR: ([PY, str(HERE / "peers" / "storage_floor.py"), str(parts), str(floor_db)],
                None, rm_floor),
        RE_LOOP: ([PY, str(HERE / "peers" / "re_loop.py"), str(mixed)], None, None),
        POLARS: ([PY, str(HERE / "peers" / "polars_regex.py"), str(mixed)], None, None),
    }, args.repeat)
    results.update(paired)
    shutil.rmtree(parts, ignore_errors=True)
    results["re-ingest, unchanged"] = measure([*logpipe, "ingest", str(mixed), "--db", str(db)],
                                              args.repeat)
    print("measuring the rest ...", flush=True)
    results["logpipe ingest, sample-mix stress file"] = measure(
        [*logpipe, "ingest", str(stress), "--db", str(db)], 1, before=rm_db)
    results["logpipe ingest, polars parser only (LOGPIPE_FASTLANE=0)"] = measure(
        [*logpipe, "ingest", str(mixed), "--db", str(db)], 1, before=rm_db,
        env={"LOGPIPE_FASTLANE": "0"})
    results["duckdb regexp_extract into a table (decode only)"] = measure(
        [PY, str(HERE / "peers" / "duckdb_parse.py"), str(mixed), str(floor_db)],
        args.repeat, before=rm_floor)
    appended = work / "appended.log"
    shutil.copy(mixed, appended)
    subprocess.run([*rm_db], check=True)
    subprocess.run([*logpipe, "ingest", str(appended), "--db", str(db)], check=True,
                   capture_output=True)
    _, workl = body_lines()
    extra = ("\n".join(workl) + "\n").encode()
    with appended.open("ab") as fh:
        added = 0
        while added < 2**20:
            fh.write(extra)
            added += len(extra)
    results["re-ingest, ~1 MB appended"] = measure(
        [*logpipe, "ingest", str(appended), "--db", str(db)], 1)
    parser = sglang_parser(work)
    if parser is not None:
        results["sglang log_parser.py (its format)"] = measure(
            [PY, str(HERE / "peers" / "sglang_log_parser.py"), str(parser), str(sgl_fmt)],
            args.repeat)
    results["LC_ALL=C grep -c batch"] = measure(["grep", "-c", "batch", str(mixed)],
                                                args.repeat, env={"LC_ALL": "C"})
    results["logpipe --help"] = measure([*logpipe, "--help"], args.repeat)
    big = None
    if args.memory_size:
        big = work / f"steady-{args.memory_size}.log"
        if not big.exists() or big.stat().st_size < parse_size(args.memory_size):
            print(f"generating {big} ...", flush=True)
            generate_steady(big, parse_size(args.memory_size))
        print(f"measuring logpipe ingest of {big.name} ...", flush=True)
        results[f"logpipe ingest, {args.memory_size} steady file"] = measure(
            [*logpipe, "ingest", str(big), "--db", str(db)], 1, before=rm_db)

    base = results[INGEST]["seconds"]

    def count_lines(path: Path) -> int:
        return int(subprocess.run(["wc", "-l", str(path)], capture_output=True, text=True)
                   .stdout.split()[0])

    stress_lines = count_lines(stress)
    big_lines = count_lines(big) if big is not None else 0
    rows = []
    for name, r in results.items():
        file_mb = (sgl_fmt.stat().st_size / 2**20 if "sglang" in name
                   else stress.stat().st_size / 2**20 if "stress" in name
                   else big.stat().st_size / 2**20 if big is not None and big.name[7:-4] in name
                   else mb)
        rate = file_mb / r["seconds"] if "re-ingest" not in name and "help" not in name else None
        n_lines = (stress_lines if "stress" in name
                   else big_lines if big is not None and big.name[7:-4] in name else lines)
        rows.append((name, r["seconds"], rate, r["rss_mb"],
                     (n_lines / r["seconds"]) if rate and "sglang" not in name else None,
                     r["seconds"] / base))
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python "
               f"{platform.python_version()}, {platform.platform()}")
    table = ["| measurement | seconds | MB/s | lines/s | peak RSS MB | time vs logpipe ingest |",
             "|---|---|---|---|---|---|"]
    for name, sec, rate, rss, lps, ratio in rows:
        table.append(f"| {name} | {sec:.2f} | {f'{rate:.1f}' if rate else '–'} | "
                     f"{f'{lps:,.0f}' if lps else '–'} | {rss:.0f} | {ratio:.2f}× |")
    ingest = results[INGEST]
    re_ratio = round_ratio(rounds, RE_LOOP, INGEST)
    floor_ratio = round_ratio(rounds, INGEST, FLOOR)
    polars_ratio = round_ratio(rounds, POLARS, INGEST)
    targets = [
        ("end-to-end ingest ≥ 150 MB/s", f"{mb / ingest['seconds']:.1f} MB/s",
         mb / ingest["seconds"] >= 150),
        ("≥ 2× the Python re loop", f"{re_ratio:.2f}×", re_ratio >= 2),
        ("ingest ≤ 2× the storage floor", f"{floor_ratio:.2f}×", floor_ratio <= 2),
        ("(for reference) vs the decode-only polars regex", f"{polars_ratio:.2f}×",
         polars_ratio >= 1),
        ("re-ingest of the unchanged file < 1 s",
         f"{results['re-ingest, unchanged']['seconds']:.2f} s",
         results["re-ingest, unchanged"]["seconds"] < 1),
        ("re-ingest after 1 MB appended < 2 s",
         f"{results['re-ingest, ~1 MB appended']['seconds']:.2f} s",
         results["re-ingest, ~1 MB appended"]["seconds"] < 2),
        ("logpipe --help < 0.5 s", f"{results['logpipe --help']['seconds']:.2f} s",
         results["logpipe --help"]["seconds"] < 0.5),
    ]
    if big is not None:
        peak = results[f"logpipe ingest, {args.memory_size} steady file"]["rss_mb"]
        targets.append((f"peak RSS ≤ 1.5 GB on the {args.memory_size} log", f"{peak:.0f} MB",
                        peak <= 1536))
    text = [f"# Ingest benchmark ({args.size}, {datetime.now():%Y-%m-%d})", "",
            f"Machine: {machine}. File: {mb:.0f} MiB, {lines:,} lines (steady servers of "
            f"every era; the stress file repeats whole sample logs, startups included). "
            f"Median of {args.repeat} run(s); RSS is the peak of `/usr/bin/time -v`.  "
            f"Ingest, the storage floor, the re loop and the polars regex ran in "
            f"{args.repeat} interleaved round(s); their ratios below are the medians of "
            f"each round's ratio.", "",
            *table, "", "| target | measured | met |", "|---|---|---|",
            *[f"| {t} | {m} | {'yes' if ok else 'NO'} |" for t, m, ok in targets]]
    if parser is None:
        text.append("\nSGLang's log_parser.py: not measured (the sglang wheel could not be "
                    "downloaded).")
    out = "\n".join(text) + "\n"
    print(out)
    write_results(HERE / "RESULTS.md", out)


def write_results(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, keeping the hand-written ``## Analysis`` at its end."""
    analysis = ""
    if path.exists() and "\n## Analysis" in path.read_text():
        analysis = "\n## Analysis" + path.read_text().split("\n## Analysis", 1)[1]
    path.write_text(text + analysis)


if __name__ == "__main__":
    main()
