"""The command line: exit codes, exact messages, and the README's commands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from logpipe.cli import app
from tests.conftest import ROOT, SAMPLES

runner = CliRunner()


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README must open with a bash block"
    return [ln for ln in block.group(1).splitlines() if ln.strip()]


def test_readme_opens_with_the_two_setup_commands() -> None:
    install, tests = readme_commands()
    assert install.startswith("pip install -e . && logpipe ingest sample_logs/")
    assert tests == "pip install -e '.[dev]' && python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    # (everything the README's test line installs; bytecode left to the first imports)
    assert "pip install --quiet --no-compile -e '.[dev]'" in ci
    assert ci.rstrip().endswith("python -m pytest")


def test_readme_main_command_runs_as_shown(tmp_path: Path) -> None:
    """Run the README's first line (after its pip step) in a scratch folder: the output is
    what the README shows (`python scripts/refresh_readme.py` keeps it so)."""
    install, _ = readme_commands()
    steps = install.split(" && ")[1:]
    (tmp_path / "sample_logs").symlink_to(SAMPLES)
    outputs = []
    for step in steps:
        # the installed console script is this interpreter's `-m logpipe.cli`
        cmd = step.replace("logpipe ", f"{sys.executable} -m logpipe.cli ", 1)
        proc = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True,
                              env={"TZ": "UTC", "PATH": "/usr/bin:/bin"}, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert (tmp_path / "logpipe.duckdb").exists()
    readme = (ROOT / "README.md").read_text()
    ingest_out, sql_out = outputs
    assert re.search(r"\(\d+ new, \d+ skipped\)", ingest_out)
    assert re.search(r"│ decode\s+│ \d+\s+│", sql_out)
    for line in ingest_out.splitlines():
        if line.startswith(("  unlinked", "  skipped")):  # paths differ between checkouts
            line = line.split(":")[0]
        if not line.startswith("  time:"):
            assert line in readme, line
    assert sql_out in readme


def test_ingest_summary_and_exit_code(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["ingest", str(SAMPLES / "damaged"), "--db", str(db)])
    assert result.exit_code == 0
    assert "1 file(s) (1 new)" in result.stdout
    assert "rejects: 2 line(s)  (see the rejects table)" in result.stdout
    again = runner.invoke(app, ["ingest", str(SAMPLES / "damaged"), "--db", str(db)])
    assert "1 file(s) (1 unchanged)" in again.stdout


def test_missing_path_is_an_error_with_location(tmp_path: Path) -> None:
    result = runner.invoke(app, ["ingest", str(tmp_path / "nope"), "--db",
                                 str(tmp_path / "x.duckdb")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: no such file or directory ({tmp_path / 'nope'})",
        "Hint: check the path; folders are searched recursively",
    ]


def test_db_from_environment(tmp_path: Path) -> None:
    db = tmp_path / "env.duckdb"
    result = runner.invoke(app, ["ingest", str(SAMPLES / "eras" / "v0.4.7.log")],
                           env={"LOGPIPE_DB": str(db)})
    assert result.exit_code == 0
    assert db.exists()


def test_sql_formats_and_read_only(sample_db: Path) -> None:
    q = "SELECT name, tp_size FROM runs WHERE name = 'v0.5.1'"
    as_json = runner.invoke(app, ["sql", q, "--db", str(sample_db), "--format", "json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout) == [{"name": "v0.5.1", "tp_size": 2}]
    as_csv = runner.invoke(app, ["sql", q, "--db", str(sample_db), "--format", "csv"])
    assert as_csv.stdout == "name,tp_size\nv0.5.1,2\n"
    jsonl = runner.invoke(app, ["sql", "SELECT 1 AS a UNION ALL SELECT 2", "--db",
                                str(sample_db), "--format", "jsonl"])
    assert sorted(jsonl.stdout.splitlines()) == ['{"a": 1}', '{"a": 2}']
    write = runner.invoke(app, ["sql", "DELETE FROM runs", "--db", str(sample_db)])
    assert write.exit_code == 2
    assert "read-only" in write.stderr
    bad = runner.invoke(app, ["sql", "SELECT nope FROM runs", "--db", str(sample_db)])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("Error: Binder Error")


def test_unknown_format_and_missing_db(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 2
    assert "database does not exist" in result.stderr
    result = runner.invoke(app, ["sql", "SELECT 1", "--format", "xml", "--db", "x"])
    assert result.exit_code == 2
    assert "unknown format 'xml'" in result.stderr


def test_runs_lists_the_mission(sample_db: Path) -> None:
    result = runner.invoke(app, ["runs", "--db", str(sample_db), "--format", "json"])
    assert result.exit_code == 0
    runs = {r["name"]: r for r in json.loads(result.stdout)}
    assert runs["eagle3-untuned"]["speculation"] == "EAGLE3 s2 k1 d3"
    assert runs["eagle3-untuned"]["layout"] == "tp8 ep8"
    assert runs["v0.5.16"]["layout"] == "tp16 dp2 ep16 pp2"
    assert runs["baseline-untuned"]["rows"] > 100


def test_every_format_option_is_checked_against_one_registry(tmp_path: Path) -> None:
    """Each command's ``--format`` comes from one registry: an unknown format is refused
    before any work, naming that command's formats (and the database is not created)."""
    from logpipe.report.formats import RENDERERS, formats

    db = tmp_path / "never.duckdb"
    cases = [(["runs"], "rows"), (["sql", "SELECT 1"], "rows"),
             (["env", "show", "--run", "x"], "env show"),
             (["env", "diff", "--run", "a", "--run", "b"], "env diff"),
             (["compare", "--run", "a", "--run", "b"], "compare"),
             (["explain", "--run", "a"], "explain"), (["check"], "check"),
             (["sweep", "--by", "speculative_num_steps"], "sweep"),
             (["ab", "--baseline", "x", "--candidate", "y", "--bench", "z"], "ab")]
    assert {kind for _, kind in cases} == set(RENDERERS)
    for args, kind in cases:
        res = runner.invoke(app, [*args, "--db", str(db), "--format", "yaml"])
        assert res.exit_code == 2, (args, res.output)
        assert "unknown format 'yaml'" in res.output
        assert "use one of: " + ", ".join(formats(kind)) in res.output, res.output
    assert not db.exists()
