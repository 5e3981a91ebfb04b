"""The Python API: the README's example runs as written (in a scratch folder holding the
samples), and its results are the CLI's."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import logpipe
from logpipe.cli import app
from tests.conftest import ROOT, SAMPLES


def readme_example() -> str:
    text = (ROOT / "README.md").read_text().split("## From Python", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", text.split("\n## ", 1)[0], re.S)
    return code


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SAMPLES / "mission", tmp_path / "sample_logs" / "mission")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)  # noqa: S102 - our README
    out = capsys.readouterr().out
    assert "['improvement'] 0" in out
    runs = scope["runs"]
    assert "eagle3-untuned" in runs["name"].to_list()  # type: ignore[index]
    samples = scope["samples"]
    assert samples.height > 0 and set(samples["engine"]) == {"sglang"}  # type: ignore[attr-defined]
    report = scope["report"]
    assert isinstance(report, dict) and report["results"]


def test_api_results_equal_the_cli_json(tmp_path: Path) -> None:
    db = logpipe.open(tmp_path / "db.duckdb")
    summary = db.ingest([SAMPLES / "mission"])
    assert not summary.to_dict()["failed"] and "Ingested into" in str(summary)
    verdict = db.compare("baseline-untuned", "eagle3-untuned")
    cli = CliRunner().invoke(app, ["compare", "--run", "baseline-untuned", "--run",
                                   "eagle3-untuned", "--db", str(db.path), "--format", "json"])
    assert verdict.to_dict() == json.loads(cli.stdout)
    assert verdict._repr_html_().startswith("<pre>") and "IMPROVEMENT" in str(verdict)
    with pytest.raises(ValueError):
        db.compare()
    assert os.path.exists(db.path)
