"""How long do `logpipe compare` and `logpipe report` take, how much memory, and how big is
the page, on a database of millions of batch rows?

Takes the mission's two launches (`sample_logs/mission/baseline-untuned`,
`eagle3-untuned`: their manifests, benchmarks and logs), grows each log's batch and access
lines (numbers redrawn, as `run.py`'s steady file does) until the two hold about
``--rows`` batch rows, ingests them, then times in fresh processes, as a user runs them:
`compare --run baseline-untuned --run eagle3-untuned` and `report` of the two runs, under
`/usr/bin/time -v` (wall seconds, peak RSS), the HTML's size, and, where Chromium is
installed, how long it takes headless Chromium to load the page and draw every figure
(against the same Chromium loading an empty page).  Targets (issue: judging at scale):
compare <= 2 s and <= 500 MB, report <= 10 s and <= 5 MB, page drawn in < 3 s.

    python benchmarks/report_scale.py [--rows 2M] [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import _jitter, compile_package  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MISSION = ROOT / "sample_logs" / "mission"
ARMS = ("baseline-untuned", "eagle3-untuned")


def grow(src: Path, dst: Path, batch_rows: int, seed: int) -> None:
    """``src``'s log with its batch and access lines repeated (numbers redrawn) until it
    holds about ``batch_rows`` batch lines; start-up and shutdown kept once."""
    rnd = random.Random(seed)
    lines = src.read_text().splitlines()
    first = next(i for i, ln in enumerate(lines) if " batch" in ln)
    last = max(i for i, ln in enumerate(lines) if " batch" in ln)
    body = [ln for ln in lines[first:last + 1] if " batch" in ln or " HTTP/1." in ln]
    per_pass = sum(" batch" in ln for ln in body)
    variants = [[_jitter(ln, rnd) for _ in range(20)] for ln in body]
    with dst.open("w") as fh:
        fh.write("\n".join(lines[:first]) + "\n")
        for _ in range(max(1, batch_rows // per_pass)):
            fh.write("\n".join(rnd.choice(v) for v in variants) + "\n")
        fh.write("\n".join(lines[last + 1:]) + "\n")


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``cmd`` under ``/usr/bin/time -v``; a verdict's
    exit code (1 regression, 4 insufficient) is not a failure."""
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    if proc.returncode not in (0, 1, 4):
        raise RuntimeError(f"{cmd[3:5]} failed: {proc.stderr[-800:]}")
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)",
                  proc.stderr)
    r = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    assert m and r, proc.stderr[-500:]
    wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    return wall, int(r.group(1)) / 1024


def chromium_seconds(page: Path, work: Path) -> float | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return None
    t = time.perf_counter()
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    f"--user-data-dir={work / 'chromium'}", "--dump-dom", page.as_uri()],
                   capture_output=True, timeout=300, check=False)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="2M", help="batch rows in all, e.g. 2M")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    compile_package()
    rows = int(float(args.rows.rstrip("Mm")) * 1e6) if args.rows[-1] in "Mm" \
        else int(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        logs, db = work / "logs", work / "scale.duckdb"
        if not db.exists():
            for i, arm in enumerate(ARMS):
                shutil.copytree(MISSION / arm, logs / arm, dirs_exist_ok=True)
                grow(MISSION / arm / "server.log", logs / arm / "server.log", rows // 2, i)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "logpipe.cli", "ingest", str(logs), "--db",
                            str(db)], check=True, capture_output=True)
            print(f"built: {sum(f.stat().st_size for f in logs.rglob('*')) / 1e6:.0f} MB of "
                  f"logs ingested in {time.perf_counter() - t:.1f} s", flush=True)
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        (n,) = con.execute("SELECT count(*) FROM batches").fetchone()  # type: ignore[misc]
        con.close()
        cli = [sys.executable, "-m", "logpipe.cli"]
        compare = [timed([*cli, "compare", "--run", ARMS[0], "--run", ARMS[1], "--db",
                             str(db)]) for _ in range(args.repeat)]
        page = work / "report.html"
        report = [timed([*cli, "report", "--run", ARMS[0], "--run", ARMS[1], "--db",
                            str(db), "-o", str(page), "--no-checks"])
                  for _ in range(args.repeat)]
        blank = work / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>")
        draw = chromium_seconds(page, work)
        empty = chromium_seconds(blank, work)

        def row(name: str, runs: list[tuple[float, float]]) -> str:
            return (f"| {name} | {statistics.median(w for w, _ in runs):.2f} s | "
                    f"{max(r for _, r in runs):.0f} MB |")

        print(f"\n{n:,} batch rows, 2 runs; median of {args.repeat} fresh processes\n")
        print("| command | seconds | peak RSS |\n|---|---|---|")
        print(row("compare (2 runs)", compare))
        print(row("report (2 runs)", report))
        print(f"\nreport page: {page.stat().st_size / 1e6:.2f} MB")
        if draw is not None and empty is not None:
            print(f"headless Chromium, load and draw: {draw:.2f} s "
                  f"(an empty page: {empty:.2f} s; the difference {draw - empty:.2f} s)")


if __name__ == "__main__":
    main()
