"""Snapshot every public table and view and every command's output on the bundled samples,
so that a refactor can be compared before and after (``diff -r BEFORE AFTER``).

    python scripts/snapshot_outputs.py OUT_DIR [--samples DIR]

The samples are copied to a fixed folder first (``/tmp/logpipe-snapshot-samples``), so that
two checkouts at different paths store the same source paths.  Each table or view is
written as CSV with its rows sorted; each command's stdout and exit status are written to
``commands/<n>.txt``.  Time-of-day values that a command prints about itself (its own
duration), the columns that describe the copy rather than the data (when it was ingested,
its inode) and the last digits of floats (DuckDB sums in parallel, in no fixed order) are
masked, so that two snapshots of one checkout are identical.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

FIXED = Path("/tmp/logpipe-snapshot-samples")
CHECKOUT = Path(__file__).resolve().parents[1]  # the logpipe this snapshot is of
# what a command prints about the machine it ran on, not about the data
VOLATILE = [
    (re.compile(r"time: [0-9.]+ s"), "time: <t> s"),
    (re.compile(r"in [0-9.]+ ?s\b"), "in <t>s"),
    (re.compile(r"\d+(\.\d+)? ?ms per"), "<t> ms per"),
]
VOLATILE_COLUMNS = {"ingested_at", "mtime", "device", "inode", "env_key"}
"""When a copy was made and read, where it lies, and its manifests' mtimes (env_key)."""
LONG_FLOAT = re.compile(r"-?\d+\.\d{10,}(e-?\d+)?")
DIGITS = 8  # significant digits kept of a float: summation order moves the last ones


def _float(text: str) -> str:
    return f"{float(text):.{DIGITS}g}"


def _cell(value: object) -> object:
    return float(f"{value:.{DIGITS}g}") if isinstance(value, float) else value


def logpipe(args: list[str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "logpipe", *args], cwd=cwd, capture_output=True, text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1",
             "TERM": "dumb", "PYTHONPATH": str(CHECKOUT)}, timeout=600,
    )
    text = proc.stdout
    for pat, repl in VOLATILE:
        text = pat.sub(repl, text)
    text = LONG_FLOAT.sub(lambda m: _float(m.group(0)), text)
    return proc.returncode, text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--samples", type=Path, default=CHECKOUT / "sample_logs")
    args = ap.parse_args()
    out: Path = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    (out / "tables").mkdir(parents=True)
    (out / "commands").mkdir()
    shutil.rmtree(FIXED, ignore_errors=True)
    shutil.copytree(args.samples, FIXED)
    work = out / "work"
    work.mkdir()
    db = str(work / "s.duckdb")

    import duckdb

    commands: list[list[str]] = [["ingest", str(FIXED), "--db", db]]
    rc, text = logpipe(commands[0], work)
    (out / "commands" / "00-ingest.txt").write_text(
        f"exit {rc}\n{text.replace(str(out), '<snapshot>')}")

    con = duckdb.connect(db, read_only=True)
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
        "ORDER BY 1").fetchall()]
    for name in names:
        rel = con.sql(f'SELECT * FROM "{name}"')
        cols = ", ".join(f'"{c}"' for c in rel.columns)
        rows = con.execute(f'SELECT * FROM "{name}" ORDER BY {cols}' if cols else
                           f'SELECT * FROM "{name}"').fetchall()
        with open(out / "tables" / f"{name}.csv", "w") as fh:
            fh.write(",".join(rel.columns) + "\n")
            masked = [i for i, c in enumerate(rel.columns) if c in VOLATILE_COLUMNS]
            for row in rows:
                cells = ["<masked>" if i in masked else _cell(v) for i, v in enumerate(row)]
                fh.write(repr(tuple(cells)) + "\n")
    runs = con.execute("SELECT name FROM runs ORDER BY name").fetchall()
    spec = con.execute(
        "SELECT name FROM runs WHERE run_id IN (SELECT run_id FROM run_summary "
        "WHERE spec_algorithm IS NOT NULL) ORDER BY name").fetchall()
    con.close()

    commands = [
        ["runs", "--db", db, "--format", "json"],
        ["check", "--db", db, "--format", "json"],
        ["check", "--db", db],
        ["sweep", "speculative_num_steps", "--db", db, "--format", "json"],
        ["sweep", "max_running_requests", "--db", db],
    ]
    for (name,) in spec:
        commands.append(["compare", "--run", name, "--db", db, "--format", "json"])
        commands.append(["compare", "--run", name, "--db", db])
        commands.append(["explain", "--run", name, "--db", db, "--format", "json"])
    for plan in sorted(FIXED.rglob("plan.toml")):
        commands.append(["compare", "--campaign", plan.parent.name, "--db", db])
    for (name,) in runs[:12]:
        commands.append(["explain", "--run", name, "--db", db])
    for path in sorted(p for p in FIXED.rglob("*") if p.is_file())[:40]:
        commands.append(["doctor", str(path)])
    commands.append(["report", "--db", db, "-o", str(work / "report.html")])
    for i, cmd in enumerate(commands, start=1):
        rc, text = logpipe(cmd, work)
        label = re.sub(r"[^A-Za-z0-9_.-]+", "_", " ".join(a for a in cmd if a != db))[:90]
        shown = " ".join(a for a in cmd).replace(str(out), "<snapshot>")
        (out / "commands" / f"{i:03d}-{label}.txt").write_text(
            f"$ logpipe {shown}\nexit {rc}\n{text.replace(str(out), '<snapshot>')}")
    print(f"{len(names)} tables and views, {len(commands)} commands -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
