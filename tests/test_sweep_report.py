"""`logpipe sweep` finds the sample's optimum; `logpipe report` renders offline."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

runner = CliRunner()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_sweep_finds_two_steps(sample_db: Path) -> None:
    result = runner.invoke(app, ["sweep", "--by", "speculative_num_steps", "--db",
                                 str(sample_db), "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (group,) = out["groups"]
    assert group["best"] == ["2"]
    assert group["baseline_runs"] == ["baseline-untuned"]
    points = {p["value"]: p for p in group["points"]}
    assert sorted(points, key=int) == ["1", "2", "3", "4", "5", "6"]
    assert points["2"]["runs"] == ["eagle3-untuned", "eagle3-steps2"]
    accept = [points[str(k)]["accept_len"] for k in range(1, 7)]
    assert accept == sorted(accept)  # accept length rises with steps
    assert points["6"]["break_even_accept_len"] > points["6"]["accept_len"]  # 6 steps lose
    excluded = {e["run"]: e["reason"] for e in out["excluded"]}
    assert excluded["plain"] == "environment unknown (no captured manifest)"
    text = runner.invoke(app, ["sweep", "--by", "speculative_num_steps", "--db",
                               str(sample_db)]).stdout
    assert text.splitlines()[0].endswith("best speculative_num_steps = 2 (unreplicated: "
                                         "launch noise unknown: one launch per value)")
    assert out["groups"][0]["replicated"] is False
    assert points["2"]["launches"] == [75.9, 75.9] and points["1"]["launches"] == [70.5]


def test_sweep_of_chosen_run_ids_sees_only_them(sample_db: Path) -> None:
    from logpipe.analysis.sweep import sweep

    picked = dict(query(sample_db, "SELECT name, run_id FROM runs WHERE name IN "
                                   "('baseline-untuned', 'eagle3-steps3', 'eagle3-steps5')"))
    result = sweep(str(sample_db), "speculative_num_steps", run_ids=list(picked.values()))
    (group,) = result.groups
    assert sorted(p.value for p in group.points) == ["3", "5"]
    assert result.excluded == []
    # a run id is a parameter, never SQL: a quote in it selects nothing, breaks nothing
    none = sweep(str(sample_db), "speculative_num_steps", run_ids=["x' OR true --"])
    assert none.groups == [] and none.excluded == []


def test_sweep_reports_ties(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for name in ("baseline-untuned", "eagle3-untuned"):
        shutil.copytree(SAMPLES / "mission" / name, logs / name)
    shutil.copytree(SAMPLES / "sweep" / "eagle3-steps3", logs / "eagle3-steps3")
    # steps 3 re-labelled as a second run at 2 steps' speed: make it a tie by copying 2
    shutil.copytree(SAMPLES / "sweep" / "eagle3-steps2", logs / "again-steps2")
    db = tmp_path / "t.duckdb"
    ingest_paths([logs], db)
    out = json.loads(runner.invoke(app, ["sweep", "--by", "speculative_num_steps", "--db",
                                         str(db), "--format", "json", "--threshold",
                                         "0.05"]).stdout)
    (group,) = out["groups"]
    assert group["best"] == ["2", "3"]
    assert "statistically indistinguishable" in group["verdict"]


def test_sweep_unknown_key(sample_db: Path) -> None:
    result = runner.invoke(app, ["sweep", "--by", "no_such_knob", "--db", str(sample_db)])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: no run has a value for 'no_such_knob'")


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    logs = root / "logs"
    for name in ("baseline-untuned", "eagle3-untuned"):
        shutil.copytree(SAMPLES / "mission" / name, logs / name)
    shutil.copytree(SAMPLES / "profiles" / "eagle3-profiled", logs / "eagle3-profiled")
    shutil.copytree(SAMPLES / "traces" / "h200-decode", logs / "h200-decode")
    for steps in (1, 3):
        shutil.copytree(SAMPLES / "sweep" / f"eagle3-steps{steps}", logs / f"eagle3-steps{steps}")
    # a hostile value in a manifest: it must come out as text, never as markup
    evil = logs / "evil"
    shutil.copytree(SAMPLES / "mission" / "baseline-tuned", evil)
    manifest = json.loads((evil / "env.json").read_text())
    manifest["env"]["NCCL_ALGO"] = "<script>document.title='pwned'</script>"
    (evil / "env.json").write_text(json.dumps(manifest))
    db = root / "r.duckdb"
    ingest_paths([logs], db)
    out = root / "report.html"
    result = runner.invoke(app, ["report", "--db", str(db), "-o", str(out), "--run",
                                 "baseline-untuned", "--run", "eagle3-untuned", "--run",
                                 "eagle3-steps1", "--run", "eagle3-steps3", "--run", "evil",
                                 "--run", "h200-decode"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Wrote {out}: 6 run(s), 4 plot(s)\n"
    return out


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[tuple[str, str]] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
        for name, value in attrs:
            if name in ("src", "href") and value and "://" in value:
                self.external.append((tag, value))


def test_report_is_self_contained_and_escaped(report_file: Path) -> None:
    text = report_file.read_text()
    tags = _Tags()
    tags.feed(text)
    assert tags.external == []  # nothing loaded from the network
    assert tags.scripts == 1 + 4  # plotly.js inline, one call per figure
    assert "<script>document.title" not in text
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in text
    assert "Sweep over speculative_num_steps" in text
    # it leads with the experiment: each speculative run against its baseline
    heads = re.findall(r"<h2>(.*?)</h2>", text)
    assert heads[0] == "Speculative runs against their same-environment baselines"
    assert "<td>eagle3-untuned</td><td>baseline-untuned</td><td>improvement</td>" in text
    assert "<td>+20.7%</td><td>2.1</td><td>1.74</td>" in text
    # then the environment groups: the evil run is apart, its NCCL differences named
    groups = text[text.index("<h2>Environment groups"):]
    assert "NCCL_ALGO: " in groups and "NCCL_P2P_LEVEL" in groups
    assert "Phase shares (speculative decoding)" in text
    assert "<td>verify</td><td>false</td><td>200</td><td>0.898</td>" in text
    assert "<td>eagle3-profiled</td><td>eagle3-untuned</td><td>33.0</td><td>75.9</td>" \
        "<td>2.3</td>" in text
    kernels = text[text.index("<h2>Top kernels (profiler traces)</h2>"):]
    first = re.search(r"<tr><td>h200-decode</td><td>0</td><td>(\w+)</td><td>([^<]+)</td>",
                      kernels)
    assert first and first.groups()[0] == "gemm" and first.groups()[1].startswith("nvjet_")
    assert "<td>h200-decode</td><td>0</td><td>verify</td><td>6</td>" in kernels


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                    "(.ci/run installs it)")
def test_report_renders_in_headless_chromium(report_file: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=10000", "--dump-dom", report_file.as_uri()],
        capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert dom.count('class="plot-container plotly"') == 4, proc.stderr[-2000:]
    assert dom.count('class="main-svg"') >= 6
    assert "<title>pwned</title>" not in dom
    assert "logpipe report" in dom


def test_the_report_aggregates_before_it_plots(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run's timeline shows medians of consecutive lines, not every line; boxes
    are drawn from quantiles, never from raw values; plotly.js travels gzipped.  The real
    SGLang counters campaign: 488 to 1,700 decode lines a launch."""
    import base64
    import gzip

    from logpipe.report import html as report_html

    db = tmp_path / "db.duckdb"
    assert not ingest_paths([SAMPLES / "real-cpu-counters"], db).failed
    monkeypatch.setattr(report_html, "MAX_TIMELINE_POINTS", 100)
    out = tmp_path / "r.html"
    report_html.build_report(db, out, plan="real-cpu-counters", with_checks=False)
    text = out.read_text()
    figures = {m.group(1): json.loads(m.group(2)) for m in re.finditer(
        r"Plotly\.newPlot\('fig-(\w+)', (\[.*?\]), \{", text)}
    lines = query(db, "SELECT r.name, count(*) FROM batch_states b JOIN runs r "
                      "USING (run_id) WHERE b.kind = 'decode' GROUP BY 1")
    assert min(n for _, n in lines) > 400
    shown: dict[str, int] = {}
    for trace in figures["timeline"]:
        run = trace["name"].split(": ")[0]
        shown[run] = shown.get(run, 0) + len(trace["y"])
        grouped = [t for t in trace["text"] if t.startswith("median of ")]
        assert len(grouped) == len(trace["y"]) or len(trace["y"]) <= 50
    assert set(shown) == {n for n, _ in lines}
    assert all(n <= 100 + 50 * 4 for n in shown.values())  # 100, each state at least 50
    boxes = [t for t in figures["distributions"] if t["type"] == "box"]
    assert boxes and all("y" not in t and t["q1"][0] <= t["median"][0] <= t["q3"][0]
                         for t in boxes)
    # the library: gzip, base64, unpacked in the page by the browser
    packed = re.search(r"atob\('([A-Za-z0-9+/=]+)'\)", text).group(1)
    assert gzip.decompress(base64.b64decode(packed)).startswith(b"/**")
    assert len(text) < 5 * 1024 * 1024
