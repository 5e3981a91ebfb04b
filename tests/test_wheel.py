"""A normal (non-editable) install works: the wheel carries the schemas and data files.

The wheel is built from this checkout and unpacked into a folder of its own; the commands
run from a scratch folder with that folder first on the path, so nothing of the checkout
(its top-level ``schemas/`` link, the editable install) can stand in for package data.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(work / "dist"), str(ROOT)],
        capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"wheel build failed:\n{proc.stdout}\n{proc.stderr}")
    (wheel,) = (work / "dist").glob("logpipe-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "logpipe/schemas/views.sql" in names
    assert "logpipe/schemas/migrations/0001_initial.sql" in names
    assert "logpipe/schemas/checks/pairing.toml" in names
    target = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                    "--target", str(target), str(wheel)], check=True, timeout=300)
    return target


def _run(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOGPIPE_SCHEMAS"}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-c", "from logpipe.cli import main; main()",
                           *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_installed_wheel_runs_ingest_compare_check_report(installed: Path,
                                                           tmp_path: Path) -> None:
    where = subprocess.run([sys.executable, "-c", "import logpipe; print(logpipe.__file__)"],
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(installed)},
                           capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(installed))
    version = _run(installed, tmp_path, "--version")
    assert version.returncode == 0 and "parser:" in version.stdout
    mission = SAMPLES / "mission"
    ingest = _run(installed, tmp_path, "ingest", str(mission))
    assert ingest.returncode == 0, ingest.stderr
    runs = _run(installed, tmp_path, "runs", "--format", "csv")
    assert runs.returncode == 0, runs.stderr
    names = [ln.split(",")[1] for ln in runs.stdout.splitlines()[1:]]
    assert len(names) >= 2
    compare = _run(installed, tmp_path, "compare", "--run", names[0], "--run", names[1])
    assert compare.returncode in (0, 1, 3, 4), compare.stderr
    assert "schema migrations not found" not in compare.stderr
    check = _run(installed, tmp_path, "check")
    assert check.returncode in (0, 1), check.stderr + check.stdout
    report = _run(installed, tmp_path, "report", "-o", str(tmp_path / "r.html"))
    assert report.returncode in (0, 1), report.stderr
    assert (tmp_path / "r.html").stat().st_size > 10_000
