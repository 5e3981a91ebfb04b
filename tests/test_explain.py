"""`logpipe explain`: the decomposition of a speculative pair, from phase dumps (the
mission and the step sweep) or from profiler steps (the real GPU campaign)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.analysis.explain import explain_runs
from logpipe.cli import app
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES

runner = CliRunner()


def test_the_mission_pair_is_explained_by_its_phases(sample_db: Path) -> None:
    ex = explain_runs(str(sample_db), ["eagle3-untuned"])
    assert ex.baseline_run == "baseline-untuned" and ex.method == "phase dump"
    shares = {p.phase: p.share for p in ex.phases}
    assert shares["verify"] == pytest.approx(0.898, abs=0.002)  # verify ≈ 90% of the cycle
    assert shares["draft"] == pytest.approx(0.072, abs=0.002)
    assert ex.base_step_ms == pytest.approx(1000 / 62.9, rel=1e-3)
    assert ex.cycle_ms == pytest.approx(2.1 / 75.9 * 1000, rel=0.01)
    assert ex.observed_speedup == pytest.approx(75.9 / 62.9 - 1, abs=1e-3)  # +20.7%
    assert ex.implied_speedup == pytest.approx(ex.observed_speedup, abs=0.01)
    assert ex.break_even_accept_len == pytest.approx(1.74, abs=0.01)
    assert "200 cycles with 1 in the batch in phase_timings" in ex.sources["cycle_ms"]
    assert "baseline-untuned" in ex.sources["base_step_ms"]


def test_a_synchronised_dump_is_refused_unless_allowed_and_then_named(sample_db: Path
                                                                     ) -> None:
    from logpipe.analysis.results import Options

    refused = explain_runs(str(sample_db), ["eagle3-profiled", "baseline-untuned"])
    assert refused.cycle_ms is None and "profiler" in refused.notes[0]
    ex = explain_runs(str(sample_db), ["eagle3-profiled", "baseline-untuned"],
                      Options(allow_profiled=True))
    assert ex.synchronized and any("device synchronisation" in n for n in ex.notes)
    # the 2.3x slower cycle is the profiler's: the phases say speculation loses
    assert ex.implied_speedup is not None and ex.implied_speedup < 0


def test_the_step_sweep_fits_the_fixed_verify_overhead(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([SAMPLES / "sweep", SAMPLES / "mission" / "baseline-untuned"],
                            db).failed
    ex = explain_runs(str(db), ["eagle3-steps2"])
    fit = ex.sweep
    assert fit is not None and [p.draft_tokens for p in fit.points] == [3, 4, 5, 6, 7]
    # the mission's figures: 25.6 ms at 3 draft tokens, 28.7 ms at 6 -> 22.5 + 1.03 / token
    assert fit.fixed_ms == pytest.approx(22.5, abs=0.15)
    assert fit.per_token_ms == pytest.approx(3.1 / 3, abs=0.03)
    assert fit.predicted_best == fit.measured_best == 3
    for p in fit.points:  # the fitted costs reproduce each launch's throughput
        assert p.predicted_tps == pytest.approx(p.measured_tps, rel=0.02)


def test_explain_from_profiler_steps_says_what_the_spans_leave_out(sample_db: Path) -> None:
    ex = explain_runs(str(sample_db), ["real-gpu-prof-ngram-r1,real-gpu-prof-ngram-r2",
                                       "real-gpu-prof-baseline-r1,real-gpu-prof-baseline-r2"])
    assert ex.method == "trace steps" and [p.phase for p in ex.phases] == ["VERIFY"]
    assert ex.stratum == 48 and ex.accept_len is not None
    assert any("device spans leave host time out" in n for n in ex.notes)
    assert ex.agreement.startswith("unexplained")  # 21% busy GPU: host-bound, said so


def test_cli_explain(sample_db: Path) -> None:
    out = runner.invoke(app, ["explain", "--run", "eagle3-untuned", "--db", str(sample_db)])
    assert out.exit_code == 0, out.output
    assert "verify" in out.output and "break-even:        accept length 1.74" in out.output
    js = runner.invoke(app, ["explain", "--run", "eagle3-untuned", "--db", str(sample_db),
                             "--format", "json"])
    assert json.loads(js.stdout)["baseline_run"] == "baseline-untuned"
    none = runner.invoke(app, ["explain", "--run", "real-cpu-ngram-r1", "--db",
                               str(sample_db)])
    assert none.exit_code == 1 and "not decomposed" in none.output


def test_explain_refuses_a_cycle_and_a_step_of_unlike_batches() -> None:
    """A baseline profiled at the bench's tail (DECODE at batch 1) says nothing of a cycle
    profiled at batch 32: no implied speedup, and the message names both batches."""
    from logpipe.analysis.explain import Explanation, _agreement, _unlike_batches
    from logpipe.analysis.step_phases import Phase

    def phase(kind: str, bs: float) -> Phase:
        return Phase(kind, 5, 1, bs, 2.0, 1.5, 1.0, {})

    refused = _unlike_batches([phase("VERIFY", 32)], [phase("DECODE", 1)])
    assert refused is not None and "batch 32 (VERIFY bs=32)" in refused
    assert "baseline's step at batch 1 (DECODE bs=1)" in refused
    assert _unlike_batches([phase("VERIFY", 32)], [phase("DECODE", 31)]) is None
    assert _unlike_batches([phase("VERIFY", 4)], [phase("DECODE", 3)]) is None
    ex = Explanation(spec_run="s", baseline_run="b")
    ex.refused = refused
    assert _agreement(ex) == "not computed: " + refused


def test_the_profiler_waits_for_the_bench_concurrency() -> None:
    from logpipe.experiment.supervise import bench_concurrency

    assert bench_concurrency("python -m sglang.bench_serving --max-concurrency 32 --x 1") == 32
    assert bench_concurrency("vllm bench serve --max-concurrency=8") == 8
    assert bench_concurrency("python my_bench.py") is None
